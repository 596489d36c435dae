"""Every clip the tests write: one writer, the frame-index picture, and the named clips they share.

:func:`write_clip` writes any test clip: size, rate, frame count, codec, pixel
format, colour tags, GOP, timecode, rotation, audio, and the pictures (a
callback, a list of frames, or by default the frame-index picture).  The
frame-index picture carries its index as a 12-bit code of big black/white
blocks in the top half (robust to lossy encoding, read back by
:func:`read_index`), and the bottom half holds fixed saturated colour patches,
so a wrong YUV matrix or range shows up as a colour error.  Audio is a 440 Hz
tone as long as the video.  :func:`write_audio` writes an audio-only file.

The session-wide ``clips`` fixture (``tests/pipeline/video/conftest.py``) writes the named clips.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import BinaryIO

import av
import numpy as np

from jobs.demo_media import mux_mono_audio
from pipeline.video.probe import VideoInfo

BITS = 12
COLS, ROWS = 6, 2  # 12 blocks in the top half
PATCHES = np.array(
    [[200, 40, 40], [40, 180, 60], [50, 60, 210], [220, 200, 40], [128, 128, 128], [30, 200, 200]],
    dtype=np.float64,
)


@dataclass(frozen=True)
class ClipSpec:
    """What to write.  ``durations`` (in ``time_base`` units) makes a VFR clip.

    ``gop`` None leaves GOP and B-frames to the encoder (no ``x264-params`` /
    ``x265-params``).  ``tag_colour`` False writes no colour tags and hands RGB
    frames to the encoder, which converts them with FFmpeg's defaults.
    """

    width: int = 160
    height: int = 120
    frames: int = 75
    rate: Fraction | int = Fraction(25)
    codec: str = "libx264"
    pix_fmt: str = "yuv420p"
    gop: int | None = 12
    bframes: int = 2
    open_gop: bool = False
    durations: tuple[int, ...] = ()
    time_base: Fraction | None = None
    rotation: int = 0
    timecode: str | None = "01:00:00:00"
    audio: bool = True
    tag_colour: bool = True
    color_primaries: int = 1  # bt709
    color_trc: int = 1
    colorspace: int = 1
    color_range: int = 1  # tv
    options: dict[str, str] = field(default_factory=dict, hash=False)


Content = Callable[[int], np.ndarray]
"""The RGB (or RGBA, for a ``yuva*`` ``pix_fmt``) picture of frame ``i`` (uint8, or uint16 for 10 bit)."""


def frame_rgb(index: int, width: int, height: int, depth: int = 8) -> np.ndarray:
    """The RGB picture of frame ``index`` (uint8, or uint16 full-scale when depth > 8)."""
    img = np.zeros((height, width, 3), dtype=np.float64)
    top = height // 2
    bw, bh = width // COLS, top // ROWS
    for bit in range(BITS):
        r, c = divmod(bit, COLS)
        value = 235.0 if (index >> bit) & 1 else 20.0
        img[r * bh : (r + 1) * bh, c * bw : (c + 1) * bw] = value
    pw = width // len(PATCHES)
    for i, colour in enumerate(PATCHES):
        x1 = width if i == len(PATCHES) - 1 else (i + 1) * pw
        img[top:, i * pw : x1] = colour
    if depth > 8:
        return np.round(img * 257).astype(np.uint16)
    return np.round(img).astype(np.uint8)


def read_index(rgb: np.ndarray) -> int:
    """Decode the frame index drawn by :func:`frame_rgb` (works after lossy encoding)."""
    height, width = rgb.shape[:2]
    scale = 257.0 if rgb.dtype == np.uint16 else 1.0
    top = height // 2
    bw, bh = width // COLS, top // ROWS
    value = 0
    for bit in range(BITS):
        r, c = divmod(bit, COLS)
        block = rgb[r * bh + bh // 4 : (r + 1) * bh - bh // 4, c * bw + bw // 4 : (c + 1) * bw - bw // 4]
        if block.mean() / scale > 128:
            value |= 1 << bit
    return value


def decoded_indices(url: str) -> list[int]:
    """The frame-index picture's index of every frame decoded from ``url``, in order."""
    with av.open(url) as container:
        return [read_index(f.to_ndarray(format="rgb24")) for f in container.decode(video=0)]


def patch_means(rgb: np.ndarray) -> np.ndarray:
    """Mean RGB of each colour patch's interior (8-bit scale), shape (patches, 3)."""
    height, width = rgb.shape[:2]
    scale = 257.0 if rgb.dtype == np.uint16 else 1.0
    top = height // 2
    pw = width // len(PATCHES)
    out = []
    for i in range(len(PATCHES)):
        x0, x1 = i * pw + pw // 4, (i + 1) * pw - pw // 4
        y0, y1 = top + (height - top) // 4, height - (height - top) // 4
        out.append(rgb[y0:y1, x0:x1].reshape(-1, 3).mean(axis=0) / scale)
    return np.array(out)


def _matrix(colorspace: int) -> str:
    return {1: "ITU709", 5: "ITU601", 6: "ITU601", 9: "BT2020"}.get(colorspace, "ITU601")


def write_clip(
    dest: str | Path | BinaryIO,
    spec: ClipSpec,
    content: Content | Sequence[np.ndarray] | None = None,
    *,
    container_format: str | None = None,
    pts: Sequence[int] | None = None,
) -> str:
    """Write ``spec.frames`` frames of ``content`` (default: the frame-index picture) to ``dest``.

    ``dest`` is a local path (container from its extension, or ``container_format``)
    or a writable binary buffer.  ``pts`` (in the stream's time base) overrides the
    times that ``rate`` or ``durations`` give.  Returns the path as a string ("" for a buffer).
    """
    depth = 10 if "10" in spec.pix_fmt else 8
    if content is None:
        picture: Content = lambda i: frame_rgb(i, spec.width, spec.height, depth)
    elif callable(content):
        picture = content
    else:
        frames = content
        picture = frames.__getitem__
    target = str(dest) if isinstance(dest, str | Path) else dest
    with av.open(target, mode="w", format=container_format) as out:
        stream = out.add_stream(spec.codec, rate=spec.rate)
        assert isinstance(stream, av.VideoStream), spec.codec
        ctx = stream.codec_context
        ctx.width, ctx.height, ctx.pix_fmt = spec.width, spec.height, spec.pix_fmt
        if spec.time_base is not None:
            tb = spec.time_base
        else:
            tb = Fraction(1, 90000) if spec.durations else 1 / Fraction(spec.rate)
        ctx.time_base = tb
        stream.time_base = tb
        ctx.options = _encoder_options(spec)
        if spec.tag_colour:
            ctx.color_primaries, ctx.color_trc = spec.color_primaries, spec.color_trc
            ctx.colorspace, ctx.color_range = spec.colorspace, spec.color_range
        if spec.rotation:
            stream.set_display_rotation(spec.rotation)
        if spec.timecode:
            stream.metadata["timecode"] = spec.timecode
        audio = out.add_stream("aac", rate=48000) if spec.audio else None
        if audio is not None:
            audio.layout = "mono"
        time = 0
        for i in range(spec.frames):
            frame = _video_frame(picture(i), spec)
            frame.pts = pts[i] if pts is not None else time
            frame.time_base = tb
            out.mux(stream.encode(frame))
            time += spec.durations[i % len(spec.durations)] if spec.durations else round(1 / (spec.rate * tb))
        out.mux(stream.encode(None))
        if audio is not None:
            mux_mono_audio(out, audio, tone(float(time * tb)))
    return str(dest) if isinstance(dest, str | Path) else ""


def write_audio(path: str | Path, samples: np.ndarray) -> str:
    """Write mono float samples at 48 kHz as AAC, with no video stream (container from the extension)."""
    with av.open(str(path), mode="w") as out:
        audio = out.add_stream("aac", rate=48000)
        audio.layout = "mono"
        mux_mono_audio(out, audio, samples)
    return str(path)


def tone(seconds: float, hz: float = 440.0, amplitude: float = 0.3) -> np.ndarray:
    """A sine tone at 48 kHz, mono float32."""
    t = np.arange(round(seconds * 48000)) / 48000.0
    return (amplitude * np.sin(2 * math.pi * hz * t)).astype(np.float32)


def _encoder_options(spec: ClipSpec) -> dict[str, str]:
    options = dict(spec.options)
    if spec.gop is None:
        return options
    if spec.codec == "libx264":
        params = f"keyint={spec.gop}:min-keyint={spec.gop}:scenecut=0:bframes={spec.bframes}"
        params += ":open-gop=1" if spec.open_gop else ""
        options.setdefault("x264-params", params)
        options.setdefault("preset", "veryfast")
        options.setdefault("crf", "16")
    elif spec.codec == "libx265":
        params = f"keyint={spec.gop}:min-keyint={spec.gop}:scenecut=0:bframes={spec.bframes}:log-level=error"
        params += ":open-gop=1" if spec.open_gop else ":open-gop=0"
        options.setdefault("x265-params", params)
        options.setdefault("preset", "ultrafast")
        options.setdefault("crf", "16")
    return options


def _video_frame(rgb: np.ndarray, spec: ClipSpec) -> av.VideoFrame:
    # A picture with a fourth channel is RGBA: its alpha goes to an alpha-carrying pix_fmt.
    if rgb.shape[2] == 4:
        fmt = "rgba64le" if rgb.dtype == np.uint16 else "rgba"
    else:
        fmt = "rgb48le" if rgb.dtype == np.uint16 else "rgb24"
    frame = av.VideoFrame.from_ndarray(rgb, format=fmt)
    if not spec.tag_colour:
        return frame
    matrix = _matrix(spec.colorspace)
    return frame.reformat(
        format=spec.pix_fmt,
        src_colorspace=matrix,
        dst_colorspace=matrix,
        src_color_range="JPEG",
        dst_color_range="JPEG" if spec.color_range == 2 else "MPEG",
    )


# Named clips the video tests share; each is small enough to round-trip in about a second.
CLIPS: dict[str, tuple[str, ClipSpec]] = {
    "cfr_bframes": ("mp4", ClipSpec()),
    "open_gop": ("mp4", ClipSpec(open_gop=True, bframes=3)),
    "vfr": ("mp4", ClipSpec(frames=60, durations=(3000, 4500, 3000, 6000), time_base=Fraction(1, 90000))),
    "ten_bit_hevc": ("mp4", ClipSpec(codec="libx265", pix_fmt="yuv420p10le", frames=50)),
    "ten_bit_prores": (
        "mov",
        ClipSpec(codec="prores_ks", pix_fmt="yuv422p10le", frames=40, bframes=0, options={"profile": "3"}),
    ),
    "odd_size": ("mp4", ClipSpec(width=321, height=241, pix_fmt="yuv444p", frames=50)),
    "rotated": ("mp4", ClipSpec(rotation=90, frames=50)),
    "no_audio": ("mkv", ClipSpec(audio=False, frames=50, timecode=None)),
    "one_frame": ("mp4", ClipSpec(frames=1)),
    # Colour handling beyond BT.709 limited range: a wrong matrix or range shifts the patches.
    "bt601_full_range": (
        "mp4",
        ClipSpec(frames=40, color_primaries=6, color_trc=6, colorspace=6, color_range=2),
    ),
    "untagged": ("mp4", ClipSpec(frames=40, color_primaries=2, color_trc=2, colorspace=2, color_range=0)),
}


class ClipCache:
    """Generates each named clip once into ``root`` (files on disk are the cache)."""

    def __init__(self, root: str) -> None:
        self.root = root

    def path(self, name: str) -> str:
        ext, spec = CLIPS[name]
        path = os.path.join(self.root, f"{name}.{ext}")
        if not os.path.exists(path):
            tmp = path + ".part." + ext
            write_clip(tmp, spec)
            os.replace(tmp, path)
        return path


def render_identity(info, choice, plan, workdir: str, decode_url: str | None = None) -> list[str]:
    """Decode every chunk and re-encode it unchanged into segment files; returns their paths."""
    from pipeline.video.decode import decode_range
    from pipeline.video.encode import SegmentWriter

    paths = []
    for chunk in plan.chunks:
        path = os.path.join(workdir, f"seg-{chunk.index:05d}.{choice.container}")
        with SegmentWriter(path, info, choice, chunk) as writer:
            for frame in decode_range(decode_url or info.url, info, chunk.start_frame, chunk.end_frame):
                writer.write(frame)
        paths.append(path)
    return paths


def with_timecode(src: str, dst: str, timecode: str) -> str:
    """``src``'s packets remuxed into ``dst`` with the video's timecode set to ``timecode``: same packets,
    same size, other bytes (two x264 encodes of the same frames can differ in size on a loaded machine)."""
    with av.open(src) as inp, av.open(dst, "w") as out:
        streams = {}
        for stream in inp.streams:
            if stream.type in ("video", "audio"):
                copy = out.add_stream_from_template(stream)
                if stream.type == "video":
                    copy.time_base = stream.time_base
                    copy.codec_context.framerate = stream.average_rate  # the timecode track needs it
                    copy.metadata["timecode"] = timecode
                streams[stream.index] = copy
        for packet in inp.demux(*[s for s in inp.streams if s.index in streams]):
            if packet.dts is not None:
                packet.stream = streams[packet.stream.index]
                out.mux(packet)
    return dst


def info_from_timestamps(pts: list[int], keyframes: list[int], tb: Fraction = Fraction(1, 1000)) -> VideoInfo:
    """The ``VideoInfo`` of a 16x16 H.264 clip that exists only as its timestamps and keyframes."""
    return VideoInfo(
        url="mem",
        codec="h264",
        width=16,
        height=16,
        pix_fmt="yuv420p",
        bit_depth=8,
        time_base=tb,
        frame_rate=Fraction(25),
        is_vfr=False,
        frame_count=len(pts),
        pts=tuple(pts),
        keyframes=tuple(keyframes),
        duration_seconds=0.0,
        color_primaries=None,
        color_trc=None,
        colorspace=None,
        color_range=None,
        rotation=0,
        timecode=None,
        audio=(),
    )
