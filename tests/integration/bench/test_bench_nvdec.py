"""The NVDEC benchmark's parts on any machine: its clip, PyAV timed, and NVDEC's absence reported."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from bench.device.nvdec import bench_clip, write_bench_clip
from pipeline.video.probe import probe


@pytest.mark.skipif(
    importlib.util.find_spec("PyNvVideoCodec") is not None and torch.cuda.is_available(),
    reason="NVDEC may be available here (the device check runs the full benchmark)",
)
@pytest.mark.parametrize(("codec", "pix_fmt"), [("libx264", "yuv420p"), ("libx265", "yuv420p10le")])
def test_bench_clip_without_nvdec(tmp_path, codec: str, pix_fmt: str) -> None:
    path = write_bench_clip(str(tmp_path / "c.mp4"), codec, pix_fmt, 128, 72, 30)
    info = probe(path)
    assert (info.pix_fmt, info.frame_count, info.colorspace, len(info.keyframes)) == (pix_fmt, 30, "bt709", 2)
    row = bench_clip(path, nvdec=False)
    assert row["frames"] == 30 and row["pyav_fps"] > 0 and row["nvdec_skipped"] == "NVDEC unavailable"
    assert "nvdec_fps" not in row
