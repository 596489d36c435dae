"""An EXR sequence from the loopback S3 store to S3: an actor killed mid-sequence, then a resubmission.

The frames of the recovered run must equal a clean run's frame for frame (the
manifest records every frame's sha256); nothing half-written may appear; and the
resubmitted job must find the published sequence as its own and render nothing.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import fsspec
import pytest

from cluster.driver import JobRunner, run_job
from cluster.spec.job import parse_spec
from jobs.demo_media import write_source_image
from tests.plates import write_sequence

pytestmark = [pytest.mark.ray, pytest.mark.slow]

COUNT = 72  # 3 s at 24 fps: three 1 s chunks


def _spec(source: str, plate: str, out: str, job_id: str) -> dict:
    return {
        "job_id": job_id,
        "shots": [{"name": "sc030", "url": plate}],
        "identities": {"hero": {"images": [source], "face_index": 0}},
        "output": {"url": out},
        "chunking": {"seconds": 1, "min_seconds": 1},
        "resources": {"cpus_per_actor": 1, "max_actors": 2, "max_inflight_per_actor": 1},
        "faces": {"batch_size": 4},
    }


def _frames(fs: Any, prefix: str) -> dict[str, str]:
    """Frame name -> ETag (MD5 of the bytes for single PUTs) of every frame under ``prefix`` (not the
    sequence's signed sidecar, whose signature differs run to run)."""
    return {
        os.path.basename(entry["name"]): entry["ETag"]
        for entry in fs.ls(prefix, detail=True, refresh=True)
        if entry["type"] == "file" and not entry["name"].endswith(".credentials.json")
    }


def test_s3_sequence_survives_a_killed_actor(s3_bucket, ray_session, tmp_path) -> None:
    local = write_sequence(tmp_path / "plates", "sc030_plate", count=COUNT, size=(480, 270))
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    fs.put(str(tmp_path / "plates") + "/", f"{s3_bucket}/plates/", recursive=True)
    plate = f"{s3_bucket}/plates/{os.path.basename(local)}"
    source = write_source_image(str(tmp_path / "source.jpg"))
    # A Ray started after the S3 settings: its workers inherit them.
    ray_session.stop()
    with ray_session.use():
        clean = run_job(parse_spec(_spec(source, plate, f"{s3_bucket}/clean/sc030.####.exr", "clean")))
        assert clean.ok, clean.table()
        reference = _frames(fs, f"{s3_bucket}/clean")
        assert len(reference) == COUNT

        out = f"{s3_bucket}/out/sc030.####.exr"
        runner = JobRunner(parse_spec(_spec(source, plate, out, "clean")))
        result: dict[str, Any] = {}
        thread = threading.Thread(target=lambda: result.update(summary=runner.run()), name="plates-job")
        thread.start()
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and thread.is_alive():
            try:
                # A frame, not the write check's probe (listed there for a moment before the job starts).
                written_yet = any(n.endswith(".exr") for n in _frames(fs, f"{s3_bucket}/out"))
            except FileNotFoundError:  # nothing yet, or only the probe, already removed
                written_yet = False
            if written_yet and runner.summary is not None and runner.summary.actor_info:
                break
            time.sleep(0.2)
        assert thread.is_alive(), "the job ended before an actor could be killed"
        os.kill(runner.summary.actor_info[0].pid, signal.SIGKILL)  # mid-sequence: frames are being written
        thread.join(timeout=300)
        summary = result["summary"]
        assert summary.ok, summary.table()
        assert sum(runner.shot_retries.values()) >= 1, runner.timeline
        written = _frames(fs, f"{s3_bucket}/out")
        assert {n.replace("sc030.", "") for n in written} == {n.replace("sc030.", "") for n in reference}
        # Frame for frame the clean run's bytes; no partial or temporary object anywhere.
        for name, etag in reference.items():
            assert written[name] == etag, name
        (shot,) = summary.shots
        assert shot.content_sha256 == clean.shots[0].content_sha256  # one job id: the watermark carries it
        assert fs.exists(f"{s3_bucket}/out/sc030.credentials.json")  # the signed sidecar, published once

        # Resubmitted: the published sequence is this job's own, unchanged: nothing is rendered.
        again = run_job(parse_spec(_spec(source, plate, out, "clean")))
        (kept,) = again.shots
        assert again.ok and kept.reused and kept.chunks_rendered == 0 and kept.analyses_run == 0, (
            again.table()
        )
        assert _frames(fs, f"{s3_bucket}/out") == written
