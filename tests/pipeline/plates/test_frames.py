"""Reading plates, merging a render back and writing frames: bit-exact where nothing changed."""

from __future__ import annotations

import hashlib
import os
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import OpenImageIO as oiio
import pytest

from pipeline.errors import MediaError
from pipeline.plates.colour import PlateConverter
from pipeline.plates.frames import copy_plate, merge_back, read_plates, write_plate
from pipeline.plates.probe import probe_sequence
from pipeline.plates.sequence import parse_sequence_url
from pipeline.store import storage
from pipeline.video.sequence_types import ColourRequest
from tests.plates import FORMATS, write_sequence


def _probe(url, fmt):
    colour = ColourRequest(plate_space="ACEScct") if fmt == "dpx" else None
    info = probe_sequence(url, fps=Fraction(24), colour=colour)
    assert info.sequence is not None
    return info, PlateConverter(info.sequence.colour, info.sequence)


def _read(path):
    inp = oiio.ImageInput.open(path)
    spec = inp.spec()
    pixels = inp.read_image(0, 0, 0, spec.nchannels, oiio.FLOAT if len(spec.channelformats) else spec.format)
    attrs = {a.name: a.value for a in spec.extra_attribs}
    inp.close()
    return pixels, attrs


@pytest.mark.parametrize("kind", FORMATS)
def test_unchanged_round_trip_is_bit_exact(tmp_path, kind):
    opts = FORMATS[kind]
    extra = ("A", "Z") if opts["fmt"] == "exr" else ()
    url = write_sequence(tmp_path / "src", "s", count=3, extra_channels=extra, **opts)
    info, conv = _probe(url, opts["fmt"])
    out = parse_sequence_url(str(tmp_path / "out" / "s_recast.####.") + url.rpartition(".")[2])
    frames = list(read_plates(info, 0, 3, conv, threads=2))
    assert [(f.index, f.pts) for f in frames] == [(0, 1001), (1, 1002), (2, 1003)]
    for frame in frames:
        assert frame.rgb.dtype == np.uint16 and frame.rgb.shape == (180, 320, 3)
        merged = merge_back(frame, frame.rgb.copy(), conv)
        # DWAA is lossy: re-encoding it again is not bit-exact, so lossless zip is asked for.
        lossless = "zip" if opts["compression"] == "dwaa" else None
        digest, size = write_plate(out.frame_url(frame.pts), merged, frame.spec, compression=lossless)
        src, src_attrs = _read(url.replace("####", str(frame.pts)))
        dst, dst_attrs = _read(out.frame_url(frame.pts))
        assert src.dtype == dst.dtype and np.array_equal(src.view(np.uint8), dst.view(np.uint8))
        assert size == os.path.getsize(out.frame_url(frame.pts)) and len(digest) == 64
        if lossless:
            assert dst_attrs.pop("compression") == "zip" and src_attrs.pop("compression") == "dwaa"
        for name in (
            "compression",
            "smpte:TimeCode",
            "FramesPerSecond",
            "plate:camera",
            "colorspace",
            "dpx:FrameRate",
            "oiio:BitsPerSample",
        ):
            assert src_attrs.get(name) == dst_attrs.get(name), name
    if opts["fmt"] == "exr":
        assert frames[1].spec.getattribute("smpte:TimeCode")[0] == 0x01000001  # each frame's own header


def test_changed_region_keeps_everything_else_and_highlights(tmp_path):
    url = write_sequence(tmp_path, "s", count=1, extra_channels=("A", "Z"))
    info, conv = _probe(url, "exr")
    frame = next(read_plates(info, 0, 1, conv))
    model = conv.to_model(frame.pixels[..., :3])
    hot = model.max(axis=-1) > 1.0
    assert hot.sum() > 100 and (frame.pixels[..., :3] < 0).any()
    rendered = frame.rgb.copy()
    mask = np.zeros(hot.shape, bool)
    mask[60:120, 90:150] = True  # a "face" region
    rendered[mask] = rendered[mask] // 2
    # +delta on pixels above 1.0 whose rgb is clipped at 65535: only the difference applies
    band = hot & ~mask
    band[:, : hot.shape[1] - 8] = False
    rendered[band] = 65535 - 1000
    changed = mask | band
    merged = merge_back(frame, rendered, conv)
    keep = ~changed
    assert np.array_equal(merged[keep].view(np.uint16), frame.pixels[keep].view(np.uint16))
    assert np.array_equal(merged[..., 3:].view(np.uint8), frame.pixels[..., 3:].view(np.uint8))  # A, Z
    assert (merged[~changed][..., :3].astype(np.float32) > 1.0).any()
    new_model = conv.to_model(merged[band][None, :, :3].astype(np.float32))[0]
    assert (new_model.max(axis=-1) > 1.0).all()
    step = (rendered[band].astype(np.float32) - frame.rgb[band]) / 65535
    assert np.allclose(new_model, model[band] + step, atol=0.01)
    face = conv.to_model(merged[mask][None, :, :3].astype(np.float32))[0]
    assert np.allclose(face, rendered[mask] / 65535, atol=0.01)


def test_dpx_change_is_quantised_to_ten_bits(tmp_path):
    url = write_sequence(tmp_path, "s", count=1, **FORMATS["dpx-10"])
    info, conv = _probe(url, "dpx")
    frame = next(read_plates(info, 0, 1, conv))
    rendered = frame.rgb.copy()
    rendered[10:20, 10:20] = 30000
    merged = merge_back(frame, rendered, conv)
    out = str(tmp_path / "o.1001.dpx")
    write_plate(out, merged, frame.spec)
    back, _ = _read(out)
    assert np.array_equal(back, merged)


def test_read_and_write_through_s3(s3_bucket, tmp_path, monkeypatch):
    scratch = tmp_path / "scratch"  # this test's own temporary folder: nothing may stay in it
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    local = write_sequence(tmp_path, "s", count=2, extra_channels=("A",))
    for n in (1001, 1002):
        storage.publish_file(local.replace("####", str(n)), f"{s3_bucket}/in/s.{n}.exr")
    info, conv = _probe(f"{s3_bucket}/in/s.####.exr", "exr")
    out = parse_sequence_url(f"{s3_bucket}/out/s_recast.####.exr")
    for frame in read_plates(info, 0, 2, conv):
        write_plate(
            out.frame_url(frame.pts), merge_back(frame, frame.rgb, conv), frame.spec, compression="zip"
        )
    digest, size = copy_plate(f"{s3_bucket}/in/s.1001.exr", f"{s3_bucket}/out/copy.1001.exr")
    source = Path(local.replace("####", "1001")).read_bytes()
    assert storage.read_bytes(f"{s3_bucket}/out/copy.1001.exr") == source
    assert size == len(source) and digest == hashlib.sha256(source).hexdigest()
    with storage.fetched(f"{s3_bucket}/out/s_recast.1002.exr", suffix=".exr") as path:
        pixels, attrs = _read(path)
    src, _ = _read(local.replace("####", "1002"))
    assert attrs["compression"] == "zip" and np.array_equal(pixels.view(np.uint16), src.view(np.uint16))
    assert not os.listdir(scratch)


def test_failed_write_leaves_destination_untouched_and_no_temp_file(tmp_path, monkeypatch):
    url = write_sequence(tmp_path / "src", "s", count=1)
    info, conv = _probe(url, "exr")
    frame = next(read_plates(info, 0, 1, conv))
    dest = tmp_path / "out" / "s.1001.exr"
    dest.parent.mkdir()
    dest.write_bytes(b"previous")
    with pytest.raises(MediaError, match="s.1001.exr: pixels"):
        write_plate(str(dest), frame.pixels[:10], frame.spec)

    def boom(src, url):
        raise OSError("disk gone")

    monkeypatch.setattr(storage, "publish_file", boom)
    with pytest.raises(OSError, match="disk gone"):
        write_plate(str(dest), frame.pixels, frame.spec)
    assert dest.read_bytes() == b"previous" and os.listdir(dest.parent) == ["s.1001.exr"]
    monkeypatch.undo()
    write_plate(str(dest), frame.pixels, frame.spec)
    assert os.listdir(dest.parent) == ["s.1001.exr"] and dest.read_bytes()[:4] == b"\x76\x2f\x31\x01"


def test_read_error_names_the_frame(tmp_path):
    url = write_sequence(tmp_path, "s", count=2)
    info, conv = _probe(url, "exr")
    broken = url.replace("####", "1002")
    Path(broken).write_bytes(Path(broken).read_bytes()[:-50])
    frames = read_plates(info, 0, 2, conv)
    assert next(frames).pts == 1001
    with pytest.raises(MediaError, match=r"s\.1002\.exr: truncated or corrupt"):
        next(frames)
