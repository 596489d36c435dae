"""A video chunk's review segment: plate and output laid out, burnt in, encoded as H.264.

Made from the frames the render already holds (no second decode); the driver merges the
segments into the shot's review movie and burns in the QC flags it concluded
(:mod:`cluster.publish.review`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from types import TracebackType
from typing import Self

from actors.batches import Rendered
from pipeline.geometry.types import FaceTask
from pipeline.review.frames import FrameStamp, ReviewLook, review_frame, timecode_of
from pipeline.review.movie import review_encoding
from pipeline.video.chunking import Chunk
from pipeline.video.decode import Frame
from pipeline.video.encode import SegmentWriter
from pipeline.video.probe import VideoInfo

REVIEW_PASS = "review"
"""The name of a chunk's review segment among its passes (``SegmentResult.passes``)."""


def review_segment_url(segment_url: str) -> str:
    """``…/00003-<key>.mp4`` -> ``…/00003-<key>.review.mp4``."""
    return os.path.splitext(segment_url)[0] + f".{REVIEW_PASS}.mp4"


class ReviewSegment:
    """Writes a chunk's review frames to ``path`` (a context manager, like :class:`SegmentWriter`)."""

    def __init__(
        self,
        path: str,
        info: VideoInfo,
        chunk: Chunk,
        look: ReviewLook,
        tasks_per_frame: Sequence[Sequence[FaceTask]],
        *,
        threads: int = 0,
    ) -> None:
        self.path = path
        self.info = info
        self.chunk = chunk
        self.look = look
        self.tasks_per_frame = tasks_per_frame
        rinfo, choice = review_encoding(info, look.size)
        self.writer = SegmentWriter(path, rinfo, choice, chunk, threads=threads)

    def write(self, item: Rendered) -> None:
        frame, info = item.frame, self.info
        tasks = self.tasks_per_frame[frame.index - self.chunk.start_frame]
        stamp = FrameStamp(
            number=info.frame_number(frame.index),
            timecode=timecode_of(info.timecode, frame.index, info.frame_rate),
            faces=[(task.box, task.identity) for task in tasks],
        )
        rgb = review_frame(frame.rgb, item.pixels, self.look, stamp)
        self.writer.write(Frame(index=frame.index, pts=frame.pts, rgb=rgb))

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.writer.__exit__(exc_type, exc, tb)
