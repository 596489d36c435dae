"""End to end through ``ray job submit`` against a head node this test starts and stops.

Two shots: one local, one whose source and output are on the loopback S3
endpoint (its settings reach the job through ``--runtime-env-json``).  Both
outputs must exist with every source frame, faces changed, background not.
A spec with a bad field must make the submitted job fail, naming the field.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import av
import numpy as np
import pytest
import yaml

from jobs.demo_media import make_face_clip, write_source_image
from pipeline.store import storage
from pipeline.video.probe import probe
from tests.raytools import ray_head, s3_env_vars

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def decode_all(path: str) -> list[np.ndarray]:
    with av.open(path) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def face_boxes(rgb: np.ndarray, models) -> list[np.ndarray]:
    return [f.box for f in models.detector.detect(rgb)]


def region_masks(shape: tuple[int, int], boxes: list[np.ndarray], grow: float) -> np.ndarray:
    mask = np.zeros(shape, bool)
    for box in boxes:
        x1, y1, x2, y2 = box
        w, h = x2 - x1, y2 - y1
        xa, ya = int(max(0, x1 - grow * w)), int(max(0, y1 - grow * h))
        xb, yb = int(min(shape[1], x2 + grow * w)), int(min(shape[0], y2 + grow * h))
        mask[ya:yb, xa:xb] = True
    return mask


def test_ray_job_submit_end_to_end(s3_bucket: str, tmp_path) -> None:
    from pipeline.models.loader import load_face_models
    from pipeline.models.pack import load_pack
    from pipeline.models.runtime.settings import ExecutionConfig

    local_clip = make_face_clip(str(tmp_path / "plate_a.mp4"), seconds=2.5, width=240, height=180)
    remote_local = make_face_clip(str(tmp_path / "plate_b.mp4"), seconds=2.0, width=240, height=180, gop=24)
    remote_clip = f"{s3_bucket}/plates/plate_b.mp4"
    storage.publish_file(remote_local, remote_clip)
    source = write_source_image(str(tmp_path / "source.jpg"))
    out_dir = tmp_path / "out"
    spec: dict[str, Any] = {
        "job_id": "e2e",
        "shots": [
            {"name": "a", "url": local_clip},
            {"name": "b", "url": remote_clip, "output": f"{s3_bucket}/deliveries/b.mp4"},
        ],
        "identities": {"hero": {"images": [source], "face_index": 0}},
        "output": {
            "url": str(out_dir / "{shot}.mp4"),
            "preset": "ultrafast",
            "work_url": f"{s3_bucket}/work/{{job_id}}",
        },
        "chunking": {"seconds": 1, "min_seconds": 1},
        "resources": {"cpus_per_actor": 1},
        "faces": {"batch_size": 4},
    }
    spec_path = tmp_path / "job.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    bad = dict(spec, output={**spec["output"], "codec": "av1"})
    bad_path = tmp_path / "bad.yaml"
    bad_path.write_text(yaml.safe_dump(bad))

    env = s3_env_vars()
    with ray_head(num_cpus=2) as head:
        done = head.submit(["python", "-m", "jobs.render", str(spec_path)], env_vars=env)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
        assert "succeeded" in (done.stdout + done.stderr).lower()

        bad_id = f"bad-{uuid.uuid4().hex[:8]}"
        failed = head.submit(
            ["python", "-m", "jobs.render", str(bad_path)], submission_id=bad_id, timeout=300
        )
        assert failed.returncode != 0
        logs = head.cli("job", "logs", "--address", head.dashboard_url, bad_id, timeout=60)
        assert "output.codec" in logs.stdout, logs.stdout[-3000:]
        status = head.cli("job", "status", "--address", head.dashboard_url, bad_id, timeout=60)
        text = (status.stdout + status.stderr).lower()
        assert "failed" in text and "exit code 2" in text, text[-2000:]

    # Both outputs exist, with every frame of their sources.
    out_a = str(out_dir / "a.mp4")
    out_b_url = f"{s3_bucket}/deliveries/b.mp4"
    assert os.path.exists(out_a) and storage.exists(out_b_url)
    assert probe(out_a).frame_count == probe(local_clip).frame_count == 60
    assert probe(out_b_url).frame_count == probe(remote_clip).frame_count == 48
    summary = storage.read_bytes(f"{s3_bucket}/work/e2e/summary.json")
    assert b'"ok": true' in summary

    # Faces changed, background did not.
    models = load_face_models(load_pack("builtin:default"), ExecutionConfig())
    with storage.fetched(out_b_url, suffix=".mp4") as out_b:
        pairs = [(local_clip, out_a), (remote_local, out_b)]
        for src_path, out_path in pairs:
            src, out = decode_all(src_path), decode_all(out_path)
            assert len(src) == len(out)
            for i in (0, len(src) // 2, len(src) - 1):
                boxes = face_boxes(src[i], models)
                assert boxes, f"no face found in source frame {i}"
                diff = np.abs(src[i].astype(np.int16) - out[i].astype(np.int16)).mean(axis=2)
                inner = region_masks(diff.shape, boxes, grow=-0.2)
                outer = ~region_masks(diff.shape, boxes, grow=0.6)
                assert diff[inner].mean() > 12.0, (src_path, i, diff[inner].mean())
                assert diff[outer].mean() < 3.0, (src_path, i, diff[outer].mean())
