"""One driver per work area: the lease ``<work_url>/lease.json``.

A driver takes the lease once its checks have passed and before it writes
anything else (:func:`acquire_lease`); it names the driver (Ray job submission
id, host, pid, and what makes that pid one process: the host's boot id, the pid
namespace and the process start time, :mod:`cluster.lease.process`), when it
started and its last heartbeat, which a daemon thread refreshes every
``lease.heartbeat_seconds`` (10 s; at least 1 s and at most a third of the
expiry).  Each refresh is a compare-and-swap (:meth:`LeaseStore.swap
<cluster.lease.store.LeaseStore.swap>`: S3 ``If-Match`` on the ETag this driver
wrote last, a locked read-compare-rename on a local disk): a driver that
stalled while its lease was taken over finds it lost on its next beat
(:class:`LeaseLost`) and never overwrites the taker's lease.  The lease is
removed when the driver ends, successful or not (again only if it is still the
version this driver wrote).

* A second driver finds a live lease and refuses (:class:`LeaseHeld`, exit 2),
  naming the holder and how to stop it, or when its lease will expire.
* A lease that is not one (not JSON, non-finite times, an expiry over an hour, a
  file over 64 KiB: only that much is read) is refused like a live one, naming
  the file; ``--force-takeover`` replaces it.
* A lease whose heartbeat is older than its ``expiry_seconds`` (60 s; 5 s to 1 h) belongs
  to a dead driver: the next driver takes it over and resumes.
* A live lease whose holder ran on this host (same host name, boot id and pid
  namespace) and whose process is gone (its pid not running, a zombie, or reused
  by a process started at another time) is taken over at once, saying why.  A
  holder on another host, or a lease written without those fields, waits for its
  expiry.  Two drivers may
  find the same expired lease; each first creates the marker
  ``lease.takeover-<stale token>-1.json`` with create-if-absent, so exactly one
  of them goes on: it re-reads the lease and replaces it only if it still holds
  that stale token, then removes the marker.  A taker that loses sees the
  winner's marker (or, once it is removed, the winner's lease) and refuses.  A
  marker left by a taker that died on the spot is itself judged by its age (or
  its process, when it ran on this host), and the next one numbered ``-2``,
  ``-3``... is used.  The replacement itself is a compare-and-swap against the
  lease as read, so a holder that was only slow and beat meanwhile keeps it.
* ``force`` (``--force-takeover``) replaces any lease: for an operator who knows
  the old driver is gone.  If it is not, its heartbeat finds the lease taken
  within one beat and it stops publishing (:class:`LeaseLost`, exit 1).

The drivers' clocks are assumed to agree to well within the expiry.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import Field, ValidationInfo, field_validator

from cluster.lease.holder import EXPIRY_MAX_SECONDS, EXPIRY_MIN_SECONDS, Holder, read_holder
from cluster.lease.store import LeaseStore, Stored
from pipeline.configbase import Frozen
from pipeline.errors import InputRefused, LeaseError, RecastError
from pipeline.store import storage

logger = logging.getLogger(__name__)

Clock = Callable[[], float]  # epoch seconds now (time.time); a test passes one it advances itself

LEASE_NAME = "lease.json"
ACQUIRE_ATTEMPTS = 5


class LeaseHeld(LeaseError):
    """Another driver holds the work area (or is taking it over): this one does not start."""


class LeaseLost(LeaseError):
    """This driver's lease was taken over (or could not be refreshed): it stops publishing."""


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
    """A lease not refreshed for this long is dead: another driver may take the work area over.
    (A driver on the holder's own host takes it over at once when the holder's process is gone.)"""
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
        version: str,
        took_over: Holder | None = None,
        reason: str | None = None,
        why: str | None = None,
        clock: Clock = time.time,
    ) -> None:
        self.work_url = work_url
        self.clock = clock
        """Epoch seconds now: heartbeats and messages (a test passes one it advances itself)."""
        self.url = lease_url(work_url)
        self.holder = holder
        self.version = version
        """The version of ``lease.json`` this driver wrote last (S3: its ETag): each refresh and the
        release act only on that version (:meth:`LeaseStore.swap`)."""
        self.store = store
        self.config = config
        self.took_over = took_over
        self.reason = reason
        """None: the lease was free; "expired", "gone" (its holder's process on this host had ended)
        or "forced": ``took_over``'s lease was replaced."""
        self.why = why
        """For "gone": how the holder's process was found gone ("pid 123 not running")."""
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
            "why": self.why,
        }

    def takeover_message(self) -> str | None:
        if self.reason is None:
            return None
        whose = self.took_over.describe(self.clock()) if self.took_over is not None else "an unreadable lease"
        if self.reason == "gone" and self.took_over is not None:
            return (
                f"took over the lease of work area {self.work_url}: holder {whose} ran on this host and "
                f"is gone ({self.why}); lease taken over without waiting for its expiry "
                f"({self.took_over.expiry_seconds:g} s)"
            )
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
            if not self.store.remove_if(self.url, self.version):
                mine = self._mine()
                if mine is not None:
                    self.store.remove_if(self.url, mine.version)
        except RecastError as exc:
            logger.warning("could not release the lease %s (it expires by itself): %s", self.url, exc)

    # -- the heartbeat thread
    def _heartbeat(self) -> None:
        while not self._stop.wait(self.config.heartbeat_seconds) and self._lost is None:
            try:
                self._beat()
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

    def _beat(self) -> None:
        """One refresh: a compare-and-swap on the version this driver wrote last.  When that is no
        longer there, the lease is read: another holder's (or none) means it was lost; this
        driver's own means its last write landed after its answer was lost (a PUT retried after a
        dropped response), and the swap is tried once more on that version."""
        beat = self.holder.beat(self.clock())
        version = self.store.swap(self.url, beat.to_bytes(), self.version)
        if version is None:
            mine = self._mine()
            if mine is not None:
                version = self.store.swap(self.url, beat.to_bytes(), mine.version)
        if version is None:
            self._lose(read_holder(self.store, self.url))
            return
        self.holder, self.version = beat, version
        self._refreshed = time.monotonic()

    def _mine(self) -> Stored | None:
        """The lease as stored, when it is still this driver's (its token); else None."""
        try:
            stored = self.store.read_versioned(self.url)
        except InputRefused:
            return None
        current = Holder.from_bytes(stored.data) if stored is not None else None
        return stored if current is not None and current.token == self.holder.token else None

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
            stored = store.read_versioned(url)
        except InputRefused as exc:
            stored, unreadable = Stored(b"", ""), f" ({exc.reason})"
        else:
            unreadable = ""
        if stored is None:
            version = store.create(url, me.to_bytes())
            if version is not None:
                logger.info("work area %s: lease taken", work_url)
                return Lease(work_url, me, store, config, version=version, clock=clock)
            continue  # another driver created it in between: look at it
        current = Holder.from_bytes(stored.data)
        now = clock()
        if force:
            version = store.replace(url, me.to_bytes())
            lease = Lease(
                work_url, me, store, config, version=version, took_over=current, reason="forced", clock=clock
            )
            logger.warning("%s", lease.takeover_message())
            return lease
        if current is None:
            raise LeaseHeld(
                work_url,
                f"{url} is not a readable lease{unreadable}; if no driver is running on this work area, "
                "resubmit with --force-takeover",
            )
        gone = None if current.expired(now) else current.gone()
        if gone is None and not current.expired(now):
            raise LeaseHeld(work_url, f"in use by {current.describe(now)}; {current.how_to_stop(now)}")
        version = _take_over(work_url, store, me, stale=stored, holder=current, clock=clock)
        if version is not None:
            lease = Lease(
                work_url, me, store, config, version=version, took_over=current,
                reason="expired" if gone is None else "gone", why=gone, clock=clock,
            )  # fmt: skip
            logger.warning("%s", lease.takeover_message())
            return lease
    raise LeaseHeld(work_url, "its lease kept changing hands while this driver tried to take it; resubmit")


def _take_over(
    work_url: str, store: LeaseStore, me: Holder, *, stale: Stored, holder: Holder, clock: Clock
) -> str | None:
    """Replace the expired (or gone) lease ``stale`` of ``holder``: the version written, or None
    when it changed meanwhile (the caller looks again)."""
    url = lease_url(work_url)
    token = holder.token
    number = 1
    while True:
        marker = storage.join(work_url, f"lease.takeover-{token}-{number}.json")
        if store.create(marker, me.to_bytes()) is not None:
            try:
                # None: released, replaced by a taker that finished before us, or refreshed by a
                # holder that was only slow.
                return store.swap(url, me.to_bytes(), stale.version)
            finally:
                for n in range(1, number + 1):
                    store.remove(storage.join(work_url, f"lease.takeover-{token}-{n}.json"))
        taker = read_holder(store, marker)
        if taker is None:
            return None  # that taker finished and removed its marker: the lease is its now
        now = clock()
        if not taker.expired(now) and taker.gone() is None:
            raise LeaseHeld(
                work_url,
                f"its lease ({holder.describe(now)}) is being taken over by "
                f"{taker.describe(now)}; {taker.how_to_stop(now)}",
            )
        number += 1  # that taker died between its marker and the lease: the next marker
