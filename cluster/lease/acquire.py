"""One driver per work area: the lease ``<work_url>/lease.json``.

A driver takes the lease once its checks have passed and before it writes
anything else (:func:`acquire_lease`); it names the driver (Ray job submission
id, host, pid), when it started and its last heartbeat, which a daemon thread
refreshes every ``lease.heartbeat_seconds`` (10 s; at least 1 s and at most a
third of the expiry).  The lease is removed when the driver ends, successful or not.

* A second driver finds a live lease and refuses (:class:`LeaseHeld`, exit 2),
  naming the holder and how to stop it, or when its lease will expire.
* A lease that is not one (not JSON, non-finite times, an expiry over an hour, a
  file over 64 KiB: only that much is read) is refused like a live one, naming
  the file; ``--force-takeover`` replaces it.
* A lease whose heartbeat is older than its ``expiry_seconds`` (60 s; 5 s to 1 h) belongs
  to a dead driver: the next driver takes it over and resumes.  Two drivers may
  find the same expired lease; each first creates the marker
  ``lease.takeover-<stale token>-1.json`` with create-if-absent, so exactly one
  of them goes on: it re-reads the lease and replaces it only if it still holds
  that stale token, then removes the marker.  A taker that loses sees the
  winner's marker (or, once it is removed, the winner's lease) and refuses.  A
  marker left by a taker that died on the spot is itself judged by its age, and
  the next one numbered ``-2``, ``-3``... is used.
* ``force`` (``--force-takeover``) replaces any lease: for an operator who knows
  the old driver is gone.  If it is not, its heartbeat finds the lease taken
  within one beat and it stops publishing (:class:`LeaseLost`, exit 1).

The drivers' clocks are assumed to agree to well within the expiry.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from pydantic import Field, ValidationInfo, field_validator

from cluster.lease.store import LeaseStore
from pipeline.configbase import Frozen
from pipeline.errors import InputRefused, LeaseError, RecastError
from pipeline.store import jsonload, storage

logger = logging.getLogger(__name__)

Clock = Callable[[], float]  # epoch seconds now (time.time); a test passes one it advances itself

LEASE_NAME = "lease.json"
ACQUIRE_ATTEMPTS = 5


class LeaseHeld(LeaseError):
    """Another driver holds the work area (or is taking it over): this one does not start."""


class LeaseLost(LeaseError):
    """This driver's lease was taken over (or could not be refreshed): it stops publishing."""


EXPIRY_MIN_SECONDS, EXPIRY_MAX_SECONDS = 5.0, 3600.0
"""``lease.expiry_seconds``: long enough that a busy store does not expire a live driver, short
enough that a crashed one does not lock its work area for more than an hour."""
HEARTBEAT_MIN_SECONDS = 1.0
"""``lease.heartbeat_seconds``: a lease is rewritten at most once a second."""
BEATS_PER_EXPIRY = 3
"""A lease is refreshed at least this many times within its expiry."""


class LeaseConfig(Frozen):
    """``lease:`` of a job spec: how often a driver refreshes its lease, and when a silent one is dead.

    Both are finite numbers of seconds (nan and inf are refused): expiry 5 s to 1 h, heartbeat at
    least 1 s and at most a third of the expiry.  Tests that need faster leases build one with
    ``LeaseConfig.model_construct(...)``, which a job spec cannot reach."""

    expiry_seconds: float = Field(
        default=60.0, ge=EXPIRY_MIN_SECONDS, le=EXPIRY_MAX_SECONDS, allow_inf_nan=False
    )
    """A lease not refreshed for this long is dead: another driver may take the work area over."""
    heartbeat_seconds: float = Field(
        default=10.0, ge=HEARTBEAT_MIN_SECONDS, le=EXPIRY_MAX_SECONDS, allow_inf_nan=False
    )
    """How often the driver refreshes its lease (at most a third of ``expiry_seconds``)."""

    @field_validator("heartbeat_seconds")
    @classmethod
    def _beats_within_expiry(cls, value: float, info: ValidationInfo) -> float:
        expiry = info.data.get("expiry_seconds")
        if expiry is not None and value * BEATS_PER_EXPIRY > expiry:
            raise ValueError(f"{value:g} must be at most a third of lease.expiry_seconds ({expiry:g})")
        return value


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

    @classmethod
    def new(
        cls, job_id: str, expiry_seconds: float, env: Mapping[str, str] | None = None, *, now: float
    ) -> Holder:
        return cls(
            token=uuid.uuid4().hex,
            job_id=job_id,
            submission_id=submission_id(os.environ if env is None else env),
            host=socket.gethostname(),
            pid=os.getpid(),
            acquired_at=now,
            heartbeat_at=now,
            expiry_seconds=expiry_seconds,
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
        return 0 < self.expiry_seconds <= EXPIRY_MAX_SECONDS and isinstance(self.token, str)

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


def lease_url(work_url: str) -> str:
    return storage.join(work_url, LEASE_NAME)


class Lease:
    """A held lease, refreshed by its own daemon thread until :meth:`release`."""

    def __init__(
        self,
        work_url: str,
        holder: Holder,
        store: LeaseStore,
        config: LeaseConfig,
        *,
        took_over: Holder | None = None,
        reason: str | None = None,
        clock: Clock = time.time,
    ) -> None:
        self.work_url = work_url
        self.clock = clock
        """Epoch seconds now: heartbeats and messages (a test passes one it advances itself)."""
        self.url = lease_url(work_url)
        self.holder = holder
        self.store = store
        self.config = config
        self.took_over = took_over
        self.reason = reason
        """None: the lease was free; "expired" or "forced": ``took_over``'s lease was replaced."""
        self._lost: str | None = None
        self._released = False
        self._refreshed = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._heartbeat, name="lease-heartbeat", daemon=True)
        self._thread.start()

    # -- what the driver asks
    def check(self) -> None:
        """Raise LeaseLost once the heartbeat found the lease gone (no store access)."""
        if self._lost is not None:
            raise LeaseLost(self.work_url, self._lost)

    def confirm(self) -> None:
        """Raise LeaseLost unless the lease in the store is still this driver's (one read): before a publish."""
        self.check()
        current = read_holder(self.store, self.url)
        if current is None or current.token != self.holder.token:
            self._lose(current)
            self.check()

    def guard(self, fresh: bool = False) -> None:
        """:meth:`confirm` when ``fresh``, else :meth:`check`."""
        self.confirm() if fresh else self.check()

    def record(self) -> dict[str, Any]:
        """For the summary: this driver's holder, and whose lease it took over and why."""
        return {
            "holder": self.holder.to_dict(),
            "took_over": self.took_over.to_dict() if self.took_over is not None else None,
            "reason": self.reason,
        }

    def takeover_message(self) -> str | None:
        if self.reason is None:
            return None
        whose = self.took_over.describe(self.clock()) if self.took_over is not None else "an unreadable lease"
        how = "forced (--force-takeover)" if self.reason == "forced" else "its heartbeat had expired"
        return f"took over the lease of work area {self.work_url} from {whose}: {how}"

    def release(self) -> None:
        """Stop the heartbeat and remove the lease if it is still this driver's."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        if self._released or self._lost is not None:
            return
        self._released = True
        try:
            current = read_holder(self.store, self.url)
            if current is not None and current.token == self.holder.token:
                self.store.remove(self.url)
        except RecastError as exc:
            logger.warning("could not release the lease %s (it expires by itself): %s", self.url, exc)

    # -- the heartbeat thread
    def _heartbeat(self) -> None:
        while not self._stop.wait(self.config.heartbeat_seconds) and self._lost is None:
            try:
                current = read_holder(self.store, self.url)
                if current is None or current.token != self.holder.token:
                    self._lose(current)
                    return
                beat = self.holder.beat(self.clock())
                self.store.replace(self.url, beat.to_bytes())
                self.holder = beat
                self._refreshed = time.monotonic()
            except RecastError as exc:
                silent = time.monotonic() - self._refreshed
                logger.warning(
                    "could not refresh the lease %s (%.0f s since the last refresh): %s",
                    self.url,
                    silent,
                    exc,
                )
                if silent > self.holder.expiry_seconds:
                    self._lost = (
                        f"the lease could not be refreshed for {silent:.0f} s, longer than its expiry: "
                        "another driver may have taken it over; this driver stops"
                    )
                    logger.error("%s", self._lost)
                    return

    def _lose(self, current: Holder | None) -> None:
        if self._lost is None:
            whom = (
                f"by {current.describe(self.clock())}" if current is not None else "(lease.json was removed)"
            )
            self._lost = f"the lease was taken over {whom}; this driver stops publishing"
            logger.error("work area %s: %s", self.work_url, self._lost)


def acquire_lease(
    work_url: str,
    config: LeaseConfig,
    *,
    job_id: str,
    force: bool = False,
    store: LeaseStore | None = None,
    env: Mapping[str, str] | None = None,
    clock: Clock = time.time,
) -> Lease:
    """Take the work area's lease for this driver, or raise LeaseHeld naming who has it.

    ``clock`` gives epoch seconds (``time.time``): whether a lease has expired is judged by it,
    and the lease taken keeps it for its heartbeats."""
    store = store or LeaseStore(work_url)
    url = lease_url(work_url)
    me = Holder.new(job_id, config.expiry_seconds, env, now=clock())
    for _ in range(ACQUIRE_ATTEMPTS):
        try:
            current_bytes = store.read(url)
        except InputRefused as exc:
            current_bytes, unreadable = b"", f" ({exc.reason})"
        else:
            unreadable = ""
        if current_bytes is None:
            if store.create(url, me.to_bytes()):
                logger.info("work area %s: lease taken", work_url)
                return Lease(work_url, me, store, config, clock=clock)
            continue  # another driver created it in between: look at it
        current = Holder.from_bytes(current_bytes)
        now = clock()
        if force:
            store.replace(url, me.to_bytes())
            lease = Lease(work_url, me, store, config, took_over=current, reason="forced", clock=clock)
            logger.warning("%s", lease.takeover_message())
            return lease
        if current is None:
            raise LeaseHeld(
                work_url,
                f"{url} is not a readable lease{unreadable}; if no driver is running on this work area, "
                "resubmit with --force-takeover",
            )
        if not current.expired(now):
            raise LeaseHeld(work_url, f"in use by {current.describe(now)}; {current.how_to_stop(now)}")
        if _take_over(work_url, store, current, me, clock):
            lease = Lease(work_url, me, store, config, took_over=current, reason="expired", clock=clock)
            logger.warning("%s", lease.takeover_message())
            return lease
    raise LeaseHeld(work_url, "its lease kept changing hands while this driver tried to take it; resubmit")


def _take_over(work_url: str, store: LeaseStore, stale: Holder, me: Holder, clock: Clock) -> bool:
    """Replace the expired lease ``stale``; False when it changed meanwhile (the caller looks again)."""
    url = lease_url(work_url)
    number = 1
    while True:
        marker = storage.join(work_url, f"lease.takeover-{stale.token}-{number}.json")
        if store.create(marker, me.to_bytes()):
            try:
                if read_holder(store, url) != stale:
                    return False  # released, or replaced by a taker that finished before us
                store.replace(url, me.to_bytes())
                return True
            finally:
                for n in range(1, number + 1):
                    store.remove(storage.join(work_url, f"lease.takeover-{stale.token}-{n}.json"))
        taker = read_holder(store, marker)
        if taker is None:
            return False  # that taker finished and removed its marker: the lease is its now
        now = clock()
        if not taker.expired(now):
            raise LeaseHeld(
                work_url,
                f"its expired lease ({stale.describe(now)}) is being taken over by {taker.describe(now)}; "
                f"{taker.how_to_stop(now)}",
            )
        number += 1  # that taker died between its marker and the lease: the next marker
