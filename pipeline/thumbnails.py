"""Before/after thumbnails of a shot for the job report.

The frames worth looking at are the first one and both sides of every chunk
boundary: a seam between two independently rendered chunks is where a
tracking or colour discontinuity would show.  Both the source and the rendered
output are decoded frame-exactly (``pipeline.video.decode.decode_range``) so "before"
and "after" are the same instant.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from pipeline.errors import MediaError
from pipeline.video.chunking import Chunk, ChunkPlan
from pipeline.video.decode import decode_range
from pipeline.video.probe import VideoInfo, probe

log = logging.getLogger(__name__)

JPEG_QUALITY = 82


@dataclass(frozen=True)
class Thumb:
    """One frame of a shot as two JPEGs: the source (``before``) and the render (``after``)."""

    frame: int
    before_jpeg: bytes
    after_jpeg: bytes


def boundary_frames(plan: ChunkPlan | Sequence[Chunk]) -> list[int]:
    """The first frame plus, for every boundary, the last frame of chunk k and the first of chunk k+1.

    Sorted, without duplicates (a one-frame chunk shares frames between boundaries).
    """
    chunks = plan.chunks if isinstance(plan, ChunkPlan) else tuple(plan)
    if not chunks or chunks[-1].end_frame <= chunks[0].start_frame:
        return []
    first, end = chunks[0].start_frame, chunks[-1].end_frame
    frames = {first}
    for chunk in chunks[1:]:
        frames.add(chunk.start_frame - 1)
        frames.add(chunk.start_frame)
    return sorted(f for f in frames if first <= f < end)


def thumbnails(
    source_url: str,
    output_url: str,
    info: VideoInfo,
    frames: Sequence[int],
    width: int = 320,
    *,
    offset: int = 0,
) -> list[Thumb]:
    """JPEG thumbnails ``width`` pixels wide of ``frames`` in the source and in the rendered output.

    ``offset``: the output's frame ``f - offset`` is the source's frame ``f`` (a delivered range).

    ``info`` describes the source; the output is probed here.  16-bit frames are
    reduced to 8 bits; display rotation (metadata only in the files) is applied
    so the pictures stand the way a viewer shows them.  Raises MediaError if a
    frame is outside either file.
    """
    if width < 16:
        raise ValueError(f"width={width!r}: thumbnails must be at least 16 pixels wide")
    wanted = sorted({int(f) for f in frames})
    if not wanted:
        return []
    if info.sequence is not None:
        return _plate_thumbnails(info, output_url, wanted, width)
    out_info = probe(output_url)
    for url, vinfo, shift in ((source_url, info, 0), (output_url, out_info, offset)):
        bad = [f for f in wanted if not 0 <= f - shift < vinfo.frame_count]
        if bad:
            raise MediaError(url, f"thumbnail frames {bad} outside 0-{vinfo.frame_count - 1 + shift}")
    before = dict(_encoded(source_url, info, wanted, width))
    after = dict(_encoded(output_url, out_info, [f - offset for f in wanted], width))
    return [Thumb(frame=f, before_jpeg=before[f], after_jpeg=after[f - offset]) for f in wanted]


def _plate_thumbnails(info: VideoInfo, output_url: str, wanted: list[int], width: int) -> list[Thumb]:
    """Thumbnails of an image sequence and its output (same frame numbers), in the models' colour space."""
    import dataclasses

    from pipeline.plates.colour import PlateConverter
    from pipeline.plates.frames import read_frame
    from pipeline.plates.sequence import parse_sequence_url

    assert info.sequence is not None
    out_seq = dataclasses.replace(info.sequence, pattern=parse_sequence_url(output_url))
    out_info = dataclasses.replace(info, url=output_url, sequence=out_seq)
    converter = PlateConverter(info.sequence.colour, info.sequence)
    bad = [f for f in wanted if not 0 <= f < info.frame_count]
    if bad:
        raise MediaError(info.url, f"thumbnail frames {bad} outside 0-{info.frame_count - 1}")
    return [
        Thumb(
            frame=f,
            before_jpeg=jpeg(read_frame(info, f, converter).rgb, width=width),
            after_jpeg=jpeg(read_frame(out_info, f, converter).rgb, width=width),
        )
        for f in wanted
    ]


def _runs(frames: list[int]) -> Iterator[tuple[int, int]]:
    """Consecutive sorted frames grouped as ``[start, end)`` ranges (one seek per range)."""
    start = prev = frames[0]
    for f in frames[1:]:
        if f != prev + 1:
            yield start, prev + 1
            start = f
        prev = f
    yield start, prev + 1


def _encoded(url: str, info: VideoInfo, frames: list[int], width: int) -> Iterator[tuple[int, bytes]]:
    for start, end in _runs(frames):
        for frame in decode_range(url, info, start, end):
            yield frame.index, jpeg(frame.rgb, width=width, rotation=info.rotation)


def jpeg(rgb: np.ndarray, *, width: int = 320, rotation: int = 0) -> bytes:
    """An RGB frame (uint8 or uint16) as JPEG bytes, resized to ``width`` keeping the aspect ratio."""
    if rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"expected an HxWx3 RGB frame, got shape {rgb.shape}")
    if rgb.dtype == np.uint16:
        # Full-scale 16-bit: round to nearest 8-bit code rather than truncating.
        rgb = ((rgb.astype(np.uint32) + 128) // 257).astype(np.uint8)
    elif rgb.dtype != np.uint8:
        raise ValueError(f"expected uint8 or uint16 pixels, got {rgb.dtype}")
    # probe's rotation follows av_display_rotation_get: the picture is shown turned that many
    # degrees counter-clockwise, which is what np.rot90 does for k > 0.
    quarter_turns = (round(rotation / 90)) % 4
    if quarter_turns:
        rgb = np.ascontiguousarray(np.rot90(rgb, k=quarter_turns))
    h, w = rgb.shape[:2]
    height = max(1, round(h * width / w))
    small = cv2.resize(rgb, (width, height), interpolation=cv2.INTER_AREA if width < w else cv2.INTER_LINEAR)
    # OpenCV writes BGR.
    bgr = cv2.cvtColor(small, cv2.COLOR_RGB2BGR)
    ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
    if not ok:
        raise MediaError("<thumbnail>", "JPEG encoding failed")
    return buf.tobytes()
