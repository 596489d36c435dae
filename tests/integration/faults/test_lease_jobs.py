"""One driver per work area, end to end: real ``python -m jobs.render`` processes joining one real Ray head.

* Two drivers started on the same spec at the same moment: one renders, the
  other exits 2 naming it; then a third with ``--force-takeover`` while the
  winner is alive (documented as unsafe): whichever way the two overlap, the
  published output is a solo run's bytes and the manifest agrees with it.
* On the loopback S3 store: a driver killed with SIGKILL leaves its lease; once
  it expires, two resubmissions at once: one takes it over and resumes, the
  other exits 2 naming it.

(The local SIGKILL-then-resubmit case is ``test_faults.test_killed_driver_resumes_only_unfinished_chunks``.)
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fsspec
import pytest
import yaml

from pipeline.store import storage
from tests.faultjobs import CLEAN_JOB, expire_lease, job_spec, sha256_file, tmp_files
from tests.raytools import RAY_ENV, REPO, Head, ray_head

pytestmark = [pytest.mark.ray, pytest.mark.slow]
logger = logging.getLogger(__name__)


@pytest.fixture(scope="module")
def head(s3_endpoint) -> Iterator[Head]:
    """One Ray head that every driver of this module joins (as submitted drivers do): one Ray on the
    machine, not one per driver.  Its workers see the repository and the loopback S3 settings."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(REPO)
    try:
        with ray_head(num_cpus=2) as started:
            yield started
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def _driver(
    head: Head, spec_path: Path, summary: Path, *extra: str, point: tuple[str, Path] | None = None
) -> subprocess.Popen:
    """``python -m jobs.render`` joining the module's Ray head, in its own process group
    (``point``: :data:`HOLD_POINTS`'s point and the file it creates there)."""
    env = {**os.environ, **RAY_ENV, "PYTHONPATH": str(REPO), "RAY_ADDRESS": head.gcs_address}
    env["RAY_gcs_server_request_timeout_seconds"] = "180"  # a busy CI machine: joining may take a while
    entry = ["-m", "jobs.render"] if point is None else ["-c", HOLD_POINTS, point[0], str(point[1])]
    cmd = [sys.executable, *entry, str(spec_path), "--log-level", "WARNING"]
    return subprocess.Popen(
        [*cmd, "--summary-json", str(summary), *extra], cwd=str(REPO), env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


HOLD_POINTS = """
import runpy, sys, time
import ray
import ray._private.worker as worker

point, marker = sys.argv.pop(1), sys.argv.pop(1)
connected, wait, shutdown = worker.Worker.set_is_connected, ray.wait, ray.shutdown


def held(self, value):
    # Ray's core worker and its threads are up, the worker is not marked connected yet: a stop now
    # finds Ray half built (ray.is_initialized() is still False).
    if value:
        open(marker, "w").close()
        time.sleep(120)
    return connected(self, value)


def slow_shutdown(*args, **kwargs):
    # Longer than the 3 s after which the core worker's failure-signal handler aborts a process it saw
    # a SIGTERM reach (a busy machine's shutdown): the stop must not read as a crash then either.
    time.sleep(5)
    return shutdown(*args, **kwargs)


def waiting(*args, **kwargs):
    # The driver's first wait on Ray (its actors' set-up): where a driver spends its time.
    open(marker, "a").close()
    return wait(*args, **kwargs)


def stuck(*args, **kwargs):
    # A stop whose way out never ends: the stop lands in the first sleep, its finally block never returns.
    open(marker, "a").close()
    try:
        time.sleep(600)
    finally:
        time.sleep(600)


def committed_then_held(write_render):
    # The driver's first committed chunk: held there until killed, so the kill always lands mid-job
    # (a driver polled from outside may publish the whole short shot between two polls).
    def written(self, shot, record):
        write_render(self, shot, record)
        open(marker, "w").close()
        time.sleep(600)

    return written


if point == "connect":
    worker.Worker.set_is_connected = held
    ray.shutdown = slow_shutdown
elif point == "render":
    from cluster.state.manifest import JobManifest

    JobManifest.write_render = committed_then_held(JobManifest.write_render)
elif point == "stuck":
    ray.wait = stuck
else:
    ray.wait = waiting
sys.argv[0] = "jobs.render"
runpy.run_module("jobs.render", run_name="__main__", alter_sys=True)
"""
"""``python -m jobs.render`` that creates a file at a point of its run (the first two arguments):
``connect``, inside ``ray.init`` between starting Ray's core worker and marking it connected (held
there; its ``ray.shutdown`` then takes 5 s), ``wait``, its first ``ray.wait``, ``stuck``, its first
``ray.wait``, whose way out after a stop never ends, or ``render``, its first committed chunk record (held
there)."""


def _finish(proc: subprocess.Popen, timeout: float = 400) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    return proc.returncode, err


def _first_to_exit(procs: list[subprocess.Popen], timeout: float = 300) -> subprocess.Popen:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                return proc
        time.sleep(0.05)
    raise AssertionError("neither driver ended")


def _write_spec(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def test_two_drivers_at_once_then_a_forced_takeover(fault_media, clean_reference, head, tmp_path) -> None:
    out = tmp_path / "out"
    work = out / ".recast-work" / CLEAN_JOB
    lease = {"expiry_seconds": 20, "heartbeat_seconds": 1}
    spec_path = _write_spec(tmp_path / "job.yaml", job_spec(fault_media, str(out), CLEAN_JOB, lease=lease))
    first = [_driver(head, spec_path, tmp_path / f"summary-{i}.json") for i in range(2)]
    loser = _first_to_exit(first)
    (winner,) = [p for p in first if p is not loser]
    code, err = _finish(loser)
    assert code == 2, err[-3000:]
    assert f"recast: job {CLEAN_JOB} not started: work area {work}: in use by a driver on host" in err, err[
        -3000:
    ]
    assert f"(pid {winner.pid})" in err and "last heartbeat" in err and "when its lease expires" in err, err
    assert winner.poll() is None, "the winner ended before the forced takeover"

    # An operator forces a takeover while the winner is alive: unsafe, but the output must stay consistent.
    forced = _driver(head, spec_path, tmp_path / "summary-forced.json", "--force-takeover")
    forced_code, forced_err = _finish(forced)
    winner_code, winner_err = _finish(winner)
    assert forced_code == 0, forced_err[-4000:]
    summary = json.loads((tmp_path / "summary-forced.json").read_text())
    assert summary["lease"]["reason"] == "forced" and summary["lease"]["took_over"]["pid"] == winner.pid
    assert any("forced (--force-takeover)" in w for w in summary["warnings"]), summary["warnings"]
    if winner_code == 1:  # it noticed: it stopped publishing
        assert f"recast: job {CLEAN_JOB} stopped: work area" in winner_err, winner_err[-3000:]
        assert "the lease was taken over by a driver on host" in winner_err, winner_err[-3000:]
    else:  # it finished before the takeover took effect
        assert winner_code == 0, winner_err[-4000:]
    logger.warning("FIGURE forced takeover: the first driver ended with %d", winner_code)
    # Published output: a solo run's bytes, recorded as such; nothing half-written, no lease left.
    assert sha256_file(str(out / "plate.mp4")) == clean_reference
    shot = json.loads((work / "manifest" / "plate" / "shot.json").read_text())
    assert shot["status"] == "published" and shot["content_sha256"] == clean_reference
    assert summary["shots"][0]["content_sha256"] == clean_reference
    assert not tmp_files(str(out))
    assert sorted(p.name for p in work.iterdir() if p.name.startswith("lease")) == []


def test_s3_killed_driver_then_two_resubmissions_after_expiry(
    fault_media, clean_reference, head, s3_bucket, tmp_path
) -> None:
    work = f"{s3_bucket}/work/s3-kill"
    output = f"{s3_bucket}/out/plate.mp4"
    data = job_spec(
        fault_media, str(tmp_path / "unused"), CLEAN_JOB, lease={"expiry_seconds": 8, "heartbeat_seconds": 1}
    )
    data["output"] = {**data["output"], "url": f"{s3_bucket}/out/{{shot}}.mp4", "work_url": work}
    spec_path = _write_spec(tmp_path / "job.yaml", data)
    fs = fsspec.filesystem("s3", skip_instance_cache=True, use_listings_cache=False)

    def rendered() -> list[str]:
        folder = f"{work}/manifest/plate".removeprefix("s3://")
        if not fs.exists(folder):
            return []
        return [p for p in fs.ls(folder, refresh=True) if os.path.basename(p).startswith("render-")]

    marker = tmp_path / "committed"
    killed = _driver(head, spec_path, tmp_path / "summary-killed.json", point=("render", marker))
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and killed.poll() is None and not marker.exists():
            time.sleep(0.05)
        assert killed.poll() is None and rendered(), killed.communicate()[1][-3000:]
        os.killpg(killed.pid, signal.SIGKILL)
        killed.wait(timeout=30)
    finally:
        if killed.poll() is None:
            os.killpg(killed.pid, signal.SIGKILL)
            killed.wait(timeout=30)
    done_before = len(rendered())
    # Killed mid-job, held at its first commit: a chunk recorded, nothing published.
    assert 1 <= done_before <= 3 and not storage.exists(output)
    # Its lease stays until it expires (aged here, not waited for).
    stale = expire_lease(work)
    assert stale.pid == killed.pid and stale.expiry_seconds == 8

    again = [_driver(head, spec_path, tmp_path / f"summary-{i}.json", "--resume") for i in range(2)]
    loser = _first_to_exit(again)
    (taker,) = [p for p in again if p is not loser]
    code, err = _finish(loser)
    assert code == 2, err[-3000:]
    assert f"work area {work}:" in err and f"(pid {taker.pid})" in err, err[-3000:]
    taker_code, taker_err = _finish(taker)
    assert taker_code == 0, taker_err[-4000:]
    summary = json.loads((tmp_path / f"summary-{again.index(taker)}.json").read_text())
    assert summary["lease"]["reason"] == "expired" and summary["lease"]["took_over"]["pid"] == killed.pid
    (shot,) = summary["shots"]
    assert shot["chunks_reused"] >= done_before and shot["analyses_reused"] >= 1, shot
    with storage.fetched(output, suffix=".mp4") as local:
        assert sha256_file(local) == clean_reference
    assert not storage.exists(f"{work}/lease.json")
    assert not [p for p in fs.ls(work.removeprefix("s3://"), refresh=True) if "lease.takeover-" in p]


def test_stopped_driver_gives_its_lease_back(fault_media, head, tmp_path) -> None:
    """``ray job stop`` sends SIGTERM: the driver leaves through its finally blocks and removes its lease."""
    out = tmp_path / "out"
    lease_path = out / ".recast-work" / "stopped" / "lease.json"
    spec_path = _write_spec(tmp_path / "job.yaml", job_spec(fault_media, str(out), "stopped"))
    proc = _driver(head, spec_path, tmp_path / "summary.json")
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None and not lease_path.exists():
            time.sleep(0.05)
        assert proc.poll() is None and lease_path.exists(), "the driver never took its lease"
        os.kill(proc.pid, signal.SIGTERM)
        code, err = _finish(proc, timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    # Through SystemExit either way: ours before Ray starts (143), Ray's driver handler after (15).
    assert code in (signal.SIGTERM, 128 + signal.SIGTERM), err[-3000:]
    assert not lease_path.exists()


def _stopped_at(
    fault_media, head: Head, tmp_path: Path, point: str, *extra: str
) -> tuple[int, str, float, Path]:
    """A driver held at :data:`HOLD_POINTS`'s ``point``, then sent SIGTERM: its exit status, its stderr,
    the seconds from the signal to its exit, and where its lease was."""
    out = tmp_path / "out"
    lease_path = out / ".recast-work" / "halfway" / "lease.json"
    marker = tmp_path / "reached"
    spec_path = _write_spec(tmp_path / "job.yaml", job_spec(fault_media, str(out), "halfway"))
    proc = _driver(head, spec_path, tmp_path / "summary.json", *extra, point=(point, marker))
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None and not marker.exists():
            time.sleep(0.01)
        assert proc.poll() is None and marker.exists() and lease_path.exists(), f"never reached {point}"
        stopped = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        exit_code, err = _finish(proc, timeout=60)
        return exit_code, err, time.monotonic() - stopped, lease_path
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def test_a_stopped_driver_whose_way_out_hangs_leaves_by_its_deadline(fault_media, head, tmp_path) -> None:
    """A stop whose clean-up never ends (a finally block waiting forever) is bounded by ``--stop-deadline``:
    the driver prints where its threads were, gives the lease back and exits with a stop's status."""
    exit_code, err, took, lease_path = _stopped_at(
        fault_media, head, tmp_path, "stuck", "--stop-deadline", "4"
    )
    assert exit_code == 128 + signal.SIGTERM, err[-3000:]
    assert 4 <= took < 4 + 30, took  # the deadline, not the 600 s the finally block would take
    assert "still not out 4 s later" in err and "in stuck" in err, err[-3000:]  # where it was stuck
    assert not lease_path.exists()


@pytest.mark.parametrize(
    ("point", "code"),
    [
        ("connect", signal.SIGTERM),  # Ray's own handler, installed first thing in ray.init
        ("wait", 128 + signal.SIGTERM),  # ours again once Ray has started
    ],
)
def test_a_driver_stopped_inside_ray_exits_as_stopped(fault_media, head, tmp_path, point, code) -> None:
    """A stop that lands inside ``ray.init`` with Ray half built, or inside ``ray.wait`` (which Ray
    turns into ``SystemExit(1)``, "rendering failed"), gives the lease back and exits with a stop's
    status, neither crashing (SIGSEGV in the interpreter's teardown) nor hanging."""
    exit_code, err, _, lease_path = _stopped_at(fault_media, head, tmp_path, point)
    assert exit_code == code, err[-3000:]
    assert not lease_path.exists()
    assert "SIGSEGV" not in err and "Fatal Python error" not in err, err[-3000:]
