"""Segment encoding whose outputs join by stream copy.

Segments join without re-encoding only when their codec headers are identical,
so the encoder and all its options are chosen once per job
(:func:`choose_encoder`) and every :class:`SegmentWriter` uses that choice:
same size, pixel format, time base and options, closed GOP, IDR first frame.

Pixel format: the output keeps the source's bit depth (8 or 10 bit) and its
chroma subsampling where the codec allows it.  4:2:0 cannot represent odd
widths or heights, so an odd-sized source (which is itself 4:4:4 or 4:2:2) keeps
its subsampling; if the chosen pixel format cannot hold the size we raise
instead of silently cropping, padding or changing the chroma layout.
h264 of a 10-bit source uses libx264 High 10 (``yuv420p10le``); NVENC h264 has
no 10-bit mode, so a 10-bit h264 job uses libx264.  ProRes is 422 HQ
(``yuv422p10le``, profile 3), or 4444 (``yuv444p10le``) for 4:4:4 sources.

Finishing codecs: ``prores_4444`` / ``prores_4444xq`` (prores_ks profiles 4444
and 4444 XQ) are always 4:4:4 10-bit, ``yuva444p10le`` when the source has an
alpha component (``Frame.alpha`` is then written; a frame without one is
opaque), else ``yuv444p10le``.  ``dnxhr_hqx`` is FFmpeg's ``dnxhd`` encoder with
profile ``dnxhr_hqx`` in ``yuv422p10le`` (DNxHR needs at least 256x120 and an
even width).  All three take 8-bit sources too (stored at 10 bit), are
intra-only and write MOV segments; alpha is dropped by every other codec.

Colour (:mod:`pipeline.colour`): the encoder, every frame and the MOV/MP4
``colr`` box carry the tags of :attr:`EncoderChoice.colour` (the source's, or
``output.colour``'s, as the codec can say them), and RGB frames are converted
with that matrix and range (never swscale's silent BT.601).  ProRes keeps its
tags in each frame's header, so frames carry them as well as the encoder.
A segment in the source's own pixel format, matrix and range keeps the source's
YUV samples wherever the frame is unchanged (:mod:`pipeline.video.untouched`), so
pixels outside the faces are not rounded through RGB.
"""

from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass, field
from fractions import Fraction
from types import TracebackType
from typing import Literal, Self, cast

import av
import numpy as np
from av.video.codeccontext import VideoCodecContext
from av.video.reformatter import VideoReformatter
from av.video.stream import VideoStream
from pydantic import field_validator

from pipeline.colour import ColourTags, OutputColour, conversion, mux_options, output_tags, source_tags
from pipeline.configbase import Frozen
from pipeline.errors import MediaError, SpecError
from pipeline.video.chunking import Chunk
from pipeline.video.decode import DecodeConversion, Frame, has_alpha, rgb_format
from pipeline.video.pixfmt import PRORES_444, chroma_shift, pick_pix_fmt
from pipeline.video.probe import VideoInfo
from pipeline.video.untouched import keep_source_samples, keeps_samples, same_layout, unchanged_mask

log = logging.getLogger(__name__)

# fmt: off
X26X_PRESETS = (
    "ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow", "placebo",
)
# NVENC's own preset names for each x26x preset speed class.
_NVENC_PRESET = {
    "ultrafast": "p1", "superfast": "p1", "veryfast": "p2", "faster": "p3", "fast": "p3",
    "medium": "p4", "slow": "p5", "slower": "p6", "veryslow": "p7", "placebo": "p7",
}
# fmt: on
_DNXHR_MIN_SIZE = (256, 120)  # FFmpeg's dnxhd encoder refuses smaller DNxHR frames


class EncodeSettings(Frozen):
    """How segments are encoded.  ``quality`` is CRF-like: lower is better (0-51).

    For ProRes and DNxHR, ``quality`` and ``preset`` are ignored: their profiles fix the quality.
    ``colour``: tags to write instead of the source's (None: the source's).
    """

    codec: Literal["h264", "hevc", "prores", "prores_4444", "prores_4444xq", "dnxhr_hqx"] = "h264"
    quality: int = 18
    preset: str = "medium"
    hardware: bool = True
    colour: OutputColour | None = None

    @field_validator("quality")
    @classmethod
    def _quality(cls, value: int) -> int:
        return check_quality(value)

    @field_validator("preset")
    @classmethod
    def _preset(cls, value: str) -> str:
        return check_preset(value)


def check_quality(value: int) -> int:
    """``value`` when it is a quality the encoders take (0-51); ValueError saying why not."""
    if not 0 <= value <= 51:
        raise ValueError(f"quality {value} outside 0-51")
    return value


def check_preset(value: str) -> str:
    """``value`` when it is an x264/x265 preset name; ValueError naming the presets."""
    if value not in X26X_PRESETS:
        raise ValueError(f"preset {value!r} not one of {', '.join(X26X_PRESETS)}")
    return value


@dataclass(frozen=True)
class EncoderChoice:
    """The encoder and every option used for all segments of one job (``colour``: the tags they carry)."""

    name: str
    pix_fmt: str
    options: dict[str, str] = field(hash=False)
    hardware: bool
    container: str
    gop_size: int = 0
    colour: ColourTags | None = None


@functools.lru_cache(maxsize=64)
def can_open(name: str, pix_fmt: str, width: int = 256, height: int = 256) -> bool:
    """Whether encoder ``name`` opens on this machine (NVENC fails at once without a GPU)."""
    try:
        ctx = cast(VideoCodecContext, av.CodecContext.create(name, "w"))
        ctx.width, ctx.height, ctx.pix_fmt = width, height, pix_fmt
        ctx.time_base = Fraction(1, 25)
        ctx.framerate = Fraction(25)
        if name == "libx265":
            ctx.options = {"x265-params": "log-level=error"}  # x265 prints a banner on every open
        elif name == "dnxhd":
            ctx.options = {"profile": "dnxhr_hqx"}  # plain DNxHD opens only at its fixed sizes and rates
        ctx.open()
        return True
    except Exception as exc:  # noqa: BLE001 - any failure means "not available"
        log.debug("encoder %s/%s does not open: %s", name, pix_fmt, exc)
        return False


def _x26x_params(codec: str, gop: int) -> str:
    common = f"keyint={gop}:min-keyint={gop}:scenecut=0:open-gop=0"
    if codec == "hevc":
        # x265 defaults to open GOP and prints progress; neither suits joinable segments.
        return f"{common}:log-level=error:repeat-headers=0"
    return common


def choose_encoder(settings: EncodeSettings, info: VideoInfo) -> EncoderChoice:
    """Pick the encoder for a whole job: NVENC where it opens, else libx264/libx265; or prores_ks.

    Call once per job and hand the result to every SegmentWriter.
    """
    fps = float(info.frame_rate) if info.frame_rate else 25.0
    gop = max(1, round(fps * 2))  # 2 s GOPs: seekable output; segment starts are forced IDR
    candidates: list[tuple[str, bool]]
    if settings.codec == "prores" or settings.codec in PRORES_444:
        candidates = [("prores_ks", False)]
    elif settings.codec == "dnxhr_hqx":
        candidates = [("dnxhd", False)]
        if info.width < _DNXHR_MIN_SIZE[0] or info.height < _DNXHR_MIN_SIZE[1]:
            raise MediaError(
                info.url,
                f"{info.width}x{info.height} is too small for dnxhr_hqx "
                f"(DNxHR needs at least {_DNXHR_MIN_SIZE[0]}x{_DNXHR_MIN_SIZE[1]})",
            )
    elif settings.codec == "hevc":
        candidates = [("hevc_nvenc", True), ("libx265", False)]
    else:
        candidates = [("h264_nvenc", True), ("libx264", False)]
        if info.bit_depth > 8:
            candidates = [("libx264", False)]  # h264_nvenc has no 10-bit profile
    if not settings.hardware:
        candidates = [c for c in candidates if not c[1]]
    for name, hardware in candidates:
        pix_fmt = pick_pix_fmt(settings.codec, info, hardware)
        if pix_fmt is None:
            continue
        x, y = chroma_shift(pix_fmt)
        if info.width % (1 << x) or info.height % (1 << y):
            raise MediaError(
                info.url,
                f"{info.width}x{info.height} cannot be stored as {pix_fmt} "
                f"(chroma subsampling needs even {'width' if info.width % (1 << x) else 'height'})",
            )
        if not can_open(name, pix_fmt):
            continue
        if name == "prores_ks":
            profile = PRORES_444.get(settings.codec) or ("4" if pix_fmt == "yuv444p10le" else "3")
            options = {"profile": profile, "vendor": "apl0"}
            container = "mov"
        elif name == "dnxhd":
            options = {"profile": "dnxhr_hqx"}
            container = "mov"
        elif hardware:
            options = {
                "preset": _NVENC_PRESET[settings.preset],
                "rc": "vbr",
                "cq": str(settings.quality),
                "forced-idr": "1",
                "strict_gop": "1",
            }
            container = "mp4"
        else:
            key = "x265-params" if name == "libx265" else "x264-params"
            options = {
                "crf": str(settings.quality),
                "preset": settings.preset,
                key: _x26x_params(settings.codec, gop),
            }
            container = "mp4"
        choice = EncoderChoice(
            name=name,
            pix_fmt=pix_fmt,
            options=options,
            hardware=hardware,
            container=container,
            gop_size=gop,
            colour=output_tags(settings.codec, info, settings.colour),
        )
        log.info("encoder for %s: %s %s %s", info.url, name, pix_fmt, options)
        return choice
    raise SpecError("encode.codec", f"no {settings.codec} encoder opens on this machine")


class SegmentWriter:
    """Encode one chunk's frames to a local segment file (``path``).

    Timestamps in the segment are the source pts minus ``chunk.start_pts`` (so a
    segment starts at 0); :func:`pipeline.video.merge.merge_segments` rebases them back.
    ``threads``: encoder threads (0: the encoder's default, about one per core).
    """

    def __init__(
        self, path: str, info: VideoInfo, choice: EncoderChoice, chunk: Chunk, *, threads: int = 0
    ) -> None:
        self.path = path
        self.info = info
        self.choice = choice
        self.chunk = chunk
        self.frames_written = 0
        self._closed = False
        self._next_index = chunk.start_frame
        self.colour = choice.colour or source_tags(info)
        self._tags = self.colour.codes()
        self._matrix, self._range = conversion(self.colour, info.height, choice.pix_fmt)
        self._rgb_format = rgb_format(info)
        self._alpha = has_alpha(choice.pix_fmt)
        self._opaque: np.ndarray | None = None  # the alpha plane of frames that carry none
        self._reformatter = VideoReformatter()
        source = DecodeConversion(info)  # frames keep the source's samples where unchanged when it matches
        self._source = source if keeps_samples(source, choice.pix_fmt, self._matrix, self._range) else None
        os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
        try:
            self._container = av.open(
                path, mode="w", format=choice.container, options=mux_options(choice.container, self.colour)
            )
            tb = info.time_base
            stream = cast(
                VideoStream, self._container.add_stream(choice.name, rate=info.frame_rate or Fraction(25))
            )
            ctx = stream.codec_context
            ctx.width, ctx.height, ctx.pix_fmt = info.width, info.height, choice.pix_fmt
            ctx.time_base = tb
            stream.time_base = tb
            ctx.gop_size = choice.gop_size
            if threads:
                ctx.thread_count = threads
            ctx.options = dict(choice.options)
            ctx.color_primaries, ctx.color_trc, ctx.colorspace, ctx.color_range = self._tags
            if info.rotation:
                stream.set_display_rotation(info.rotation)
            self._stream = stream
        except (av.error.FFmpegError, OSError, ValueError) as exc:
            raise MediaError(path, f"cannot start segment with {choice.name}: {exc}") from exc

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def write(self, frame: Frame) -> None:
        """Encode one frame; frames must arrive in order, covering the chunk exactly."""
        if frame.index != self._next_index or frame.index >= self.chunk.end_frame:
            raise MediaError(self.path, f"frame {frame.index} out of order (expected {self._next_index})")
        rgb = frame.rgb
        expected_dtype = np.uint8 if self._rgb_format == "rgb24" else np.uint16
        if rgb.shape != (self.info.height, self.info.width, 3) or rgb.dtype != expected_dtype:
            raise MediaError(
                self.path,
                f"frame {frame.index}: got {rgb.shape} {rgb.dtype}, expected "
                f"{(self.info.height, self.info.width, 3)} {np.dtype(expected_dtype)}",
            )
        # Wrap the array without copying (from_ndarray costs ~10 ms per 1080p frame, ~90 ms at 16 bit);
        # the reformat below produces a new YUV frame, so the wrapper never outlives this call.
        if self._alpha:
            src = av.VideoFrame.from_numpy_buffer(self._with_alpha(frame), format=self._rgba_format())
        else:
            src = av.VideoFrame.from_numpy_buffer(np.ascontiguousarray(rgb), format=self._rgb_format)
        yuv = self._reformatter.reformat(
            src,
            format=self.choice.pix_fmt,
            src_colorspace=self._matrix,
            dst_colorspace=self._matrix,
            src_color_range="JPEG",
            dst_color_range=self._range,
        )
        source = frame.yuv
        if (
            self._source is not None
            and source is not None
            and same_layout(source.format.name, yuv.format.name)
        ):
            keep_source_samples(yuv, source, unchanged_mask(rgb, source, self._source))
        # ProRes writes each frame's own tags into its header (the reformat leaves them unspecified).
        yuv.color_primaries, yuv.color_trc, yuv.colorspace, yuv.color_range = self._tags
        yuv.pts = frame.pts - self.chunk.start_pts
        yuv.time_base = self.info.time_base
        self._mux(self._stream.encode(yuv))
        self._next_index += 1
        self.frames_written += 1

    def _rgba_format(self) -> str:
        return "rgba" if self._rgb_format == "rgb24" else "rgba64le"

    def _with_alpha(self, frame: Frame) -> np.ndarray:
        """``frame``'s RGB with its alpha (opaque when it has none) as one RGBA array."""
        alpha = frame.alpha
        if alpha is None:
            if self._opaque is None:
                top = np.iinfo(frame.rgb.dtype).max
                self._opaque = np.full((self.info.height, self.info.width), top, dtype=frame.rgb.dtype)
            alpha = self._opaque
        if alpha.shape != frame.rgb.shape[:2] or alpha.dtype != frame.rgb.dtype:
            raise MediaError(
                self.path,
                f"frame {frame.index}: alpha {alpha.shape} {alpha.dtype} does not match "
                f"rgb {frame.rgb.shape[:2]} {frame.rgb.dtype}",
            )
        return np.dstack((frame.rgb, alpha))

    def _mux(self, packets: list[av.Packet]) -> None:
        try:
            self._container.mux(packets)
        except (av.error.FFmpegError, OSError) as exc:
            raise MediaError(self.path, f"writing segment failed: {exc}") from exc

    def close(self) -> None:
        """Flush the encoder and finish the file; the chunk must be complete."""
        if self._closed:
            return
        if self._next_index != self.chunk.end_frame:
            self.abort()
            raise MediaError(
                self.path,
                f"segment incomplete: got frames {self.chunk.start_frame}-{self._next_index - 1}, "
                f"chunk ends at {self.chunk.end_frame}",
            )
        try:
            self._mux(self._stream.encode(None))
        finally:
            self._closed = True
            self._container.close()

    def abort(self) -> None:
        """Stop without finishing; the partial file is removed."""
        if self._closed:
            return
        self._closed = True
        try:
            self._container.close()
        except Exception as exc:  # noqa: BLE001 - the file is being discarded anyway
            log.debug("closing aborted segment %s: %s", self.path, exc)
        if os.path.exists(self.path):
            os.remove(self.path)
