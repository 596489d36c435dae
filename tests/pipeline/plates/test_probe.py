"""probe_sequence on real EXR, DPX and TIFF sequences, and every refusal naming its frames."""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import pytest

from pipeline.errors import MediaError, SpecError
from pipeline.plates.probe import probe_sequence
from pipeline.store import storage
from pipeline.video.sequence_types import ColourRequest
from tests.pipeline.plates.fs_calls import counting
from tests.plates import FORMATS, write_frame, write_sequence


@pytest.mark.parametrize("kind", FORMATS)
def test_probe_each_format(tmp_path, kind):
    opts = FORMATS[kind]
    url = write_sequence(tmp_path, "sc010", count=4, **opts)
    colour = ColourRequest(plate_space="ACEScct") if opts["fmt"] == "dpx" else None
    fps = Fraction(25) if opts["fmt"] == "tiff" else None
    info = probe_sequence(url, fps=fps, colour=colour, threads=2)
    seq = info.sequence
    assert seq is not None
    assert info.pts == seq.numbers == (1001, 1002, 1003, 1004)
    assert info.keyframes == (0, 1, 2, 3) and info.frame_count == info.declared_frames == 4
    assert (info.width, info.height, info.container_format) == (320, 180, "image2")
    assert info.frame_rate == (25 if fps else 24) and info.time_base == 1 / info.frame_rate
    assert info.timecode == ("01:00:00:00" if opts["fmt"] != "tiff" else None)
    assert seq.channels == ("R", "G", "B") and seq.rgb == (0, 1, 2)
    expected = {
        "exr-half-piz": ("openexr", "half", 16, "piz", "ACEScg"),
        "exr-float-dwaa": ("openexr", "float", 32, "dwaa", "ACEScg"),
        "dpx-10": ("dpx", "uint16", 10, None, "ACEScct"),
        "tiff-16": ("tiff", "uint16", 16, "zip", "sRGB Encoded Rec.709 (sRGB)"),
    }[kind]
    got = (seq.format, seq.pixel_type, seq.bits, seq.compression, seq.colour.plate_space)
    assert got == expected
    assert len(seq.sizes) == len(seq.stamps) == 4


def test_spec_fps_and_plate_space_win_over_the_header(tmp_path):
    url = write_sequence(tmp_path, "s", count=2)
    info = probe_sequence(url, fps=Fraction(24000, 1001), colour=ColourRequest(plate_space="lin_ap1_scene"))
    assert info.frame_rate == Fraction(24000, 1001)
    assert info.sequence is not None and info.sequence.colour.plate_space == "ACEScg"


def test_extra_channels_and_per_channel_types(tmp_path):
    url = write_sequence(tmp_path, "s", count=2, extra_channels=("A", "Z"))
    seq = probe_sequence(url).sequence
    assert seq is not None
    assert seq.channels == ("R", "G", "B", "A", "Z")
    assert seq.channel_types == ("half",) * 4 + ("float",) and seq.pixel_type == "mixed"


def test_no_fps_anywhere_is_refused(tmp_path):
    url = write_sequence(tmp_path, "s", count=2, fps=None)
    with pytest.raises(MediaError, match="add fps: to the shot"):
        probe_sequence(url)


def test_untagged_exr_needs_colour_plate(tmp_path):
    url = write_sequence(tmp_path, "s", count=2, colour_space=None)
    with pytest.raises(SpecError, match=r"colour\.plate: .*s\.####\.exr does not name its colour space"):
        probe_sequence(url)
    info = probe_sequence(url, colour=ColourRequest(plate_space="ACES2065-1"))
    assert info.sequence is not None and info.sequence.colour.plate_space == "ACES2065-1"


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (ColourRequest(plate_space="LogC4"), "colour.plate"),
        (ColourRequest(model_space="nope"), "colour.model"),
        (ColourRequest(config="/nowhere/config.ocio"), "colour.config"),
    ],
)
def test_bad_colour_names_their_field(tmp_path, request_, field):
    url = write_sequence(tmp_path, "s", count=1)
    with pytest.raises(SpecError) as err:
        probe_sequence(url, colour=request_)
    assert err.value.field == field


def test_no_frames(tmp_path):
    with pytest.raises(MediaError, match=r"s\.####\.exr: no frames"):
        probe_sequence(f"{tmp_path}/s.####.exr")


def _truncate(path, keep):
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: keep if keep > 0 else len(data) + keep])


def test_every_problem_is_named_with_its_frames(tmp_path):
    url = write_sequence(tmp_path, "s", count=12, size=(64, 36))
    frame = str(tmp_path / "s.{:04d}.exr").format
    for n in (1003, 1004, 1005, 1009):
        os.remove(frame(n))
    Path(frame(1006)).write_bytes(b"")
    _truncate(frame(1007), -1)
    Path(frame(1008)).write_bytes(b"not an image at all" * 10)
    write_frame(frame(1010), size=(32, 18))
    write_frame(frame(1011), size=(32, 18))
    write_frame(frame(1012), size=(64, 36), extra_channels=("A",))
    with pytest.raises(MediaError) as err:
        probe_sequence(url, threads=3)
    reason = err.value.reason
    assert err.value.url == url
    assert "frames 1003-1005, 1009 are missing" in reason
    assert "frame 1006 is empty (0 bytes)" in reason
    assert "frame 1007 is truncated or corrupt" in reason
    assert "frame 1008 is unreadable" in reason
    assert "frames 1010-1011 are 32x18 R,G,B half, unlike frame 1001 (64x36 R,G,B half)" in reason
    assert "frame 1012 is 64x36 R,G,B,A half" in reason


@pytest.mark.parametrize("kind", FORMATS)
@pytest.mark.parametrize("keep", [-1, 3000])
def test_truncated_frames_are_caught_in_every_format(tmp_path, kind, keep):
    opts = FORMATS[kind]
    url = write_sequence(tmp_path, "s", count=3, **opts)
    _truncate(url.replace("####", "1002"), keep)
    with pytest.raises(MediaError, match="frame 1002 is (truncated or corrupt|unreadable)"):
        probe_sequence(url, fps=Fraction(24), colour=ColourRequest(plate_space="ACEScct"))


def test_multi_part_exr_is_refused(tmp_path):
    import numpy as np
    import OpenImageIO as oiio

    path = str(tmp_path / "m.1001.exr")
    specs = [oiio.ImageSpec(8, 4, 3, oiio.HALF), oiio.ImageSpec(8, 4, 3, oiio.HALF)]
    out = oiio.ImageOutput.create(path)
    assert out.open(path, specs)
    out.write_image(np.zeros((4, 8, 3), np.float16))
    out.open(path, specs[1], "AppendSubimage")
    out.write_image(np.zeros((4, 8, 3), np.float16))
    out.close()
    with pytest.raises(MediaError, match="multi-part EXR is not supported"):
        probe_sequence(f"{tmp_path}/m.####.exr", fps=Fraction(24))


def test_probe_on_s3_reads_heads_and_tails_not_whole_frames(s3_bucket, tmp_path, monkeypatch):
    local = write_sequence(tmp_path, "s", count=3, size=(2048, 1080))
    assert os.path.getsize(local.replace("####", "1001")) > 3_000_000  # more than head + tail
    for n in range(1001, 1004):
        name = f"s.{n}.exr"
        storage.publish_file(tmp_path / name, f"{s3_bucket}/sc/{name}")
    info = probe_sequence(f"{s3_bucket}/sc/s.####.exr")
    assert info.pts == (1001, 1002, 1003) and info.sequence is not None
    assert info.sequence.sizes == tuple(os.path.getsize(local.replace("####", str(n))) for n in info.pts)
    calls = counting(monkeypatch)
    probe_sequence(f"{s3_bucket}/sc/s.####.exr")
    assert "get_file" not in calls and calls.count("ls") == 1 and calls.count("cat_file") == 2 * 3
    whole = tmp_path / "s.1003.exr"
    storage.write_bytes(f"{s3_bucket}/sc/s.1003.exr", whole.read_bytes()[:-10])
    with pytest.raises(MediaError, match="frame 1003 is truncated or corrupt"):
        probe_sequence(f"{s3_bucket}/sc/s.####.exr")
