"""Source dimensions are bounded at probe time, from the header, for videos and image sequences
(16,384 px a side and 8K x 8K area by default; ``InputLimits`` changes them)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import OpenImageIO as oiio
import pytest

from pipeline.errors import InputRefused, MediaError, StorageError
from pipeline.limits import InputLimits
from pipeline.plates.probe import probe_sequence
from pipeline.video.probe import probe
from tests.hostile_inputs import wide_video


def exr_frames(folder: Path, width: int, height: int, numbers: range) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    for n in numbers:
        out = oiio.ImageOutput.create("exr")
        spec = oiio.ImageSpec(width, height, 3, oiio.HALF)
        spec.attribute("FramesPerSecond", oiio.TypeRational, (24, 1))
        spec.attribute("colorspace", "ACEScg")
        path = str(folder / f"plate.{n:04d}.exr")
        assert out.open(path, spec), oiio.geterror()
        assert out.write_image(np.zeros((height, width, 3), np.float16))
        out.close()
    return str(folder / "plate.####.exr")


def test_video_wider_than_16k_is_refused_from_its_header(tmp_path: Path) -> None:
    url = wide_video(tmp_path / "wide.mkv", 16_400, 16)
    with pytest.raises(MediaError) as err:
        probe(url)
    assert err.value.url == url
    assert "16400x16" in err.value.reason and "wider than limits.max_width 16384" in err.value.reason
    assert probe(url, limits=InputLimits(max_width=16_400)).width == 16_400


def test_video_area_limit(tmp_path: Path) -> None:
    url = wide_video(tmp_path / "small.mkv", 64, 48)
    assert probe(url).frame_count == 3
    with pytest.raises(MediaError, match=r"64x48 \(3,072 pixels\), more than limits.max_pixels 3,000"):
        probe(url, limits=InputLimits(max_pixels=3000))


def test_sequence_frames_larger_than_the_limit_are_refused_unread(tmp_path: Path) -> None:
    url = exr_frames(tmp_path / "wide", 16_400, 2, range(1001, 1003))
    with pytest.raises(MediaError) as err:
        probe_sequence(url)
    assert err.value.url == url
    assert "frames 1001-1002 are too large" in err.value.reason and "16400x2" in err.value.reason
    assert probe_sequence(url, limits=InputLimits(max_width=20_000)).width == 16_400
    small = exr_frames(tmp_path / "small", 64, 48, range(1, 3))
    with pytest.raises(MediaError, match="limits.max_pixels 1,000"):
        probe_sequence(small, limits=InputLimits(max_pixels=1000))


@pytest.mark.timeout(30)
def test_non_regular_sources_are_refused_by_type(tmp_path: Path) -> None:
    fifo = tmp_path / "plate.mov"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.mp4"
    zero.symlink_to("/dev/zero")
    for url, kind in ((str(fifo), "a FIFO"), (str(zero), "a character device")):
        with pytest.raises(StorageError) as err:
            probe(url)
        assert isinstance(err.value, InputRefused) and kind in err.value.reason, str(err.value)
