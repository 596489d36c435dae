"""Which frames of a shot are analysed, and which are rendered and delivered (``frames:``, ``handles:``).

Frame numbers are a sequence's own (``1001``...) and a video's positions from 0.
``frames: 1009-1092`` renders those frames; ``handles: 8`` analyses 8 more on each
side so tracks and identities are settled when the range starts; with
``output.include_handles`` (the default) the handles are rendered and delivered
too.  Without either key the whole shot is both.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from cluster.spec.shot_refs import ShotSettings
from pipeline.errors import SpecError
from pipeline.video.chunking import Chunk, ChunkPlan
from pipeline.video.probe import VideoInfo

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShotWindow:
    """Frame positions ``[start, end)``: analysed (with handles) and delivered (rendered)."""

    analysed: tuple[int, int]
    delivered: tuple[int, int]
    frame_count: int
    """Every frame of the source."""

    @property
    def whole(self) -> bool:
        return self.delivered == (0, self.frame_count)

    @property
    def delivered_count(self) -> int:
        return self.delivered[1] - self.delivered[0]


def shot_window(info: VideoInfo, settings: ShotSettings, *, include_handles: bool) -> ShotWindow:
    """The shot's window; SpecError naming ``shots[i].frames`` when the range is outside the source."""
    n = info.frame_count
    first, last = info.frame_number(0), info.frame_number(n - 1)
    if settings.frames is None:
        start, end = 0, n
    else:
        wanted = settings.frames
        if wanted.first < first or wanted.last > last:
            raise SpecError(
                f"{settings.field}.frames",
                f"{wanted} is outside {info.url}, which has frames {first}-{last}",
            )
        start, end = wanted.first - first, wanted.last - first + 1
    analysed = (max(0, start - settings.handles), min(n, end + settings.handles))
    if settings.handles and analysed != (start - settings.handles, end + settings.handles):
        logger.warning(
            "%s: %d handle frames asked, the source has only frames %d-%d",
            info.url,
            settings.handles,
            first,
            last,
        )
    delivered = analysed if include_handles else (start, end)
    return ShotWindow(analysed=analysed, delivered=delivered, frame_count=n)


def render_chunks(info: VideoInfo, plan: ChunkPlan, window: ShotWindow) -> tuple[Chunk, ...]:
    """The plan's chunks cut to the delivered frames (same indices; chunks outside it dropped)."""
    a, b = window.delivered
    out = []
    for c in plan.chunks:
        start, end = max(c.start_frame, a), min(c.end_frame, b)
        if start >= end:
            continue
        if (start, end) == (c.start_frame, c.end_frame):
            out.append(c)
            continue
        end_pts = info.pts[end] if end < info.frame_count else info.end_pts()
        out.append(Chunk(c.index, start, end, info.pts[start], end_pts))
    return tuple(out)
