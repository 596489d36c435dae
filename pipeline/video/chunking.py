"""Split a shot into chunks cut at source timestamps (exact for VFR too).

A plan is a small picklable value: frame ranges plus the source timestamps at
each cut, so a segment can be rebased at merge time without re-probing.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.errors import SpecError
from pipeline.video.probe import VideoInfo


@dataclass(frozen=True)
class Chunk:
    """Frames ``[start_frame, end_frame)`` of the source.

    ``start_pts`` is the source pts of the first frame; ``end_pts`` is the pts of
    the next chunk's first frame (or the end of the last frame).
    """

    index: int
    start_frame: int
    end_frame: int
    start_pts: int = 0
    end_pts: int = 0

    @property
    def frame_count(self) -> int:
        return self.end_frame - self.start_frame


@dataclass(frozen=True)
class ChunkPlan:
    """All chunks of frames ``[first_frame, first_frame + frame_count)`` of one source, in order,
    covering each of those frames exactly once (the whole source unless a frame range was asked)."""

    frame_count: int
    chunks: tuple[Chunk, ...]
    first_frame: int = 0

    @property
    def end_frame(self) -> int:
        return self.first_frame + self.frame_count

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "frame_count": self.frame_count,
            "chunks": [[c.index, c.start_frame, c.end_frame, c.start_pts, c.end_pts] for c in self.chunks],
        }
        if self.first_frame:
            out["first_frame"] = self.first_frame
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChunkPlan:
        chunks = tuple(Chunk(*map(int, row)) for row in data["chunks"])
        plan = cls(
            frame_count=int(data["frame_count"]), chunks=chunks, first_frame=int(data.get("first_frame", 0))
        )
        covered = [(c.start_frame, c.end_frame) for c in chunks]
        expected_start = plan.first_frame
        for start, end in covered:
            if start != expected_start or end <= start:
                raise SpecError("chunk_plan", f"chunks do not tile the frames at frame {start}")
            expected_start = end
        if expected_start != plan.end_frame:
            raise SpecError("chunk_plan", f"chunks end at {expected_start}, not {plan.end_frame}")
        return plan


def plan_chunks(
    info: VideoInfo,
    seconds: float = 20.0,
    *,
    min_seconds: float = 10.0,
    max_seconds: float = 30.0,
    snap_to_keyframes: bool = True,
    snap_window_seconds: float = 2.0,
    start: int = 0,
    end: int | None = None,
) -> ChunkPlan:
    """Plan chunks of about ``seconds`` each (validated to ``[min_seconds, max_seconds]``).

    The shot is split into ``ceil(duration / seconds)`` equal spans, cut at the
    first frame at or after each span boundary.  With ``snap_to_keyframes`` a cut
    moves to the nearest keyframe within ``snap_window_seconds`` (decoding a chunk
    then starts without discarding frames).  A shot shorter than ``min_seconds``
    is one chunk.  ``start``/``end``: plan only frames ``[start, end)`` (a shot's frame
    range with its handles); chunk frame numbers stay the source's.
    """
    if not (math.isfinite(seconds) and min_seconds <= seconds <= max_seconds):
        raise SpecError(
            "chunk_seconds", f"{seconds!r} is outside the allowed range {min_seconds}-{max_seconds} s"
        )
    stop = info.frame_count if end is None else end
    if not 0 <= start < stop <= info.frame_count:
        raise SpecError("frames", f"frames [{start}, {stop}) outside the source's 0-{info.frame_count}")
    pts = info.pts
    tb = info.time_base
    end_pts = pts[stop] if stop < info.frame_count else info.end_pts()
    total = float((end_pts - pts[start]) * tb)
    n = 1 if total < min_seconds else max(1, math.ceil(total / seconds - 1e-9))
    cuts: list[int] = []
    window = snap_window_seconds
    keyframes = info.keyframes
    # Keyframes in presentation order: the ones near a cut are found by bisection on their timestamps
    # (an intra-only source has a keyframe on every frame; scanning them all per cut is quadratic).
    key_pts = [pts[kf] for kf in keyframes]
    ordered = all(a < b for a, b in itertools.pairwise(keyframes)) and all(
        a <= b for a, b in itertools.pairwise(key_pts)
    )
    reach = math.ceil(window / float(tb)) + 1 if tb else 0
    for k in range(1, n):
        target = pts[start] + (end_pts - pts[start]) * k / n
        cut = bisect.bisect_left(pts, target)
        if snap_to_keyframes:
            if ordered:
                lo = bisect.bisect_left(key_pts, pts[cut] - reach)
                hi = bisect.bisect_right(key_pts, pts[cut] + reach)
                candidates: Sequence[int] = keyframes[lo:hi]
            else:
                candidates = keyframes
            near = [
                kf
                for kf in candidates
                if abs(float((pts[kf] - pts[cut]) * tb)) <= window and start < kf < stop
            ]
            if near:
                cut = min(near, key=lambda kf: abs(pts[kf] - pts[cut]))
        if start < cut < stop and (not cuts or cut > cuts[-1]):
            cuts.append(cut)
    bounds = [start, *cuts, stop]
    chunks = tuple(
        Chunk(
            index=i,
            start_frame=a,
            end_frame=b,
            start_pts=pts[a],
            end_pts=pts[b] if b < info.frame_count else end_pts,
        )
        for i, (a, b) in enumerate(itertools.pairwise(bounds))
    )
    return ChunkPlan(frame_count=stop - start, chunks=chunks, first_frame=start)
