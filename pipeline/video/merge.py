"""Join encoded segments by stream copy into the final deliverable.

Nothing is re-encoded: video packets are copied with their timestamps rebased
from each segment's start to the source pts of that chunk's first frame, and
every source audio stream is copied once, whole (AAC pieces cannot be joined by
copy: each would start with its own priming).  The file is written locally (MP4
and MOV need a seekable output) and then published atomically, so a failed
merge leaves nothing at the destination.

With a ``window`` (a shot's ``frames:`` / ``handles:`` range) the segments hold
only source frames ``[a, b)`` and the output is that range alone, starting at
0, with its own timecode and the audio of the same span (see
:func:`merge_segments`).  MXF takes only PCM audio and a constant frame rate:
an AAC or VFR source to MXF is refused (no audio is dropped silently).

Colour: the output says what the segments' own ``colr`` box says (primaries,
transfer, matrix; unspecified without one) and the range their stream states,
never what a decoder fills in (:mod:`pipeline.video.colr`).
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import cast

import av

from pipeline.colour import ColourTags, mux_options
from pipeline.errors import MediaError, SpecError
from pipeline.store import storage
from pipeline.store.hashing import fetch_verified
from pipeline.video.colr import read_colr
from pipeline.video.probe import VideoInfo, open_container, video_stream
from pipeline.video.timecode import add_frames

log = logging.getLogger(__name__)

CONTAINERS = {".mp4": "mp4", ".mov": "mov", ".mkv": "matroska", ".mxf": "mxf"}


@dataclass(frozen=True)
class MergeStats:
    """What the merge wrote: video frames, bytes of the output file, wall seconds."""

    frames: int
    bytes: int
    seconds: float


def output_format(out_url: str) -> str:
    """The muxer for ``out_url``'s extension (.mp4, .mov, .mkv, .mxf)."""
    ext = os.path.splitext(out_url.split("?", 1)[0])[1].lower()
    if ext not in CONTAINERS:
        raise SpecError(
            "output", f"{out_url}: unsupported container {ext or '(none)'}; use .mp4, .mov, .mkv or .mxf"
        )
    return CONTAINERS[ext]


@dataclass(frozen=True)
class Delivery:
    """What a merge delivers for a window: source frames ``[first_frame, end_frame)``.

    ``timecode`` is the output's (the source's plus ``first_frame`` frames; None
    when the source has none); ``start_pts`` / ``end_pts`` bound the span in the
    source's time base (``end_pts``: the end of the last delivered frame).
    """

    first_frame: int
    end_frame: int
    timecode: str | None
    start_pts: int
    end_pts: int
    time_base: Fraction

    @property
    def frame_count(self) -> int:
        return self.end_frame - self.first_frame

    @property
    def duration_seconds(self) -> float:
        return float((self.end_pts - self.start_pts) * self.time_base)


def delivery(info: VideoInfo, window: tuple[int, int] | None = None) -> Delivery:
    """The frames, timecode and span that :func:`merge_segments` writes for ``window``.

    ``window`` None is the whole source, at its own timestamps and timecode.
    Raises SpecError for a window outside the source, or a source timecode that
    cannot be advanced (not ``HH:MM:SS:FF``, drop-frame at a non-NTSC rate).
    """
    if window is None:
        return Delivery(0, info.frame_count, info.timecode, info.pts[0], info.end_pts(), info.time_base)
    a, b = window
    if not 0 <= a < b <= info.frame_count:
        raise SpecError("window", f"frames [{a}, {b}) outside the source's 0-{info.frame_count}")
    timecode = None
    if info.timecode:
        try:
            timecode = add_frames(info.timecode, a, info.frame_rate)
        except ValueError as exc:
            raise SpecError("window", f"{info.url}: cannot offset timecode: {exc}") from None
    end_pts = info.pts[b] if b < info.frame_count else info.end_pts()
    return Delivery(a, b, timecode, info.pts[a], end_pts, info.time_base)


def _segment_pts(url: str, path: str) -> tuple[Fraction, list[int]]:
    """A segment's time base and its frames' pts in presentation order."""
    with open_container(path) as container:
        stream = video_stream(url, container)
        pts = sorted(p.pts for p in container.demux(stream) if p.pts is not None and p.size)
        return Fraction(stream.time_base.numerator, stream.time_base.denominator), pts


def merge_segments(
    segment_urls: Sequence[str],
    info: VideoInfo,
    out_url: str,
    *,
    audio_source_url: str | None,
    window: tuple[int, int] | None = None,
    segment_sha256: Sequence[str] | None = None,
) -> MergeStats:
    """Stream-copy ``segment_urls`` (in chunk order) plus the source audio into ``out_url``.

    Output timestamps equal the source's: segment ``i``'s frames get the source
    pts of frames ``[offset_i, offset_i + n_i)``.  Raises MediaError if the
    segments do not add up to the source's frames or their headers differ
    (they could not be played as one stream).

    ``window=(a, b)``: the segments hold exactly source frames ``[a, b)`` (index
    into ``info.pts``, ``b`` exclusive) and the output is that range: video
    timestamps minus ``pts[a]`` (the first frame at 0, the source's spacing kept,
    VFR too), timecode the source's plus ``a`` frames (:func:`delivery`), and each
    audio stream cut by packet copy to the packets overlapping the span
    ``[pts[a], end of frame b-1)``, shifted by the same ``pts[a]``.  The cut is
    at audio-packet granularity (1024 samples, about 21 ms, for 48 kHz AAC): the
    audio starts up to one packet before the first frame (at a negative time,
    which MP4/MOV trim with an edit list) and ends up to one packet after the
    last, and its first packet decodes without the preceding one (AAC's
    overlap), so its first few ms are not exact.

    ``segment_sha256``: each segment's recorded sha256.  The segments are then
    copied into a private folder while hashed, and only those copies are merged;
    one that differs raises ChecksumError naming it.
    """
    started = time.perf_counter()
    fmt = output_format(out_url)
    if not segment_urls:
        raise MediaError(out_url, "no segments to merge")
    span = delivery(info, window)
    if fmt == "mxf" and audio_source_url and any(not a.codec.startswith("pcm_") for a in info.audio):
        codecs = ", ".join(sorted({a.codec for a in info.audio}))
        raise MediaError(out_url, f"MXF holds only PCM audio, the source's is {codecs}; use .mov")
    if fmt == "mxf" and info.is_vfr:
        raise MediaError(out_url, "MXF needs a constant frame rate and this source is VFR; use .mov")
    # Without a window the source's own timestamps are kept (origin 0), byte for byte as before.
    origin = span.start_pts if window is not None else 0
    with contextlib.ExitStack() as stack:
        if segment_sha256 is None:
            paths = [
                stack.enter_context(storage.fetched(u, suffix=os.path.splitext(u)[1])) for u in segment_urls
            ]
        else:
            fetch_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="recast-segments-"))
            paths = [
                fetch_verified(u, os.path.join(fetch_dir, f"{i:05d}{os.path.splitext(u)[1]}"), sha)
                for i, (u, sha) in enumerate(zip(segment_urls, segment_sha256, strict=True))
            ]
        tmpdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="recast-merge-"))
        local_out = os.path.join(tmpdir, "out" + os.path.splitext(out_url)[1])

        # First pass: each segment's timestamps, to rebase exactly onto the source's.
        shifts: list[Fraction] = []
        offset = span.first_frame
        held_by = f"the source's {info.frame_count}" if window is None else f"the window {window}"
        for url, path in zip(segment_urls, paths, strict=True):
            seg_tb, seg_pts = _segment_pts(url, path)
            n = len(seg_pts)
            if not n or offset + n > span.end_frame:
                raise MediaError(url, f"segment has {n} frames; frames {offset}+ exceed {held_by}")
            shift = (info.pts[offset] - origin) * info.time_base - seg_pts[0] * seg_tb
            rebased = [p * seg_tb + shift for p in seg_pts]
            if rebased != [(p - origin) * info.time_base for p in info.pts[offset : offset + n]]:
                raise MediaError(
                    url, f"segment timestamps do not match source frames {offset}-{offset + n - 1}"
                )
            shifts.append(shift)
            offset += n
        if offset != span.end_frame:
            held = offset - span.first_frame
            if window is None:
                raise MediaError(out_url, f"segments hold {held} frames, the source has {info.frame_count}")
            raise MediaError(
                out_url, f"segments hold {held} frames, the window {window} has {span.frame_count}"
            )

        try:
            frames = _write(
                local_out,
                fmt,
                segment_urls,
                paths,
                shifts,
                info,
                audio_source_url=audio_source_url,
                span=span,
                window=window,
            )
        except (av.error.FFmpegError, OSError) as exc:
            raise MediaError(out_url, f"merge failed: {exc}") from exc
        size = os.path.getsize(local_out)
        storage.publish_file(local_out, out_url)
    seconds = time.perf_counter() - started
    log.info(
        "merged %d segments into %s: %d frames, %d bytes, %.2f s", len(paths), out_url, frames, size, seconds
    )
    return MergeStats(frames=frames, bytes=size, seconds=seconds)


def _write(
    local_out: str,
    fmt: str,
    segment_urls: Sequence[str],
    paths: Sequence[str],
    shifts: Sequence[Fraction],
    info: VideoInfo,
    *,
    audio_source_url: str | None,
    span: Delivery,
    window: tuple[int, int] | None,
) -> int:
    with contextlib.ExitStack() as stack:
        first = stack.enter_context(open_container(paths[0]))
        template = video_stream(segment_urls[0], first)
        colour = segment_colour(paths[0], template)
        out = stack.enter_context(av.open(local_out, mode="w", format=fmt, options=mux_options(fmt, colour)))
        extradata = template.codec_context.extradata
        out_video = out.add_stream_from_template(template)
        ctx = out_video.codec_context
        ctx.color_primaries, ctx.color_trc, ctx.colorspace, ctx.color_range = colour.codes()
        out_video.time_base = info.time_base
        if template.codec_context.name == "prores":
            # The fourcc is ProRes's profile (apch HQ, ap4h 4444, ap4x XQ); untold, MOV writes apch.
            out_video.codec_context.codec_tag = template.codec_context.codec_tag
        # The muxer derives the tmcd track's rate from the stream rate; a template has none.
        if info.frame_rate:
            out_video.codec_context.framerate = info.frame_rate
        if span.timecode:
            out_video.metadata["timecode"] = span.timecode
        audio_in: list[tuple[av.container.InputContainer, av.stream.Stream, av.stream.Stream]] = []
        if audio_source_url and info.audio:
            src = stack.enter_context(open_container(audio_source_url))
            wanted = {a.index for a in info.audio}
            for stream in src.streams:
                if stream.index not in wanted:
                    # The demuxer then skips the video's bytes instead of reading the whole
                    # source (on S3 that is the difference between ~1/10 and all of the file).
                    stream.discard = av.stream.Discard.all
            for a in info.audio:
                stream = src.streams[a.index]
                audio_in.append((src, stream, out.add_stream_from_template(stream)))

        def video_packets() -> Iterator[av.Packet]:
            for url, path, shift in zip(segment_urls, paths, shifts, strict=True):
                with open_container(path) as container:
                    stream = video_stream(url, container)
                    if stream.codec_context.extradata != extradata:
                        raise MediaError(
                            url, "codec headers differ from the first segment; cannot stream-copy"
                        )
                    seg_tb = cast(Fraction, stream.time_base)  # PyAV gives a Fraction
                    for packet in container.demux(stream):
                        if packet.size == 0 or packet.dts is None:
                            continue
                        packet.pts = _rebase(packet.pts, seg_tb, shift, info.time_base)
                        packet.dts = _rebase(packet.dts, seg_tb, shift, info.time_base)
                        packet.time_base = info.time_base
                        packet.stream = out_video
                        yield packet

        def audio_packets(
            container: av.container.InputContainer, stream: av.stream.Stream, out_stream: av.stream.Stream
        ) -> Iterator[av.Packet]:
            a_tb = cast(Fraction, stream.time_base)
            start, end = span.start_pts * info.time_base, span.end_pts * info.time_base
            shift = round(start / a_tb)
            for packet in container.demux(stream):
                if packet.size == 0 or packet.dts is None:
                    continue
                if window is not None:
                    begins = (packet.pts if packet.pts is not None else packet.dts) * a_tb
                    ends = begins + (packet.duration or 0) * a_tb
                    if begins >= end or (ends <= start and begins < start):
                        continue  # wholly outside the window's span
                    packet.pts = packet.pts - shift if packet.pts is not None else None
                    packet.dts -= shift
                packet.stream = out_stream
                yield packet

        # Audio streams share one input; demux them one at a time (seek between) and
        # interleave everything by decode time so the muxer never buffers much.
        sources: list[Iterator[av.Packet]] = [video_packets()]
        for src_container, stream, out_stream in audio_in:
            sources.append(_materialise(audio_packets(src_container, stream, out_stream)))
            src_container.seek(0)
        frames = 0
        for _, _, _, packet in heapq.merge(*(_keyed(i, s) for i, s in enumerate(sources))):
            if packet.stream is out_video:
                frames += 1
            out.mux(packet)
        return frames


def segment_colour(path: str, stream: av.VideoStream) -> ColourTags:
    """The tags a segment was written with: its ``colr`` box (none: unspecified) and its stream's range."""
    ctx = stream.codec_context
    box = read_colr(path) if path.endswith((".mov", ".mp4")) else None
    if box is None:
        return ColourTags.from_codes(2, 2, 2, ctx.color_range)
    colour_range = ctx.color_range if box.full_range is None else (2 if box.full_range else 1)
    return ColourTags.from_codes(box.primaries, box.transfer, box.matrix, colour_range)


def _materialise(packets: Iterator[av.Packet]) -> Iterator[av.Packet]:
    # Audio is small next to video; holding it lets several audio streams of one input interleave.
    return iter(list(packets))


def _keyed(order: int, packets: Iterator[av.Packet]) -> Iterator[tuple[Fraction, int, int, av.Packet]]:
    for seq, packet in enumerate(packets):
        # Only packets with a dts reach here (the demux loops skip the others).
        yield (packet.dts or 0) * packet.time_base, order, seq, packet


def _rebase(ts: int | None, seg_tb: Fraction, shift: Fraction, out_tb: Fraction) -> int | None:
    if ts is None:
        return None
    value = (ts * seg_tb + shift) / out_tb
    return value.numerator // value.denominator if value.denominator != 1 else value.numerator
