"""Shared helpers of the fault-tolerance tests: a small face clip, a job spec, reading manifests, a job
run on a thread of its own while the test injects a fault."""

from __future__ import annotations

import glob
import hashlib
import json
import os
import random
import shutil
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import av
import numpy as np

from cluster.lease.acquire import lease_url
from cluster.lease.holder import Holder
from cluster.lease.store import LeaseStore
from jobs.demo_media import make_face_clip, write_source_image

if TYPE_CHECKING:
    from cluster.driver import JobRunner

CLIP_SECONDS = 3.0  # 3 chunks of 1 s: enough to kill something mid-job, small enough for CI
CHUNKS = 3
"""Chunks of a :func:`job_spec` job on :func:`make_media`'s plate."""


def make_media(root: str) -> dict[str, str]:
    """A 72-frame 240x180 face clip (keyframe every second) and a source picture."""
    return {
        "plate": make_face_clip(
            os.path.join(root, "plate.mp4"), seconds=CLIP_SECONDS, width=240, height=180, gop=24
        ),
        "source": write_source_image(os.path.join(root, "source.jpg")),
    }


CLEAN_JOB = "clean"
"""The job id of the clean reference run (``tests/integration/faults/conftest.py``) and of every fault
test compared with it: the watermark carries the job id, so only runs of one job id can have the same
bytes (each test has its own output folder, hence its own work area)."""


def job_spec(media: dict[str, str], out_dir: str, job_id: str, **extra: Any) -> dict[str, Any]:
    """One shot, two CPU actors, 1 s chunks (snapped to the 1 s keyframes)."""
    data: dict[str, Any] = {
        "job_id": job_id,
        "shots": [{"name": "plate", "url": media["plate"]}],
        "identities": {"hero": {"images": [media["source"]], "face_index": 0}},
        "output": {"url": os.path.join(out_dir, "{shot}.mp4"), "preset": "ultrafast"},
        "chunking": {"seconds": 1, "min_seconds": 1},
        "resources": {"cpus_per_actor": 1, "max_actors": 2, "max_inflight_per_actor": 2},
        "faces": {"batch_size": 4},
    }
    data.update(extra)
    return data


def decode_frames(path: str) -> list[np.ndarray]:
    """Every frame of the video at ``path`` as RGB, in int16 (differences between frames do not wrap)."""
    with av.open(path) as container:
        return [f.to_ndarray(format="rgb24").astype(np.int16) for f in container.decode(video=0)]


def sha256_file(path: str) -> str:
    """The file's sha256; for a published MP4/MOV, that of its content before the Content Credentials
    were embedded (each run signs afresh, so the file's own bytes differ run to run), once the
    credentials are checked intact: a byte changed anywhere outside them fails the check."""
    if path.lower().endswith((".mp4", ".mov", ".m4v")):
        from pipeline.provenance.credentials import verify_video

        found = verify_video(path)
        if found.status != "missing":
            assert found.status == "valid" and found.content_sha256, (path, found.failures)
            return found.content_sha256
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def records(work_dir: str, shot: str, kind: str) -> dict[int, dict[str, Any]]:
    """The committed ``kind`` records (analysis/track/render) of ``shot`` in a local work area."""
    out = {}
    for path in sorted(glob.glob(os.path.join(work_dir, "manifest", shot, f"{kind}-*.json"))):
        data = json.loads(Path(path).read_text())
        out[int(data["chunk"])] = data
    return out


def rerendered_chunks(before: dict[int, dict[str, Any]], after: dict[int, dict[str, Any]]) -> list[int]:
    """The chunks whose render key changed from one run's render :func:`records` to the next's; every
    other chunk must have kept its segment byte for byte (the same sha256)."""
    again = [c for c in sorted(after) if after[c]["key"] != before[c]["key"]]
    kept = [c for c in sorted(after) if c not in again]
    assert [after[c]["sha256"] for c in kept] == [before[c]["sha256"] for c in kept], kept
    return again


def corrupt_middle(src: str, dst: str, first_frame: int, frames: int) -> str:
    """A copy of ``src`` with the packets of ``frames`` frames from ``first_frame`` (in pts order) overwritten
    with noise: the file still probes (every packet is indexed) but those frames cannot be decoded."""
    shutil.copyfile(src, dst)
    with av.open(src) as container:
        packets = sorted(
            (p.pts, p.pos, p.size) for p in container.demux(video=0) if p.size and p.pos is not None
        )
    data = bytearray(Path(dst).read_bytes())
    rng = random.Random(1)
    for _, pos, size in packets[first_frame : first_frame + frames]:
        data[pos : pos + size] = bytes(rng.randrange(256) for _ in range(size))
    with open(dst, "wb") as fh:
        fh.write(data)
    return dst


def tmp_files(root: str) -> list[str]:
    """Temporary files (``.*.tmp-*`` of atomic writes) left anywhere under ``root``."""
    return [
        os.path.join(d, f)
        for d, _, files in os.walk(root)
        for f in files
        if ".tmp-" in f or f.startswith(".recast-write")
    ]


def expire_lease(work_url: str) -> Holder:
    """Make the lease a killed driver left in ``work_url`` what the next driver finds once its expiry
    has passed, without waiting for it: its times moved back by what is left of the expiry, and half a
    second (a driver runs in a process of its own, so its clock cannot be set; the lease it reads can).
    Returns the lease as the killed driver left it."""
    store = LeaseStore(work_url)
    url = lease_url(work_url)
    left = Holder.from_bytes(store.read(url))
    assert left is not None, f"no lease in {work_url}"
    shift = left.heartbeat_at + left.expiry_seconds + 0.5 - time.time()
    if shift > 0:
        aged = replace(left, acquired_at=left.acquired_at - shift, heartbeat_at=left.heartbeat_at - shift)
        store.replace(url, aged.to_bytes())
    return left


def run_in_thread(runner: JobRunner, name: str = "fault-job") -> tuple[threading.Thread, dict[str, Any]]:
    """``runner.run()`` started on a thread of its own (named ``name``), and the dict that thread fills
    with ``summary`` or ``error``: :func:`finish` collects it."""
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["summary"] = runner.run()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test thread
            result["error"] = exc

    thread = threading.Thread(target=run, name=name)
    thread.start()
    return thread, result


def finish(thread: threading.Thread, result: dict[str, Any], timeout: float = 300.0) -> Any:
    """The summary of a job started by :func:`run_in_thread` once it ends; its error is raised here."""
    thread.join(timeout=timeout)
    assert not thread.is_alive(), "job did not finish"
    if "error" in result:
        raise result["error"]
    return result["summary"]
