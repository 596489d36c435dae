"""JobMetrics recorded in a real local Ray and read back from the node's Prometheus endpoint."""

from __future__ import annotations

import os
import re
import time
import urllib.request
from collections.abc import Iterator

import pytest
import ray

from cluster.report.metrics import CHUNK_SECONDS_BOUNDARIES, JobMetrics
from tests.raytools import RAY_ENV, free_port

pytestmark = pytest.mark.ray
EXPORT_TIMEOUT_SECONDS = 40.0


@pytest.fixture(scope="module")
def metrics_port() -> Iterator[int]:
    port = free_port()
    saved = {k: os.environ.get(k) for k in (*RAY_ENV, "RAY_metrics_report_interval_ms")}
    os.environ.update(RAY_ENV)
    # Export every second instead of every 10 s so the test does not wait.
    os.environ["RAY_metrics_report_interval_ms"] = "1000"
    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        address="local",
        num_cpus=1,
        num_gpus=0,
        include_dashboard=False,
        _metrics_export_port=port,
        log_to_driver=False,
        configure_logging=False,
    )
    try:
        yield port
    finally:
        ray.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _scrape(port: int, until: str) -> str:
    deadline = time.monotonic() + EXPORT_TIMEOUT_SECONDS
    body = ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
                body = resp.read().decode()
        except OSError:
            body = ""
        if until in body:
            return body
        time.sleep(0.5)
    raise AssertionError(f"{until!r} not exported within {EXPORT_TIMEOUT_SECONDS}s; got {body[-2000:]}")


def _value(body: str, name: str, **labels: str) -> float:
    """The value of the sample ``name`` whose labels include ``labels``."""
    for line in body.splitlines():
        match = re.match(rf"^{re.escape(name)}\{{(.*)\}} (\S+)$", line)
        if not match:
            continue
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(1)))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(match.group(2))
    raise AssertionError(f"no sample {name}{labels}")


def test_job_metrics_reach_prometheus(metrics_port: int) -> None:
    m = JobMetrics("job-7")
    m.chunk_done("sc010", 3.5, frames=24, faces=20, stage_seconds={"decode": 1.0, "swap": 2.0, "idle": 0.0})
    m.chunk_done("sc010", 12.0, frames=26, faces=0, stage_seconds={"decode": 0.5})
    m.chunk_done("sc020", 700.0, frames=10, faces=3)
    m.retry("sc010")
    m.actor_busy("a0", 0.8)
    m.actor_busy("a1", 1.7)  # clamped
    body = _scrape(metrics_port, 'actor="a1"')
    shot = {"job": "job-7", "shot": "sc010"}
    assert _value(body, "ray_recast_frames_rendered_total", **shot) == 50
    assert _value(body, "ray_recast_faces_swapped_total", **shot) == 20
    assert _value(body, "ray_recast_stage_seconds_total", **shot, stage="decode") == 1.5
    assert _value(body, "ray_recast_stage_seconds_total", **shot, stage="swap") == 2.0
    assert 'stage="idle"' not in body
    assert _value(body, "ray_recast_retries_total", **shot) == 1
    assert _value(body, "ray_recast_chunk_seconds_count", **shot) == 2
    # Ray 2.60 exports a histogram's sum from bucket midpoints (3.5 -> 3.5, 12 -> 15), not the
    # observed values: only the bucket bounds are exact.
    assert 2 + 10 <= _value(body, "ray_recast_chunk_seconds_sum", **shot) <= 5 + 20
    assert _value(body, "ray_recast_chunk_seconds_bucket", **shot, le="5.0") == 1
    assert _value(body, "ray_recast_chunk_seconds_bucket", **shot, le="20.0") == 2
    # A chunk past the last boundary lands only in +Inf.
    other = {"job": "job-7", "shot": "sc020"}
    assert _value(body, "ray_recast_chunk_seconds_bucket", **other, le="600.0") == 0
    assert _value(body, "ray_recast_chunk_seconds_bucket", **other, le="+Inf") == 1
    assert _value(body, "ray_recast_actor_busy_ratio", job="job-7", actor="a0") == 0.8
    assert _value(body, "ray_recast_actor_busy_ratio", job="job-7", actor="a1") == 1.0


def test_job_metrics_reject_nonsense(metrics_port: int) -> None:
    m = JobMetrics("job-8")
    with pytest.raises(ValueError, match="sc010"):
        m.chunk_done("sc010", -1.0, frames=1, faces=0)
    with pytest.raises(ValueError, match="frames=-2"):
        m.chunk_done("sc010", 1.0, frames=-2, faces=0)
    with pytest.raises(ValueError, match="a0"):
        m.actor_busy("a0", float("nan"))
    with pytest.raises(ValueError, match="job_id"):
        JobMetrics("")
    assert CHUNK_SECONDS_BOUNDARIES[0] == 1 and CHUNK_SECONDS_BOUNDARIES[-1] == 600
