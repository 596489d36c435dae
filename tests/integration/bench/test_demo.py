"""The demo job end to end, shortened: plate, spec, rendered shot and before/after picture in its folder."""

from __future__ import annotations

import json
import os

import cv2
import pytest
import yaml

from cluster.report.qcfile import load_series
from jobs import demo
from pipeline.video.probe import probe

pytestmark = pytest.mark.ray


def test_demo_writes_its_outputs(tmp_path, capsys, ray_session) -> None:
    out = tmp_path / "demo"
    args = ["--out", str(out), "--seconds", "2", "--width", "160", "--height", "120"]
    with ray_session.use():
        assert demo.main(args) == 0
        printed = capsys.readouterr().out
        assert "48 frames at" in printed and "QC astronaut:" in printed
        shot = out / "astronaut.mp4"
        assert probe(str(shot)).frame_count == probe(str(out / "plates" / "astronaut.mp4")).frame_count == 48
        picture = cv2.imread(str(out / "astronaut_before_after.png"))
        assert picture.shape == (120, 320, 3)
        # Left (before) and right (after) differ: the face was replaced.  Only its inner face
        # (eyes, nose, mouth) since issue 35: 1.6 levels over the whole 160x120 picture.
        assert abs(picture[:, :160].astype(int) - picture[:, 160:].astype(int)).mean() > 1.0
        assert "demo: the hero is insightface's t1.jpg" in printed and "face 2 of 6: frontal" in printed
        summary = json.loads((out / "summary.json").read_text())
        # every frame's face, and the second face while it crosses (the demo's challenge)
        assert summary["ok"] and summary["shots"][0]["faces_swapped"] >= 48
        assert load_series(summary["shots"][0]["qc"])["numbers"] == list(range(48))
        assert summary["submit_to_first_chunk_seconds"] > 0
        spec = yaml.safe_load((out / "job.yaml").read_text())
        assert spec["models"]["pack"] == "builtin:default" and os.path.isabs(spec["shots"][0]["url"])
        # Run again: the finished shot is kept, and the demo says so instead of a speed.
        assert demo.main(args) == 0
        assert "48 frames, all kept from the previous run" in capsys.readouterr().out
        assert probe(str(shot)).frame_count == 48
