"""Fault tolerance on real Ray: a killed actor, a lost node, a killed driver, a chunk that cannot be decoded.

Every recovered job must produce an output bit-identical to a clean run's.
The figures (recovery time after an actor kill and a node loss, work redone
after a driver kill) are logged at WARNING level by each test (``-s`` shows them).
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
from pathlib import Path
from typing import Any

import pytest
import ray
import yaml

from cluster.driver import JobRunner
from cluster.lease.acquire import lease_url
from cluster.lease.holder import Holder
from cluster.lease.store import LeaseStore
from cluster.spec.job import parse_spec
from tests.faultjobs import (
    CHUNKS,
    CLEAN_JOB,
    corrupt_middle,
    finish,
    job_spec,
    records,
    run_in_thread,
    sha256_file,
    tmp_files,
)
from tests.raytools import RAY_ENV, REPO

pytestmark = [pytest.mark.ray, pytest.mark.slow]
logger = logging.getLogger(__name__)


def _wait_for(cond, thread: threading.Thread, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and thread.is_alive() and not cond():
        time.sleep(0.05)
    assert thread.is_alive(), "the job ended before the fault could be injected"
    assert cond(), "timed out waiting for the job to reach the fault point"


def _recovery_seconds(runner: JobRunner, fault_at: float) -> float:
    """From the fault to the end of the first retried work item that succeeded."""
    retried = [e["end"] for e in runner.timeline if e["ok"] and e["attempt"] >= 2 and e["end"] >= fault_at]
    return min(retried) - fault_at


def test_killed_actor_is_replaced_and_output_identical(
    fault_media, clean_reference, tmp_path, ray_session
) -> None:
    out = str(tmp_path)
    work = os.path.join(out, ".recast-work", CLEAN_JOB)
    with ray_session.use():
        runner = JobRunner(parse_spec(job_spec(fault_media, out, CLEAN_JOB)))
        thread, result = run_in_thread(runner)
        # Mid-job: the first analysis is committed, so both actors hold work.
        _wait_for(lambda: bool(records(work, "plate", "analysis")) and runner.summary.actor_info, thread)
        victim = runner.summary.actor_info[0]
        os.kill(victim.pid, signal.SIGKILL)
        killed_at = runner.elapsed()
        summary = finish(thread, result)
    assert summary.ok, summary.table()
    shot = summary.shots[0]
    assert shot.status == "published" and shot.frames == 72
    assert sum(runner.shot_retries.values()) >= 1, runner.timeline
    assert len(runner.actors) >= 3, "the dead actor was not replaced"
    assert sha256_file(os.path.join(out, "plate.mp4")) == clean_reference
    assert shot.content_sha256 == clean_reference
    # Segments are gone once the shot is published; the manifest stays.
    assert not os.path.exists(os.path.join(work, "segments", "plate"))
    assert (
        json.loads(Path(os.path.join(work, "manifest", "plate", "shot.json")).read_text())["status"]
        == "published"
    )
    assert not tmp_files(out)
    logger.warning("FIGURE actor kill: recovered %.2f s after the kill", _recovery_seconds(runner, killed_at))


def test_deterministic_bad_chunk_fails_its_shot_only(fault_media, tmp_path, ray_session) -> None:
    """Frames 34-41 cannot be decoded: chunk 1 fails twice, its shot fails by name; the other shot is published."""
    from jobs.render import main

    bad = corrupt_middle(fault_media["plate"], str(tmp_path / "bad.mp4"), 34, 8)
    out = str(tmp_path / "out")
    data = job_spec(fault_media, out, "bad-chunk")
    data["shots"] = [{"name": "good", "url": fault_media["plate"]}, {"name": "bad", "url": bad}]
    spec_path = tmp_path / "job.yaml"
    spec_path.write_text(yaml.safe_dump(data))
    with ray_session.use():
        code = main([str(spec_path), "--summary-json", str(tmp_path / "summary.json")])
    assert code == 1
    shots = {s["name"]: s for s in json.loads(Path(tmp_path / "summary.json").read_text())["shots"]}
    assert shots["good"]["status"] == "published"
    assert shots["bad"]["status"] == "failed"
    error = shots["bad"]["error"]
    assert "chunk 1" in error and "after 2 tries" in error and "bad.mp4" in error, error
    assert "corrupt" in error, error
    assert os.path.exists(os.path.join(out, "good.mp4"))
    assert not os.path.exists(os.path.join(out, "bad.mp4"))
    assert not tmp_files(out)


def test_lost_node_is_survived_and_output_identical(fault_media, clean_reference, tmp_path) -> None:
    from ray.cluster_utils import Cluster

    os.environ.update(RAY_ENV)
    if ray.is_initialized():
        ray.shutdown()
    node: dict[str, Any] = {
        "num_cpus": 2,
        "resources": {"recast_node": 2},
        "object_store_memory": 100 * 1024 * 1024,
    }
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 0,
            "object_store_memory": 100 * 1024 * 1024,
            "include_dashboard": False,
            # Notice a dead node within about a second.
            "_system_config": {"health_check_period_ms": 200, "health_check_failure_threshold": 3},
        },
    )
    out = str(tmp_path)
    work = os.path.join(out, ".recast-work", CLEAN_JOB)
    try:
        workers = [cluster.add_node(**node), cluster.add_node(**node)]
        ray.init(
            address=cluster.address,
            runtime_env={"env_vars": {"PYTHONPATH": str(REPO), **RAY_ENV}},
            log_to_driver=False,
            configure_logging=False,
        )
        data = job_spec(fault_media, out, CLEAN_JOB)
        data["resources"] = {**data["resources"], "gpus_per_actor": 0, "custom": {"recast_node": 1}}
        runner = JobRunner(parse_spec(data))
        thread, result = run_in_thread(runner)
        _wait_for(lambda: bool(records(work, "plate", "analysis")) and runner.summary.actor_info, thread)
        victim_node = runner.summary.actor_info[0].node_id
        (lost,) = [w for w in workers if w.node_id == victim_node]
        cluster.remove_node(lost, allow_graceful=False)
        lost_at = runner.elapsed()
        summary = finish(thread, result)
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert summary.ok, summary.table()
    assert sum(runner.shot_retries.values()) >= 1, runner.timeline
    assert sha256_file(os.path.join(out, "plate.mp4")) == clean_reference
    logger.warning(
        "FIGURE node loss: recovered %.2f s after the node was removed", _recovery_seconds(runner, lost_at)
    )


def _render_cmd(spec_path: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "jobs.render", spec_path, "--log-level", "WARNING", *extra]


def _env() -> dict[str, str]:
    env = {**os.environ, **RAY_ENV, "PYTHONPATH": str(REPO)}
    env.pop("RAY_ADDRESS", None)
    return env


def test_killed_driver_resumes_only_unfinished_chunks(fault_media, clean_reference, tmp_path) -> None:
    out = str(tmp_path / "out")
    work = os.path.join(out, ".recast-work", CLEAN_JOB)
    spec_path = str(tmp_path / "job.yaml")
    with open(spec_path, "w") as fh:
        yaml.safe_dump(job_spec(fault_media, out, CLEAN_JOB), fh)  # the default 60 s lease
    # The driver (and the local Ray it started) in its own process group, killed at once mid-job.
    proc = subprocess.Popen(
        _render_cmd(spec_path), cwd=str(REPO), env=_env(), start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None and not records(work, "plate", "render"):
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:] if proc.stderr else ""
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        if proc.stderr:
            proc.stderr.close()
    # The manifest is consistent: every committed segment is there, intact; no output yet.
    rendered = records(work, "plate", "render")
    analysed = records(work, "plate", "analysis")
    assert 1 <= len(rendered) < CHUNKS and len(analysed) == CHUNKS
    for record in rendered.values():
        assert sha256_file(record["segment_url"]) == record["sha256"]
    assert not os.path.exists(os.path.join(out, "plate.mp4"))
    # What a driver killed while copying the output into place leaves: removed on resume.
    Path(out, ".plate.mp4.recast-tmp-0123456789ab").write_bytes(b"half a file")
    # The killed driver's lease is still within its 60 s expiry; its holder ran on this host and its
    # process is gone, so the resubmission takes it over at once instead of waiting.
    left = Holder.from_bytes(LeaseStore(work).read(lease_url(work)))
    assert left is not None and left.pid == proc.pid and left.expiry_seconds == 60
    assert time.time() < left.heartbeat_at + left.expiry_seconds - 20
    resubmitted = time.monotonic()

    # Resubmitted (--resume: the manifest must be there): only the unfinished chunks are rendered.
    summary_path = str(tmp_path / "summary.json")
    done = subprocess.run(  # noqa: PLW1510 - the exit code is the assertion
        _render_cmd(spec_path, "--resume", "--summary-json", summary_path),
        cwd=str(REPO), env=_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    resumed = json.loads(Path(summary_path).read_text())
    assert resumed["lease"]["reason"] == "gone" and resumed["lease"]["took_over"]["pid"] == proc.pid
    assert "not running" in resumed["lease"]["why"], resumed["lease"]
    assert resumed["setup_seconds"] < 40 and time.monotonic() - resubmitted < 120  # no wait for expiry
    assert not os.path.exists(os.path.join(work, "lease.json"))
    (shot,) = resumed["shots"]
    assert shot["chunks_reused"] == len(rendered)
    assert shot["chunks_rendered"] == CHUNKS - len(rendered)
    assert shot["analyses_reused"] == CHUNKS and shot["analyses_run"] == 0
    assert sha256_file(os.path.join(out, "plate.mp4")) == clean_reference
    assert not tmp_files(out)
    logger.warning(
        "FIGURE driver kill: re-rendered %d/%d chunks, re-analysed 0/%d",
        shot["chunks_rendered"], CHUNKS, CHUNKS,
    )  # fmt: skip
