"""The analysis pass's stage breakdown and recognizer count, on the plain worker (no Ray)."""

from __future__ import annotations

import pytest

from actors.render import RenderConfig, RenderWorker
from jobs.bench.clips import make_face_clip
from pipeline.chunking import plan_chunks
from pipeline.faces.config import FaceConfig
from pipeline.probe import probe

PARTS = ("decode", "letterbox", "detector", "postprocess", "align", "recognizer", "bookkeeping")


@pytest.mark.parametrize("embed", ["track", "every_frame"])
def test_analysis_reports_its_parts_and_recognizer_calls(tmp_path, embed: str) -> None:
    clip = make_face_clip(str(tmp_path / "plate.mp4"), seconds=1.5, width=200, height=150, gop=12)
    info = probe(clip)
    chunk = plan_chunks(info, 10.0, snap_to_keyframes=False).chunks[0]
    worker = RenderWorker(RenderConfig(faces=FaceConfig(batch_size=4, embed=embed), codec_threads=1))  # type: ignore[arg-type]
    analysis = worker.analyze_chunk(clip, info, chunk)
    stages = analysis.stage_seconds
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
