"""The NVDEC path: its frames equal PyAV's (count, pts, colour).

On any machine: the part after the hardware decoder (NV12/P016 surface -> planes ->
the swscale conversion) is fed the surfaces libavcodec's own YUV makes, and must
give decode_range's frames byte for byte.  On a GPU with PyNvVideoCodec: NVDEC
itself, on generated 1080p H.264 and 10-bit HEVC clips (skipped, saying why, when
either is missing; ``--require-gpu`` turns a missing GPU into a failure).
"""

from __future__ import annotations

from fractions import Fraction

import av
import numpy as np
import pytest
import torch

from pipeline.video.decode import decode_range
from pipeline.video.decoders import nvdec_runtime_problem
from pipeline.video.nvdec import RgbConverter, annexb_packets, frame_tags, planes_from_surface
from pipeline.video.probe import probe
from tests.clips import ClipSpec, write_clip


def _planes(frame: av.VideoFrame) -> list[np.ndarray]:
    """Y, U, V of a planar 4:2:0 frame as libavcodec decoded it."""
    dtype = np.uint16 if "10" in frame.format.name else np.uint8
    out = []
    for plane in frame.planes:
        rows = np.frombuffer(memoryview(plane), dtype=dtype).reshape(plane.height, -1)
        out.append(rows[:, : plane.width].copy())
    return out


def _surface(planes: list[np.ndarray], deep: bool) -> torch.Tensor:
    """The NV12 / P016 surface NVDEC returns for these planes (P016: the value in the high bits)."""
    y, u, v = planes
    uv = np.stack([u, v], axis=-1).reshape(u.shape[0], -1)
    stacked = np.concatenate([y, uv])
    if deep:
        return torch.from_numpy((stacked.astype(np.uint16) << 6).view(np.int16))
    return torch.from_numpy(stacked)


@pytest.mark.parametrize("name", ["cfr_bframes", "ten_bit_hevc", "bt601_full_range", "untagged"])
def test_surface_to_frame_equals_decode_range(clips, name: str) -> None:
    info = probe(clips.path(name))
    deep = info.bit_depth > 8
    want = list(decode_range(info.url, info, 0, 12))
    with av.open(info.url) as container:
        decoded = [f for _, f in zip(range(12), container.decode(video=0), strict=False)]
    convert = RgbConverter(info, frame_tags(decoded[0]))
    for frame, expected in zip(decoded, want, strict=True):
        planes = planes_from_surface(_surface(_planes(frame), deep), info.height, info.width, info.bit_depth)
        assert [p.dtype for p in planes] == [np.uint16 if deep else np.uint8] * 3
        rgb, _ = convert(planes, frame.pts)
        assert rgb.dtype == expected.rgb.dtype and np.array_equal(rgb, expected.rgb)


def test_p016_as_byte_pairs_and_a_padded_surface(clips) -> None:
    info = probe(clips.path("ten_bit_hevc"))
    with av.open(info.url) as container:
        frame = next(container.decode(video=0))
    planes = _planes(frame)
    surface = _surface(planes, deep=True)
    padded = torch.zeros((surface.shape[0] + 8, surface.shape[1] + 32), dtype=torch.int16)
    padded[: info.height, : info.width] = surface[: info.height]
    padded[info.height : info.height + info.height // 2, : info.width] = surface[info.height :]
    for view in (surface.view(torch.uint8), padded):
        got = planes_from_surface(view, info.height, info.width, 10)
        assert all(np.array_equal(a, b) for a, b in zip(got, planes, strict=True))
    with pytest.raises(ValueError, match="does not hold a"):
        planes_from_surface(surface[:-1], info.height, info.width, 10)


def _clip(tmp_path, name: str, spec: ClipSpec) -> str:
    return write_clip(str(tmp_path / name), spec)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name,spec",
    [
        ("h264_1080p.mp4", ClipSpec(width=1920, height=1080, frames=60, gop=24, rate=Fraction(24))),
        (
            "hevc10_1080p.mp4",
            ClipSpec(width=1920, height=1080, frames=36, codec="libx265", pix_fmt="yuv420p10le", gop=12),
        ),
    ],
)
def test_nvdec_frames_equal_pyav(tmp_path, name: str, spec: ClipSpec) -> None:
    problem = nvdec_runtime_problem()
    if problem is not None:
        pytest.skip(f"NVDEC unavailable: {problem}")
    from pipeline.video.nvdec import nvdec_range

    info = probe(_clip(tmp_path, name, spec))
    middle = info.keyframes[1] + 1 if len(info.keyframes) > 1 else 1
    for start, end in ((0, info.frame_count), (middle, min(middle + 9, info.frame_count))):
        want = list(decode_range(info.url, info, start, end))
        got = list(nvdec_range(info.url, info, start, end))
        assert [(f.index, f.pts) for f in got] == [(f.index, f.pts) for f in want]
        worst = max(
            int(np.abs(a.rgb.astype(np.int32) - b.rgb.astype(np.int32)).max()) for a, b in zip(got, want)
        )
        # within one code value of the output (8-bit, or 16-bit rgb48); the same swscale call makes it 0
        assert worst <= 1, f"{name} [{start}, {end}): colour differs by {worst} code values"


@pytest.mark.parametrize("name", ["cfr_bframes", "ten_bit_hevc", "open_gop", "no_audio"])
def test_annexb_packets_decode_alone_to_the_same_frames(clips, name: str) -> None:
    """What NVDEC is fed: start-code packets that a decoder without the container's extradata
    decodes, from a keyframe in the middle, to decode_range's frames (pts and pixels)."""
    info = probe(clips.path(name))
    key = info.keyframes[1]
    fresh = av.CodecContext.create(info.codec, "r")  # no extradata: everything must be in the packets
    with av.open(info.url) as container:
        stream = container.streams.video[0]
        packets = list(annexb_packets(container, stream, info.pts[key], info.codec))
        assert all(bytes(p)[:4] == b"\0\0\0\1" or bytes(p)[:3] == b"\0\0\1" for p in packets)
        decoded = [f for p in packets for f in fresh.decode(p)] + list(fresh.decode(None))
    assert [f.pts for f in decoded] == list(info.pts[key:])
    convert = RgbConverter(info, frame_tags(decoded[0]))
    want = list(decode_range(info.url, info, key, info.frame_count))
    for frame, expected in zip(decoded, want, strict=True):
        assert np.array_equal(convert(_planes(frame), frame.pts)[0], expected.rgb)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name", ["cfr_bframes", "open_gop", "vfr", "ten_bit_hevc", "no_audio", "bt601_full_range"]
)
def test_nvdec_windows_around_keyframes_equal_pyav(clips, name: str) -> None:
    """decode_range's own exactness test, through NVDEC: every window starting around a keyframe."""
    problem = nvdec_runtime_problem()
    if problem is not None:
        pytest.skip(f"NVDEC unavailable: {problem}")
    from pipeline.video.nvdec import nvdec_range

    info = probe(clips.path(name))
    starts = sorted({s for k in info.keyframes for s in (k - 1, k, k + 1) if 0 <= s < info.frame_count - 1})
    for start in starts:
        end = min(start + 4, info.frame_count)
        got = list(nvdec_range(info.url, info, start, end))
        want = list(decode_range(info.url, info, start, end))
        assert [(f.index, f.pts) for f in got] == [(f.index, f.pts) for f in want], (name, start)
        worst = max(
            int(np.abs(a.rgb.astype(np.int32) - b.rgb.astype(np.int32)).max()) for a, b in zip(got, want)
        )
        assert worst <= 1, (name, start, worst)  # within one code value (the same swscale call: 0)
