"""The work area's lease on a local disk and on the loopback S3 store, without Ray.

Races are real: several threads (or processes) at a barrier, on the real store.
A dead driver is a real process killed with SIGKILL, or the lease object a dead
driver leaves (a heartbeat older than its expiry, or the identity of a process
that is gone) written where it would be.  A stalled driver is a real lease whose
heartbeat thread is held, by the store it writes through, just before it writes.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from cluster.lease.acquire import Lease, LeaseConfig, LeaseHeld, LeaseLost, acquire_lease, lease_url
from cluster.lease.holder import Holder, submission_id
from cluster.lease.process import this_process
from cluster.lease.store import LeaseStore
from cluster.spec.job import parse_spec
from pipeline.errors import SpecError
from pipeline.store import storage
from tests.raytools import REPO

FAST = LeaseConfig.model_construct(expiry_seconds=1.5, heartbeat_seconds=0.2)
"""Below a job spec's bounds (expiry >= 5 s, heartbeat >= 1 s): built without validation, as no spec can."""
STEADY = LeaseConfig(expiry_seconds=30, heartbeat_seconds=5)
"""For holders that must stay live through a test on a busy machine."""
SUBMITTED = {"RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps({"metadata": {"job_submission_id": "raysubmit_Ab12"}})}


@pytest.fixture(params=["local", "s3"])
def work(request, tmp_path) -> str:
    """A job's work area on a local disk, or on the loopback S3 store."""
    if request.param == "local":
        return str(tmp_path / ".recast-work" / "job")
    bucket = request.getfixturevalue("s3_bucket")
    return f"{bucket}/work/job"


def _race(n: int, fn: Callable[[int], Any]) -> list[Any]:
    """Run ``fn(i)`` on ``n`` threads released together; each result or the exception it raised."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n

    def go(i: int) -> None:
        barrier.wait()
        try:
            results[i] = fn(i)
        except Exception as exc:  # noqa: BLE001 - the test looks at every outcome
            results[i] = exc

    threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


def _stale(job_id: str = "job", age: float = 120.0, pid: int = 4242) -> Holder:
    """The lease a driver that died ``age`` seconds ago leaves behind."""
    then = time.time() - age
    return Holder("dead" + "0" * 28, job_id, None, "render-07", pid, then - 600, then, 60.0)


def _leftovers(work: str) -> list[str]:
    return [u for u in storage.listdir(work) if "lease.takeover-" in u or ".tmp-" in u]


def test_second_driver_is_refused_naming_the_holder(work) -> None:
    first = acquire_lease(work, STEADY, job_id="job", env=SUBMITTED)
    try:
        stored = json.loads(storage.read_bytes(lease_url(work)))
        assert stored["submission_id"] == "raysubmit_Ab12" and stored["pid"] == os.getpid()
        assert stored["host"] and stored["heartbeat_at"] >= stored["acquired_at"] > 0
        with pytest.raises(LeaseHeld) as refused:
            acquire_lease(work, FAST, job_id="job")
        message = str(refused.value)
        for words in (
            f"work area {work}",
            "Ray job raysubmit_Ab12",
            f"pid {os.getpid()}",
            "s ago",
            "ray job stop raysubmit_Ab12",
            "when its lease expires (30 s without a heartbeat)",
        ):
            assert words in message, message
    finally:
        first.release()
    assert not storage.exists(lease_url(work))
    again = acquire_lease(work, FAST, job_id="job")
    assert again.reason is None and again.took_over is None
    again.release()


def test_drivers_starting_at_once_one_wins(work) -> None:
    for _ in range(3):
        outcomes = _race(6, lambda i: acquire_lease(work, STEADY, job_id="job"))
        won = [o for o in outcomes if isinstance(o, Lease)]
        refused = [o for o in outcomes if isinstance(o, LeaseHeld)]
        assert len(won) == 1 and len(refused) == 5, outcomes
        assert all("in use by" in str(r) for r in refused), refused
        assert Holder.from_bytes(storage.read_bytes(lease_url(work))).token == won[0].holder.token
        won[0].release()
        assert not storage.exists(lease_url(work)) and not _leftovers(work)


def test_expired_lease_is_taken_over_by_exactly_one(work) -> None:
    store = LeaseStore(work)
    for round_ in range(3):
        stale = _stale(pid=4000 + round_)
        store.replace(lease_url(work), stale.to_bytes())
        outcomes = _race(5, lambda i: acquire_lease(work, STEADY, job_id="job"))
        won = [o for o in outcomes if isinstance(o, Lease)]
        refused = [o for o in outcomes if isinstance(o, LeaseHeld)]
        assert len(won) == 1 and len(refused) == 4, outcomes
        assert won[0].reason == "expired" and won[0].took_over == stale
        assert f"render-07 (pid {4000 + round_})" in (won[0].takeover_message() or "")
        assert Holder.from_bytes(storage.read_bytes(lease_url(work))).token == won[0].holder.token
        # The losers name the winner, as the holder or as the driver taking the lease over.
        assert all(f"pid {os.getpid()}" in str(r) for r in refused), refused
        won[0].release()
        assert not _leftovers(work), storage.listdir(work)


def test_marker_of_a_taker_that_died_is_skipped_and_a_live_one_refuses(work) -> None:
    store = LeaseStore(work)
    stale = _stale()
    store.replace(lease_url(work), stale.to_bytes())
    live_taker = replace(_stale(pid=555, age=0.0), token="taker" + "1" * 27)
    marker = storage.join(work, f"lease.takeover-{stale.token}-1.json")
    store.replace(marker, live_taker.to_bytes())
    with pytest.raises(LeaseHeld) as refused:
        acquire_lease(work, FAST, job_id="job")
    assert "being taken over by a driver on host render-07 (pid 555)" in str(refused.value)
    store.replace(marker, replace(live_taker, heartbeat_at=time.time() - 300).to_bytes())  # it died there
    lease = acquire_lease(work, FAST, job_id="job")
    assert lease.reason == "expired" and lease.took_over == stale
    assert not _leftovers(work), storage.listdir(work)
    lease.release()


def test_heartbeat_refreshes_and_a_forced_takeover_stops_the_old_holder(work) -> None:
    old = acquire_lease(work, FAST, job_id="job")
    first_beat = old.holder.heartbeat_at
    time.sleep(4 * FAST.heartbeat_seconds)
    assert Holder.from_bytes(storage.read_bytes(lease_url(work))).heartbeat_at > first_beat
    old.check()
    old.confirm()
    new = acquire_lease(work, FAST, job_id="job", force=True)
    assert new.reason == "forced" and new.took_over is not None and new.took_over.token == old.holder.token
    with pytest.raises(LeaseLost, match="taken over by a driver on host"):
        old.confirm()  # before a publish: the store is read
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and old._lost is None:
        time.sleep(0.05)
    with pytest.raises(LeaseLost):
        old.check()  # the heartbeat found it too
    old.release()  # must not remove the new holder's lease
    assert Holder.from_bytes(storage.read_bytes(lease_url(work))).token == new.holder.token
    new.release()
    assert not storage.exists(lease_url(work))


_HOLD = """
import sys, time
from cluster.lease.acquire import LeaseConfig, acquire_lease
expiry = float(sys.argv[2])
acquire_lease(sys.argv[1], LeaseConfig.model_construct(expiry_seconds=expiry, heartbeat_seconds=0.3), job_id="job")
print("held", flush=True)
time.sleep(600)
"""


def _holding_driver(work: str, expiry: float) -> subprocess.Popen[str]:
    """A real driver process on this host that has taken the work area's lease (and beats every 0.3 s)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, work, str(expiry)], cwd=str(REPO),
        env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


@pytest.mark.parametrize("reaped", [True, False], ids=["reaped", "zombie"])
def test_killed_driver_on_this_host_is_taken_over_at_once(work, reaped, caplog) -> None:
    """SIGKILL leaves a 30 s lease: the next driver on this host sees its pid gone and takes it at once."""
    proc = _holding_driver(work, expiry=30.0)
    try:
        time.sleep(0.7)  # a few heartbeats
        with pytest.raises(LeaseHeld, match=f"pid {proc.pid}"):
            acquire_lease(work, FAST, job_id="job")  # alive: refused, as before
        os.kill(proc.pid, signal.SIGKILL)
        if reaped:
            proc.wait(timeout=30)
        else:  # killed, not yet waited for by its parent (this test)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and _state(proc.pid) != "Z":
                time.sleep(0.02)
        left = Holder.from_bytes(storage.read_bytes(lease_url(work)))
        assert left is not None and left.pid == proc.pid and not left.expired(time.time())
        caplog.set_level("WARNING", logger="cluster.lease.acquire")
        started = time.monotonic()
        lease = acquire_lease(work, FAST, job_id="job")  # the real clock: nowhere near its 30 s expiry
        assert time.monotonic() - started < 5
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    why = f"pid {proc.pid} not running" if reaped else f"pid {proc.pid} has exited (a zombie not yet reaped)"
    assert lease.reason == "gone" and lease.why == why and lease.took_over == left
    message = lease.takeover_message() or ""
    assert f"on host {left.host} (pid {proc.pid})" in message and "ran on this host and is gone" in message
    assert f"({why}); lease taken over without waiting for its expiry (30 s)" in message, message
    assert message in caplog.text
    assert lease.record()["reason"] == "gone" and lease.record()["why"] == why
    assert Holder.from_bytes(storage.read_bytes(lease_url(work))).token == lease.holder.token
    lease.release()
    assert not storage.exists(lease_url(work)) and not _leftovers(work), storage.listdir(work)


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return None


def _here(pid: int, pid_start: int | None, *, age: float = 0.0, **changes: Any) -> Holder:
    """A live-looking lease (heartbeat ``age`` s ago, 60 s expiry) held by ``pid`` on this host."""
    here = this_process()
    then = time.time() - age
    holder = Holder(
        "here" + "0" * 28, "job", None, here.host, pid, then - 5, then, 60.0,
        boot_id=here.boot_id, pid_ns=here.pid_ns, pid_start=pid_start,
    )  # fmt: skip
    return replace(holder, **changes)


@pytest.fixture
def sleeper() -> Any:
    """A live process on this host that is no driver: its pid and its start time (clock ticks)."""
    proc = subprocess.Popen(["sleep", "600"])
    try:
        ticks = int(Path(f"/proc/{proc.pid}/stat").read_text().rpartition(")")[2].split()[19])
        yield proc.pid, ticks
    finally:
        proc.kill()
        proc.wait()


def test_reused_pid_is_taken_over_and_a_live_one_refused(work, sleeper) -> None:
    """The holder's pid now runs another process (started at another time): the holder is gone."""
    pid, ticks = sleeper
    assert this_process().boot_id and this_process().pid_ns and this_process().pid_start
    store = LeaseStore(work)
    live = _here(pid, ticks)
    store.replace(lease_url(work), live.to_bytes())
    with pytest.raises(LeaseHeld, match=f"in use by a driver on host .* \\(pid {pid}\\)"):
        acquire_lease(work, FAST, job_id="job")  # the pid and its start time match: alive
    reused = _here(pid, ticks - 500)  # the holder started 5 s before the process that has its pid now
    store.replace(lease_url(work), reused.to_bytes())
    lease = acquire_lease(work, FAST, job_id="job")
    assert lease.reason == "gone" and lease.took_over == reused
    assert lease.why is not None and lease.why.startswith(f"pid {pid} is now another process, started "), (
        lease.why
    )
    assert "the holder's started" in lease.why
    lease.release()
    assert not _leftovers(work), storage.listdir(work)


@pytest.mark.parametrize(
    "elsewhere",
    [
        {"host": "render-07"},
        {"boot_id": "0" * 8 + "-0000-0000-0000-" + "0" * 12},  # this host's name, another boot
        {"pid_ns": "pid:[1]"},  # another container's processes
        {"boot_id": None, "pid_ns": None, "pid_start": None},  # a lease written before these fields
    ],
    ids=["other-host", "other-boot", "other-pid-namespace", "old-lease"],
)
def test_holder_that_cannot_be_judged_from_here_waits_for_expiry(work, elsewhere) -> None:
    """A pid not running here says nothing of a driver on another host: only its expiry frees it."""
    dead_pid = _ended_pid()
    away = _here(dead_pid, 12345)
    away = replace(away, **elsewhere)
    LeaseStore(work).replace(lease_url(work), away.to_bytes())
    with pytest.raises(LeaseHeld, match=f"pid {dead_pid}.*resubmit in 60 s"):
        acquire_lease(work, FAST, job_id="job")
    lease = acquire_lease(work, FAST, job_id="job", clock=lambda: away.heartbeat_at + 61)
    assert lease.reason == "expired" and lease.took_over == away and lease.why is None
    lease.release()


def _ended_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


class _StallingStore(LeaseStore):
    """The real store, except that the heartbeat thread's writes wait at a gate: a driver that stalls
    (a GC pause, a frozen VM, a slow network) after its heartbeat decided to write and before it does."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.parked = threading.Event()
        self.gate = threading.Event()

    def _hold(self) -> None:
        if threading.current_thread().name == "lease-heartbeat":
            self.parked.set()
            assert self.gate.wait(60)

    def replace(self, url: str, data: bytes) -> Any:  # the heartbeat's write before compare-and-swap
        self._hold()
        return super().replace(url, data)

    def swap(self, url: str, data: bytes, expected: str) -> Any:
        self._hold()
        return super().swap(url, data, expected)


def test_stalled_driver_never_overwrites_the_takers_lease(work) -> None:
    """Its lease taken over while it stalled, the old driver's next write finds it lost and leaves it."""
    stalling = _StallingStore(work)
    old = acquire_lease(work, FAST, job_id="job", store=stalling)
    try:
        assert stalling.parked.wait(10)  # its heartbeat is about to write
        new = acquire_lease(work, STEADY, job_id="job", force=True)
        stalling.gate.set()  # the old driver wakes up and writes
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and old._lost is None:
            time.sleep(0.05)
        with pytest.raises(LeaseLost, match="taken over by a driver on host"):
            old.check()
        for _ in range(3):  # and it stays so, beat after beat
            assert Holder.from_bytes(storage.read_bytes(lease_url(work))).token == new.holder.token
            time.sleep(FAST.heartbeat_seconds)
        new.confirm()
    finally:
        stalling.gate.set()
        old.release()  # must not remove the new holder's lease
    assert Holder.from_bytes(storage.read_bytes(lease_url(work))).token == new.holder.token
    new.release()
    assert not storage.exists(lease_url(work))


def test_swap_and_remove_act_only_on_the_version_named(work) -> None:
    store = LeaseStore(work)
    url = lease_url(work)
    first = store.create(url, b"first")
    assert first is not None and store.create(url, b"again") is None
    second = store.swap(url, b"second", first)
    assert second is not None and second != first and storage.read_bytes(url) == b"second"
    assert store.swap(url, b"late", first) is None  # a writer that last saw "first"
    assert store.remove_if(url, first) is False and storage.read_bytes(url) == b"second"
    stored = store.read_versioned(url)
    assert stored is not None and stored.data == b"second" and stored.version == second
    third = store.replace(url, b"third")
    assert store.swap(url, b"late", second) is None and storage.read_bytes(url) == b"third"
    assert store.remove_if(url, third) is True and not storage.exists(url)
    assert store.swap(url, b"late", third) is None and not storage.exists(url)


class _AnswerLostStore(LeaseStore):
    """The real store, except that one heartbeat's swap lands but answers as if it had not (a PUT
    whose response was dropped and whose retry then found its own object: 412)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.lost_answers = 1

    def swap(self, url: str, data: bytes, expected: str) -> str | None:
        written = super().swap(url, data, expected)
        if written is not None and self.lost_answers and threading.current_thread().name == "lease-heartbeat":
            self.lost_answers -= 1
            return None
        return written


def test_own_write_whose_answer_was_lost_keeps_the_lease(work) -> None:
    store = _AnswerLostStore(work)
    lease = acquire_lease(work, FAST, job_id="job", store=store)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and store.lost_answers:
            time.sleep(0.05)
        time.sleep(4 * FAST.heartbeat_seconds)
        lease.confirm()
        # Its heartbeat stopped first (else a beat can land between the read and the look at the
        # version): the version the lease holds is the one stored.
        lease._stop.set()
        lease._thread.join(timeout=10)
        stored = store.read_versioned(lease_url(work))
        assert stored is not None and stored.version == lease.version
    finally:
        lease.release()
    assert not storage.exists(lease_url(work))


def test_s3_conditional_create_refuses_an_existing_object(s3_bucket) -> None:
    """moto answers 412 to ``If-None-Match: *`` on an existing key, as S3 does."""
    url = f"{s3_bucket}/work/x.json"
    store = LeaseStore(url)
    assert store.conditional
    assert store.create(url, b"first") is not None
    assert store.create(url, b"second") is None
    assert storage.read_bytes(url) == b"first"


@pytest.mark.parametrize("where", ["s3", "memory"])
def test_create_by_read_back_keeps_one_winner(where, request, caplog) -> None:
    """Stores without conditional writes: check, write, pause, read back; racing writers, one winner.

    A writer whose check and write took longer than the pause (a PUT retried after the loopback
    S3 server failed it under the race) takes nothing and removes its object: then the writer that
    kept the lease finds it gone at its next compare-and-swap, and there are never two holders."""
    if where == "s3":
        base = request.getfixturevalue("s3_bucket")
    else:
        base = f"memory://lease-test-{os.getpid()}-{time.monotonic_ns()}"
    store = LeaseStore(base, conditional=False, settle_seconds=0.5)
    clean_rounds = 0
    for round_ in range(4):
        url = f"{base}/race-{round_}.json"
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="cluster.lease.store"):
            outcomes = _race(6, lambda i, url=url: store.create(url, f"writer {i}".encode()))
        won = [i for i, o in enumerate(outcomes) if isinstance(o, str)]
        assert len(won) <= 1 and outcomes.count(None) == 6 - len(won), outcomes
        late = [r for r in caplog.records if "not taking it" in r.getMessage()]
        if not late:
            clean_rounds += 1
            assert len(won) == 1, outcomes
            assert storage.read_bytes(url) == f"writer {won[0]}".encode()
        elif won:  # the winner's lease survives only if no late writer landed on it
            kept = storage.exists(url) and storage.read_bytes(url) == f"writer {won[0]}".encode()
            assert (store.swap(url, b"renewed", outcomes[won[0]]) is not None) == kept
    assert clean_rounds >= 1


def test_a_late_write_takes_nothing_and_the_earlier_holder_finds_out(monkeypatch) -> None:
    """A writer checks, stalls in its PUT past the pause, lands on a lease another writer already
    kept: it takes nothing and removes its object; the keeper's compare-and-swap then fails."""
    base = f"memory://lease-late-{os.getpid()}-{time.monotonic_ns()}"
    url = f"{base}/lease.json"
    store = LeaseStore(base, conditional=False, settle_seconds=0.2)
    write = storage.write_bytes
    checked, kept = threading.Event(), threading.Event()

    def stalled_write(target: str, data: bytes) -> None:
        if data == b"slow":
            checked.set()
            kept.wait(10)  # the fast writer checks, writes, pauses and keeps it meanwhile
        write(target, data)

    monkeypatch.setattr(storage, "write_bytes", stalled_write)
    slow: list[str | None] = []
    thread = threading.Thread(target=lambda: slow.append(store.create(url, b"slow")))
    thread.start()
    assert checked.wait(10)
    fast = store.create(url, b"fast")
    kept.set()
    thread.join(30)
    assert fast is not None and slow == [None]
    assert not storage.exists(url)
    assert store.swap(url, b"fast, renewed", fast) is None


@pytest.mark.parametrize("body", [b"{not json", b""], ids=["not-json", "empty"])
def test_unreadable_lease_is_refused_unless_forced(work, body) -> None:
    LeaseStore(work).replace(lease_url(work), body)
    with pytest.raises(LeaseHeld, match="not a readable lease.*--force-takeover"):
        acquire_lease(work, FAST, job_id="job")
    lease = acquire_lease(work, FAST, job_id="job", force=True)
    assert lease.reason == "forced" and lease.took_over is None
    lease.release()
    assert not storage.exists(lease_url(work))


def test_submission_id_comes_from_the_job_config_ray_passes() -> None:
    assert submission_id(SUBMITTED) == "raysubmit_Ab12"
    assert submission_id({"RAY_JOB_SUBMISSION_ID": "raysubmit_X"}) == "raysubmit_X"
    assert submission_id({}) is None
    assert submission_id({"RAY_JOB_CONFIG_JSON_ENV_VAR": "{}"}) is None


def _spec(**lease: Any) -> dict[str, Any]:
    return {
        "job_id": "ep1",
        "shots": [{"name": "a", "url": "/data/a.mp4"}],
        "identities": {"hero": {"images": ["/refs/hero.jpg"]}},
        "output": {"url": "/out/{shot}.mp4"},
        "lease": lease,
    }


@pytest.mark.parametrize(
    ("lease", "field", "words"),
    [
        ({"expiry_seconds": 0}, "lease.expiry_seconds", "greater than or equal to 5"),
        ({"heartbeat_seconds": -1}, "lease.heartbeat_seconds", "greater than or equal to 1"),
        (
            {"expiry_seconds": 15},
            "lease.heartbeat_seconds",
            "10 must be at most a third of lease.expiry_seconds (15)",
        ),
        ({"seconds": 30}, "lease.seconds", "unknown key"),
        ({"expiry_seconds": "soon"}, "lease.expiry_seconds", "valid number"),
    ],
)
def test_bad_lease_settings_name_the_field(lease, field, words) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(_spec(**lease))
    assert err.value.field == field and words in err.value.reason, str(err.value)


def test_lease_settings_default_and_apply() -> None:
    assert parse_spec(_spec()).lease == LeaseConfig(expiry_seconds=60.0, heartbeat_seconds=10.0)
    assert parse_spec(_spec(expiry_seconds=120)).lease.expiry_seconds == 120


def test_render_refuses_a_held_work_area_before_ray(tmp_path, capsys, no_ray) -> None:
    """``python -m jobs.render`` on a work area another driver holds: exit 2, holder named, nothing written."""
    from jobs.render import EXIT_BAD_INPUT, main
    from tests.faultjobs import job_spec, make_media

    media = make_media(str(tmp_path / "media"))
    out = tmp_path / "out"
    spec_path = tmp_path / "job.yaml"
    spec_path.write_text(yaml.safe_dump(job_spec(media, str(out), "held")))
    work = str(out / ".recast-work" / "held")
    holder = acquire_lease(work, LeaseConfig(), job_id="held", env=SUBMITTED)
    try:
        assert main([str(spec_path)]) == EXIT_BAD_INPUT
        err = capsys.readouterr().err
        assert "recast: job held not started: work area" in err and work in err, err
        assert "raysubmit_Ab12" in err and "ray job stop raysubmit_Ab12" in err and "expires" in err, err
        assert sorted(os.listdir(work)) == ["lease.json"]  # no manifest, no summary
        assert Holder.from_bytes(storage.read_bytes(lease_url(work))).token == holder.holder.token
    finally:
        holder.release()


def test_expiry_is_judged_by_the_clock_given(work) -> None:
    """One second short of the expiry the lease is held; one second past it, it is taken over."""
    stale = _stale(age=0.0)
    LeaseStore(work).replace(lease_url(work), stale.to_bytes())
    with pytest.raises(LeaseHeld, match="render-07"):
        acquire_lease(work, STEADY, job_id="job", clock=lambda: stale.heartbeat_at + stale.expiry_seconds - 1)
    later = stale.heartbeat_at + stale.expiry_seconds + 1
    lease = acquire_lease(work, STEADY, job_id="job", clock=lambda: later)
    assert lease.reason == "expired" and lease.took_over == stale
    assert lease.holder.acquired_at == later == lease.holder.heartbeat_at
    lease.release()
    assert not _leftovers(work), storage.listdir(work)
