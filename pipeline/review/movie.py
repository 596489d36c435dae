"""Review movies: H.264, Rec.709, 8-bit 4:2:0, written frame by frame with the pipeline's encoder.

:func:`review_encoding` describes a review segment (the source's timestamps, the review's size)
and picks software x264 for it; :func:`burn_flags` decodes a merged review movie and writes it
again with each frame's QC flags in its bottom right corner (``flags`` says why in two passes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from pipeline.colour import OutputColour
from pipeline.errors import MediaError
from pipeline.qc.records import Flag
from pipeline.review.text import Label, draw_labels, text_size
from pipeline.video.chunking import Chunk
from pipeline.video.encode import EncoderChoice, EncodeSettings, SegmentWriter, choose_encoder
from pipeline.video.probe import VideoInfo

REC709 = OutputColour(primaries="bt709", transfer="bt709", matrix="bt709", range="tv")
"""The review movies' colour: Rec.709, limited range."""
REVIEW_QUALITY = 20
REVIEW_PRESET = "veryfast"


def review_info(info: VideoInfo, size: tuple[int, int]) -> VideoInfo:
    """``info`` (the source) as the review movie: its size, 8-bit RGB frames, Rec.709, upright."""
    return dataclasses.replace(
        info,
        width=size[0],
        height=size[1],
        pix_fmt="yuv420p",
        bit_depth=8,
        color_primaries="bt709",
        color_trc="bt709",
        colorspace="bt709",
        color_range="tv",
        rotation=0,
        audio=(),
        sequence=None,
    )


def review_encoding(info: VideoInfo, size: tuple[int, int]) -> tuple[VideoInfo, EncoderChoice]:
    """The review movie's description and its encoder (libx264, yuv420p, Rec.709 tags)."""
    rinfo = review_info(info, size)
    settings = EncodeSettings(
        codec="h264", quality=REVIEW_QUALITY, preset=REVIEW_PRESET, hardware=False, colour=REC709
    )
    return rinfo, choose_encoder(settings, rinfo)


def flag_lines(flags: Sequence[Flag], numbers: Sequence[int]) -> dict[int, list[str]]:
    """Frame number -> the text of each flag on it (``reason track N``), worst first."""
    wanted = set(numbers)
    out: dict[int, list[str]] = {}
    for flag in sorted(flags, key=lambda f: -f.severity):
        text = flag.reason if flag.track is None else f"{flag.reason} track {flag.track}"
        for number in range(flag.first, flag.last + 1):
            if number in wanted and text not in out.get(number, []):
                out.setdefault(number, []).append(text)
    return out


def flag_labels(lines: Sequence[str], size: tuple[int, int], text: int) -> list[Label]:
    """The labels of a frame's flags, stacked up from its bottom right corner (faces' identities are
    drawn above their boxes, the shot's name top left, the frame number bottom left)."""
    margin = max(2, text // 2)
    step = text + 2 * max(1, text // 6) + 1
    return [Label(line, size[0] - margin, size[1] - margin - i * step, "rd") for i, line in enumerate(lines)]


def burn_flags(src: str, dst: str, numbers: Sequence[int], flags: Sequence[Flag]) -> int:
    """Write the review movie ``src`` again to ``dst`` with each frame's flags burnt in; frames written.

    ``numbers``: the source frame number of each frame of ``src``.  Frames without a flag are
    encoded again as they are (one generation of x264 at the review's quality)."""
    from pipeline.video.decode import Frame, decode_range
    from pipeline.video.probe import probe

    info = probe(src)
    if info.frame_count != len(numbers):
        raise MediaError(src, f"{info.frame_count} frames, expected {len(numbers)}")
    lines = flag_lines(flags, numbers)
    rinfo, choice = review_encoding(info, (info.width, info.height))
    text = text_size(info.height)
    chunk = Chunk(0, 0, info.frame_count, info.pts[0], info.end_pts())
    with SegmentWriter(dst, rinfo, choice, chunk) as writer:
        for frame in decode_range(src, info, 0, info.frame_count):
            rgb = frame.rgb
            here = lines.get(numbers[frame.index])
            if here:
                rgb = draw_labels(rgb, flag_labels(here, (info.width, info.height), text), text)
            writer.write(Frame(index=frame.index, pts=frame.pts, rgb=rgb))
    return info.frame_count
