"""QC through the whole job: a face lost behind an occluder is flagged by frame, and ``qc.fail_on`` gates.

A real face with a board sliding over it (the detector loses it for a few frames;
tracking bridges no gap) is rendered by the real driver and actors; the job's summary
names exactly those frames as unreplaced, the actors' measures reached the driver
(identity after the swap, flicker and seam per frame), and with ``qc.fail_on:
[unreplaced]`` the entrypoint exits 1 while the output is still published.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from cluster.report.qcfile import load_series
from jobs.demo_media import write_source_image
from jobs.render import EXIT_RENDER_FAILED, main
from pipeline.store import storage
from tests.clips import ClipSpec, write_clip
from tests.pipeline.qc.shots import N, occluded_frames

pytestmark = pytest.mark.ray


def test_unreplaced_frames_are_flagged_and_fail_the_job(ray_local, tmp_path) -> None:
    frames = occluded_frames()
    height, width = frames[0].shape[:2]
    clip = write_clip(
        str(tmp_path / "board.mp4"),
        ClipSpec(width=width, height=height, frames=N, rate=24, audio=False, options={"crf": "12"}),
        frames,
    )
    out = str(tmp_path / "out" / "board.mp4")
    spec = {
        "job_id": "qc-gate",
        "shots": [{"name": "board", "url": clip}],
        "identities": {
            "hero": {"images": [write_source_image(str(tmp_path / "source.jpg"))], "face_index": 1}
        },
        "output": {"url": out, "preset": "ultrafast"},
        "tracking": {"max_gap_frames": 0},
        "qc": {"fail_on": ["unreplaced"], "identity_every": 2},
        "resources": {"cpus_per_actor": 1, "max_actors": 1},
        "faces": {"batch_size": 4},
    }
    spec_path = tmp_path / "job.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    summary_path = tmp_path / "summary.json"
    assert main([str(spec_path), "--summary-json", str(summary_path)]) == EXIT_RENDER_FAILED
    assert os.path.exists(out)  # gated, not withheld
    (shot,) = json.loads(Path(summary_path).read_text())["shots"]
    assert shot["status"] == "published" and shot["qc_failed"] == ["unreplaced"]
    unreplaced = [f for f in shot["qc"]["flags"] if f["reason"] == "unreplaced"]
    assert len(unreplaced) == 1
    flagged = list(range(unreplaced[0]["first"], unreplaced[0]["last"] + 1))
    assert 3 <= len(flagged) <= 8 and 0 < flagged[0] and flagged[-1] < N - 1, flagged
    assert "series" not in shot["qc"] and storage.exists(shot["qc"]["series_url"])
    series = load_series(shot["qc"])
    after = [v for v in series["similarity_after"] if v is not None]
    assert len(after) >= 5 and all(-1.0 <= v <= 1.0 for v in after)
    assert any(v is not None for v in series["seam"]) and any(v is not None for v in series["flicker"])
