"""Findings 8b and 10 of issue 29: the work area's own files are read within a bound, and the lease's
timings are bounded in the job spec.

``lease.json`` and ``manifest/job.json`` are files Recast wrote, but anyone who can write the work
area can replace them: a 2 GiB sparse one was read whole (2.8 GB RSS).  Now at most 64 KiB of a
lease is read (a larger one is a corrupt lease: exit 2 naming it, ``--force-takeover`` replaces
it) and at most 256 MiB of a manifest record (a larger one is absent, with a warning)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from cluster.lease.acquire import LeaseConfig, LeaseHeld, acquire_lease, lease_url
from cluster.state.manifest import JobManifest
from jobs.render import EXIT_BAD_INPUT, main
from tests.faultjobs import job_spec, make_media
from tests.raytools import REPO

SPARSE = 2 << 30


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, str]:
    return make_media(str(tmp_path_factory.mktemp("work-area-media")))


def sparse(path: Path, start: bytes = b"{") -> None:
    """A 2 GiB file that takes no disk: ``start``, then zero bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(start)
        fh.truncate(SPARSE)


_WRAP = """
import resource, subprocess, sys
code = subprocess.run([sys.executable, "-m", "jobs.render", sys.argv[1]], check=False).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)
sys.exit(code)
"""


def render_in_child(spec_path: Path) -> tuple[int, str, int]:
    """``python -m jobs.render spec``: exit code, stderr, and its peak RSS in bytes (its own alone)."""
    proc = subprocess.run(
        [sys.executable, "-c", _WRAP, str(spec_path)], check=False, cwd=str(REPO),
        env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    err, _, peak = proc.stderr.rstrip().rpartition("\n")
    return proc.returncode, err, int(peak) * 1024


@pytest.mark.ray  # runs an entrypoint that would start Ray if the refusal regressed
@pytest.mark.timeout(300)
@pytest.mark.parametrize("record", ["lease.json", "manifest/job.json"])
def test_sparse_2_gib_record_is_not_read_whole(media, tmp_path, record) -> None:
    """The audit's reproduction: a 2 GiB sparse file where the work area's record belongs."""
    out = tmp_path / "out"
    spec = job_spec(media, str(out), "sparse")
    if record == "manifest/job.json":
        spec["shots"][0]["frames"] = "0-99999"  # refused after job.json is read: no Ray needed
    spec_path = tmp_path / "job.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    work = out / ".recast-work" / "sparse"
    sparse(work / record)
    code, err, peak = render_in_child(spec_path)
    assert code == EXIT_BAD_INPUT, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    if record == "lease.json":
        assert f"{work / 'lease.json'} is not a readable lease (larger than 64 KiB)" in err, err[-3000:]
        assert "--force-takeover" in err, err[-3000:]
    else:
        assert "manifest record job.json is larger than 256 MiB; treated as missing" in err, err[-3000:]
        assert "shots[0].frames" in err, err[-3000:]
    assert peak < 1536 << 20, f"the driver peaked at {peak:,} bytes"


def test_lease_of_infinite_expiry_is_not_a_lease(tmp_path, capsys, media, no_ray) -> None:
    """A hand-written lease that would hold the work area forever (``expiry_seconds: Infinity``)."""
    out = tmp_path / "out"
    spec_path = tmp_path / "job.yaml"
    spec_path.write_text(yaml.safe_dump(job_spec(media, str(out), "forever")))
    work = out / ".recast-work" / "forever"
    work.mkdir(parents=True)
    now = time.time()
    lease = {"token": "t", "job_id": "forever", "submission_id": None, "host": "h", "pid": 1,
             "acquired_at": now, "heartbeat_at": now, "expiry_seconds": float("inf")}  # fmt: skip
    (work / "lease.json").write_text(json.dumps(lease))
    assert main([str(spec_path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert f"{work / 'lease.json'} is not a readable lease; if no driver" in err and "inf s" not in err, err


@pytest.mark.parametrize("start", [b"{", b'{"token": "' + b"x" * (70 << 10)])
def test_oversized_lease_refused_then_forced(tmp_path, start) -> None:
    work = str(tmp_path / "work")
    sparse(Path(lease_url(work)), start)
    config = LeaseConfig()
    with pytest.raises(LeaseHeld, match=r"lease.json is not a readable lease \(larger than 64 KiB\)"):
        acquire_lease(work, config, job_id="job")
    lease = acquire_lease(work, config, job_id="job", force=True)  # an operator replaces it
    try:
        assert lease.reason == "forced" and lease.took_over is None
        assert os.path.getsize(lease_url(work)) < 4096
    finally:
        lease.release()
    assert not os.path.exists(lease_url(work))


@pytest.mark.parametrize("name", ["job.json", "plate/shot.json"])
def test_oversized_manifest_record_is_absent_with_a_warning(tmp_path, name) -> None:
    manifest = JobManifest(str(tmp_path / "work"))
    sparse(tmp_path / "work" / "manifest" / name)
    record = manifest.read_job() if name == "job.json" else manifest.read_shot("plate")
    assert record is None
    assert manifest.take_warnings() == [f"manifest record {name} is larger than 256 MiB; treated as missing"]


LEASES = [
    ({"expiry_seconds": float("inf")}, "lease.expiry_seconds", "finite number"),
    ({"heartbeat_seconds": float("inf")}, "lease.heartbeat_seconds", "finite number"),
    ({"expiry_seconds": 2e-9}, "lease.expiry_seconds", "greater than or equal to 5"),
    ({"expiry_seconds": float("nan")}, "lease.expiry_seconds", "finite number"),
    ({"heartbeat_seconds": float("nan")}, "lease.heartbeat_seconds", "finite number"),
    ({"expiry_seconds": 7200}, "lease.expiry_seconds", "less than or equal to 3600"),
    ({"heartbeat_seconds": 0.01}, "lease.heartbeat_seconds", "greater than or equal to 1"),
    ({"expiry_seconds": 30, "heartbeat_seconds": 11}, "lease.heartbeat_seconds", "at most a third"),
]


@pytest.mark.parametrize(("lease", "field", "words"), LEASES, ids=[f"{k}" for k, _, _ in LEASES])
def test_lease_timings_are_bounded(media, tmp_path, capsys, lease, field, words, no_ray) -> None:
    """``.inf`` locked a work area forever, ``2e-9`` rewrote the lease thousands of times a second."""
    out = tmp_path / "out"
    spec_path = tmp_path / "job.yaml"
    spec_path.write_text(yaml.safe_dump(job_spec(media, str(out), "timings", lease=lease)))
    assert main([str(spec_path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert field in err and words in err and "Traceback" not in err, err
    assert not out.exists()


def test_bounds_still_admit_the_edges() -> None:
    assert LeaseConfig(expiry_seconds=5, heartbeat_seconds=1).expiry_seconds == 5
    assert LeaseConfig(expiry_seconds=3600, heartbeat_seconds=1200).heartbeat_seconds == 1200
