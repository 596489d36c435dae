"""The analysis pass's stage breakdown and recognizer count, on the plain worker (no Ray)."""

from __future__ import annotations

import pytest

from actors.render import RenderConfig, RenderWorker
from jobs.demo_media import make_face_clip
from pipeline.faces.config import FaceConfig
from pipeline.video.chunking import plan_chunks
from pipeline.video.probe import probe

PARTS = ("decode", "letterbox", "detector", "postprocess", "align", "recognizer", "bookkeeping")


@pytest.mark.parametrize(
    "embed,detect_size", [("track", "fixed"), ("every_frame", "fixed"), ("track", "auto")]
)
def test_analysis_reports_its_parts_and_recognizer_calls(tmp_path, embed: str, detect_size: str) -> None:
    clip = make_face_clip(str(tmp_path / "plate.mp4"), seconds=1.5, width=200, height=150, gop=12)
    info = probe(clip)
    chunk = plan_chunks(info, 10.0, snap_to_keyframes=False).chunks[0]
    config = FaceConfig(batch_size=4, embed=embed, detect_size=detect_size)  # type: ignore[arg-type]
    worker = RenderWorker(RenderConfig(faces=config, codec_threads=1))
    analysis = worker.analyze_chunk(clip, info, chunk)
    stages = analysis.stage_seconds
    assert analysis.warnings == ()
    if detect_size == "auto":  # the face fills the frame: a smaller input, its time counted as detector
        detectors = [worker.models.detector, *worker.models.detector_sizes.made()]
        assert len(detectors) == 2 and detectors[1].stage_seconds["detector"] > 0
        for part in ("letterbox", "detector", "postprocess"):
            total = sum(d.stage_seconds[part] for d in detectors)
            assert stages[f"analysis.{part}"] == pytest.approx(total, rel=1e-6)
    assert {f"analysis.{p}" for p in PARTS} <= set(stages)
    assert stages["analysis.detector"] > 0 and stages["analysis.recognizer"] > 0
    parts = sum(stages[f"analysis.{p}"] for p in PARTS if p != "decode")
    assert parts == pytest.approx(stages["analyze"], rel=1e-6)
    faces = analysis.face_count
    assert faces == chunk.frame_count  # one face per frame
    if embed == "every_frame":
        assert analysis.faces_embedded == faces
    else:
        # frames 0, 8, 16, ... and nothing else: one face alone, moving smoothly
        assert analysis.faces_embedded == len(range(0, chunk.frame_count, 8))
