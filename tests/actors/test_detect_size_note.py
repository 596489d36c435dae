"""A pack detector that cannot run below its exported size: the actor's analysis says so, once per
chunk result (the driver adds it to the summary's warnings once), and its faces are found at 640."""

from __future__ import annotations

import json
import os
from fractions import Fraction

import numpy as np

from actors.render import RenderConfig, RenderWorker
from bench.models import standins
from pipeline.faces.config import FaceConfig
from pipeline.video.chunking import plan_chunks
from pipeline.video.probe import probe
from tests.clips import ClipSpec, write_clip
from tests.faces_data import _background
from tests.onnx_edits import generic_names


def test_a_detector_that_keeps_its_size_is_reported_with_the_chunk(tmp_path) -> None:
    pack = tmp_path / "pack"
    entries = standins.write_pack(str(pack), roles=("detector", "recognizer", "swapper"))
    detector_file = str(pack / entries[0]["file"])
    standins.scrfd(detector_file, fixed_size=640, box=(2.0, 2.0, 3.0, 3.0))  # batch 1, constant reshapes
    generic_names(detector_file)
    standins.write_manifest(str(pack), [{k: v for k, v in e.items() if k != "sha256"} for e in entries])
    assert json.loads((pack / "manifest.json").read_text())["models"][0]["kind"] == "scrfd"

    frame = _background(640, 640).copy()
    frame[320:352, 320:352] = 255  # the stand-in's "face": a bright 32 px cell, boxed 160 px wide
    clip = write_clip(
        tmp_path / "plate.mp4",
        ClipSpec(width=640, height=640, frames=6, rate=Fraction(24), audio=False),
        [frame] * 6,
    )
    info = probe(clip)
    chunk = plan_chunks(info, 10.0, snap_to_keyframes=False).chunks[0]

    def analyse(detect_size: str):
        config = RenderConfig(
            pack_url=str(pack),
            pack_cache_dir=str(tmp_path / "cache"),
            faces=FaceConfig(batch_size=4, detect_size=detect_size),  # type: ignore[arg-type]
            codec_threads=1,
        )
        worker = RenderWorker(config)
        assert worker.setup_error is None, worker.setup_error
        return worker.analyze_chunk(clip, info, chunk)

    auto, fixed = analyse("auto"), analyse("fixed")
    assert fixed.warnings == ()
    assert len(auto.warnings) == 1
    assert auto.warnings[0].startswith(f"faces.detect_size auto: detector {os.path.basename(detector_file)} ")
    assert "keeps its 640x640 input: it does not run at 192x192" in auto.warnings[0]
    assert [len(f) for f in auto.faces] == [1] * 6
    for a, b in zip(auto.faces, fixed.faces, strict=True):
        assert np.array_equal(a[0].box, b[0].box)
