"""Who holds a work area's lease: :class:`Holder`, the record in ``lease.json`` (and in a takeover marker).

It names the driver (Ray job submission id, job id, host, pid), when it took the lease, its last
heartbeat and its expiry, and, since a dead driver on this host is recognised at once
(:mod:`cluster.lease.process`), what makes its pid one process: the host's boot id, the pid
namespace and the process start time.  A lease written before those three were recorded reads
with them None, and is judged by its expiry alone.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import os
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from cluster.lease.process import ProcessIdentity, this_process, why_gone
from cluster.lease.store import LeaseStore
from pipeline.errors import InputRefused
from pipeline.store import jsonload

logger = logging.getLogger(__name__)

EXPIRY_MIN_SECONDS, EXPIRY_MAX_SECONDS = 5.0, 3600.0
"""``lease.expiry_seconds``: long enough that a busy store does not expire a live driver, short
enough that a crashed one does not lock its work area for more than an hour."""


def submission_id(env: Mapping[str, str]) -> str | None:
    """The Ray job submission id of this driver (``ray job submit`` passes it in the job config)."""
    if env.get("RAY_JOB_SUBMISSION_ID"):
        return env["RAY_JOB_SUBMISSION_ID"]
    try:
        found = jsonload.loads(env.get("RAY_JOB_CONFIG_JSON_ENV_VAR", ""))["metadata"]["job_submission_id"]
    except (ValueError, KeyError, TypeError):
        return None
    return str(found) if found else None


@dataclass(frozen=True)
class Holder:
    """Who holds (or is taking over) a lease; ``token`` is unique to one run of one driver."""

    token: str
    job_id: str
    submission_id: str | None
    host: str
    pid: int
    acquired_at: float
    heartbeat_at: float
    """Epoch seconds, the holder's clock."""
    expiry_seconds: float
    boot_id: str | None = None
    pid_ns: str | None = None
    pid_start: int | None = None
    """The holder's process on its host (:mod:`cluster.lease.process`); None in a lease written
    before these were recorded, or where ``/proc`` does not tell: then only its expiry frees it."""

    @classmethod
    def new(
        cls, job_id: str, expiry_seconds: float, env: Mapping[str, str] | None = None, *, now: float
    ) -> Holder:
        here = this_process()
        return cls(
            token=uuid.uuid4().hex,
            job_id=job_id,
            submission_id=submission_id(os.environ if env is None else env),
            host=here.host,
            pid=here.pid,
            acquired_at=now,
            heartbeat_at=now,
            expiry_seconds=expiry_seconds,
            boot_id=here.boot_id,
            pid_ns=here.pid_ns,
            pid_start=here.pid_start,
        )

    @classmethod
    def from_bytes(cls, data: bytes | None) -> Holder | None:
        """The holder in a lease's bytes; None when there are none or they are not a lease."""
        if data is None:
            return None
        try:
            holder = cls(**jsonload.loads(data))
        except (ValueError, TypeError):  # not JSON, too deep, a key twice (jsonload.JsonError), not a holder
            return None
        return holder if holder._well_formed() else None

    def _well_formed(self) -> bool:
        """Finite times and an expiry of at most :data:`EXPIRY_MAX_SECONDS` (a hand-made lease of
        ``Infinity`` would otherwise hold the work area forever)."""
        times: tuple[object, ...] = (self.acquired_at, self.heartbeat_at, self.expiry_seconds)  # as read
        if not all(
            isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t) for t in times
        ):
            return False
        names: tuple[object, ...] = (self.boot_id, self.pid_ns)  # as read: any JSON
        start: object = self.pid_start
        if not all(v is None or isinstance(v, str) for v in names) or not (
            start is None or type(start) is int
        ):
            return False
        return 0 < self.expiry_seconds <= EXPIRY_MAX_SECONDS and isinstance(self.token, str)

    def process(self) -> ProcessIdentity:
        return ProcessIdentity(self.host, self.boot_id, self.pid_ns, self.pid, self.pid_start)

    def gone(self) -> str | None:
        """Why this holder's process is gone, when it ran on this host and is; else None."""
        return why_gone(self.process())

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), indent=1).encode()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def beat(self, now: float) -> Holder:
        return replace(self, heartbeat_at=now)

    def age(self, now: float) -> float:
        return max(0.0, now - self.heartbeat_at)

    def expired(self, now: float) -> bool:
        return self.age(now) > self.expiry_seconds

    def describe(self, now: float) -> str:
        who = f"Ray job {self.submission_id}" if self.submission_id else "a driver"
        started = dt.datetime.fromtimestamp(self.acquired_at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"{who} on host {self.host} (pid {self.pid}), started {started}, last heartbeat {self.age(now):.0f} s ago"

    def how_to_stop(self, now: float) -> str:
        stop = (
            f"stop it with `ray job stop {self.submission_id}`"
            if self.submission_id
            else f"stop it (pid {self.pid} on {self.host})"
        )
        left = max(0.0, self.expiry_seconds - self.age(now))
        return (
            f"{stop}, or, if it is dead, resubmit in {left:.0f} s when its lease expires "
            f"({self.expiry_seconds:g} s without a heartbeat) to resume; --force-takeover if you know it is gone"
        )


def read_holder(store: LeaseStore, url: str) -> Holder | None:
    """The holder of the lease (or takeover marker) at ``url``; None when there is none or it is
    not a lease, including one larger than :data:`~pipeline.limits.LEASE_MAX_BYTES`."""
    try:
        return Holder.from_bytes(store.read(url))
    except InputRefused as exc:
        logger.warning("%s: %s; read as a corrupt lease", url, exc.reason)
        return None
