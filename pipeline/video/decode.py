"""Frame-exact range decoding.

Frames ``[a, b)`` are addressed by index into ``VideoInfo.pts``.  We seek to the
keyframe at or before ``a`` and discard until ``pts[a]``; on open-GOP sources a
seek can land after the target (leading B-frames of a non-IDR I-frame are
dropped), so we re-seek one keyframe earlier until the target is covered.

Layout: ``Frame.rgb`` is ``H x W x 3`` RGB, ``uint8`` for 8-bit sources and
``uint16`` spanning the full 16-bit scale (``rgb48``) for deeper sources.  YUV is
converted with the source's own matrix and range (``pipeline.colour``).
Sources whose pixel format has an alpha component (ProRes 4444 ``yuva444p*``,
``rgba``...) also fill ``Frame.alpha`` (``H x W``, same dtype and scale as
``rgb``: 255 or 65535 is opaque); for every other source it stays None.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

import av
import numpy as np
from av.video.reformatter import VideoReformatter

from pipeline.colour import sws_matrix, sws_range
from pipeline.errors import MediaError
from pipeline.video.probe import VideoInfo, open_container, video_stream

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class Frame:
    """One decoded source frame: its index in the source, its source pts, its pixels.

    ``alpha``: the source's alpha plane (``H x W``, dtype and scale of ``rgb``), or
    None when the source has no alpha.
    """

    index: int
    pts: int
    rgb: np.ndarray
    alpha: np.ndarray | None = None
    yuv: av.VideoFrame | None = field(default=None, repr=False)
    """The decoded picture ``rgb`` came from (video sources without alpha), so a writer in the
    source's own pixel format can keep its samples where ``rgb`` is unchanged
    (:mod:`pipeline.video.untouched`).  It stays in its process: a pickled frame drops it."""

    def __getstate__(self) -> dict[str, object]:
        return {**self.__dict__, "yuv": None}


class DecodeConversion:
    """How a source's decoded YUV pictures become the RGB of :class:`Frame` (one per decoder or writer:
    it holds a swscale context)."""

    def __init__(self, info: VideoInfo) -> None:
        self.pix_fmt = info.pix_fmt
        self.matrix = sws_matrix(info.colorspace, info.height)
        self.colour_range = sws_range(info.color_range, info.pix_fmt)
        self.alpha = has_alpha(info.pix_fmt)
        fmt = rgb_format(info)
        if self.alpha:
            fmt = "rgba" if fmt == "rgb24" else "rgba64le"
        self.format = fmt
        self._reformatter = VideoReformatter()

    def to_rgb(self, frame: av.VideoFrame) -> np.ndarray:
        """``frame``'s pixels as full-range RGB (RGBA with alpha), 8 or 16 bit."""
        return self._reformatter.reformat(
            frame,
            format=self.format,
            src_colorspace=self.matrix,
            src_color_range=self.colour_range,
            dst_color_range="JPEG",
        ).to_ndarray()


def rgb_format(info: VideoInfo) -> str:
    """The RGB layout frames of this source decode to (``rgb24`` or ``rgb48le``)."""
    return "rgb24" if info.bit_depth <= 8 else "rgb48le"


def has_alpha(pix_fmt: str) -> bool:
    """Whether the pixel format ``pix_fmt`` carries an alpha component."""
    return any(c.is_alpha for c in av.VideoFormat(pix_fmt).components)


def decode_range(url: str, info: VideoInfo, start: int, end: int, *, threads: int = 0) -> Iterator[Frame]:
    """Yield exactly frames ``[start, end)`` of the source, in order.

    ``threads``: decoder threads (0: FFmpeg's default, one per core).

    Raises MediaError naming ``url`` if the source cannot deliver them (truncated
    or corrupt: the message says how many frames were decodable).
    """
    if not (0 <= start < end <= info.frame_count):
        raise MediaError(url, f"frame range [{start}, {end}) outside 0-{info.frame_count}")
    want = info.pts[start:end]
    stop_pts = info.pts[end] if end < info.frame_count else None
    conversion = DecodeConversion(info)
    # Index into info.keyframes of the keyframe at or before `start`.
    k = bisect.bisect_right(info.keyframes, start) - 1
    with open_container(url) as container:
        stream = video_stream(url, container)
        stream.thread_type = "AUTO"
        if threads:
            stream.codec_context.thread_count = threads
        for other in container.streams:
            if other.index != stream.index:
                other.discard = av.stream.Discard.all  # never read audio/data bytes
        while True:
            seek_pts = info.pts[info.keyframes[k]] if k >= 0 else None
            frames = _decode_from(url, container, stream, seek_pts)
            first = next(frames, None)
            if first is None:
                raise MediaError(url, f"truncated or corrupt: no frame decodable after frame {start}")
            if first.pts is not None and first.pts > want[0]:
                if k < 0:
                    raise MediaError(url, f"frame {start} (pts {want[0]}) cannot be decoded")
                log.debug("%s: seek landed at pts %s after %s; seeking earlier", url, first.pts, want[0])
                k -= 1
                continue
            break
        produced = 0
        for frame in _chain(first, frames):
            if frame.pts is None:
                raise MediaError(url, "decoded frame has no timestamp")
            if frame.pts < want[0]:
                continue
            if stop_pts is not None and frame.pts >= stop_pts:
                break
            if produced >= len(want) or frame.pts != want[produced]:
                expected = want[produced] if produced < len(want) else "none"
                raise MediaError(
                    url, f"frame {start + produced}: decoded pts {frame.pts}, index says {expected}"
                )
            pixels = conversion.to_rgb(frame)
            if conversion.alpha:
                yield Frame(
                    index=start + produced,
                    pts=frame.pts,
                    rgb=np.ascontiguousarray(pixels[..., :3]),
                    alpha=np.ascontiguousarray(pixels[..., 3]),
                )
            else:
                yield Frame(index=start + produced, pts=frame.pts, rgb=pixels, yuv=frame)
            produced += 1
            if produced == len(want):
                break
        check_decoded(url, info, start, produced=produced, wanted=len(want))


def check_decoded(url: str, info: VideoInfo, start: int, *, produced: int, wanted: int) -> None:
    """MediaError naming ``url`` when a range from frame ``start`` gave ``produced`` frames of the
    ``wanted``: the source is truncated or corrupt (the message says how many frames were decodable).
    The end of :func:`decode_range` and :func:`~pipeline.video.nvdec.nvdec_range` alike."""
    if produced < wanted:
        raise MediaError(
            url,
            f"truncated or corrupt: only {start + produced} of {info.frame_count} frames are decodable",
        )


def _chain(first: av.VideoFrame, rest: Iterator[av.VideoFrame]) -> Iterator[av.VideoFrame]:
    yield first
    yield from rest


def _decode_from(
    url: str, container: av.container.InputContainer, stream: av.VideoStream, seek_pts: int | None
) -> Iterator[av.VideoFrame]:
    """Decoded frames from the keyframe at or before ``seek_pts`` (the start if None)."""
    try:
        container.seek(seek_pts if seek_pts is not None else 0, stream=stream, backward=True)
        stream.codec_context.flush_buffers()
        for packet in container.demux(stream):
            yield from packet.decode()
    except (av.error.FFmpegError, OSError) as exc:
        log.warning("%s: decode stopped: %s", url, exc)
        return
