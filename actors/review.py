"""A video chunk's review segment: plate and output laid out, burnt in, encoded as H.264.

Made from the frames the render already holds (no second decode); the driver merges the
segments into the shot's review movie and burns in the QC flags it concluded
(:mod:`cluster.publish.review`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Self, cast

import numpy as np

from actors.batches import Rendered
from actors.results import VideoPass
from pipeline.geometry.types import FaceTask
from pipeline.review.frames import FrameStamp, ReviewLook, review_frame, timecode_of
from pipeline.review.movie import review_encoding
from pipeline.store import storage
from pipeline.store.hashing import sha256_file
from pipeline.video.chunking import Chunk
from pipeline.video.decode import Frame
from pipeline.video.encode import SegmentWriter
from pipeline.video.probe import VideoInfo

if TYPE_CHECKING:
    from pipeline.plates.colour import PlateConverter

Pictures = Callable[[Rendered], tuple[np.ndarray, np.ndarray]]
"""A rendered frame -> (plate, output) as the review shows them."""

REVIEW_PASS = "review"
"""The name of a chunk's review segment among its passes (``SegmentResult.passes``)."""


def review_segment_url(segment_url: str) -> str:
    """``…/00003-<key>.mp4`` -> ``…/00003-<key>.review.mp4``."""
    return os.path.splitext(segment_url)[0] + f".{REVIEW_PASS}.mp4"


def upload(path: str, url: str) -> VideoPass:
    """Upload the closed local segment ``path`` to ``url``: its record (size and sha256)."""
    digest, size = sha256_file(path), os.path.getsize(path)
    storage.publish_file(path, url)
    return VideoPass(url=url, bytes=size, sha256=digest)


def video_pictures(item: Rendered) -> tuple[np.ndarray, np.ndarray]:
    """A video frame's plate and output: the pictures the render holds."""
    return item.frame.rgb, item.pixels


class PlateView:
    """An image-sequence frame and its render through the plate's OCIO display/view transform
    (:class:`pipeline.review.view.DisplayView`), from the plate's own pixels (highlights above
    1.0 are tone-mapped by the view, not clipped in the models' space first)."""

    def __init__(self, converter: PlateConverter) -> None:
        from pipeline.plates.colour import load_config
        from pipeline.review.view import DisplayView

        colour = converter.colour
        self.converter = converter
        self.view = DisplayView(load_config(colour.config), colour.plate_space)

    def __call__(self, item: Rendered) -> tuple[np.ndarray, np.ndarray]:
        from pipeline.plates.frames import PlateFrame, merge_back

        frame, rgb = cast(PlateFrame, item.frame), list(self.converter.rgb)
        plate = self.view(self.converter.normalise(frame.pixels[..., rgb]))
        if item.out is None:
            return plate, plate
        out = merge_back(frame, item.out, self.converter)
        return plate, self.view(self.converter.normalise(out[..., rgb]))


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
        pictures: Pictures = video_pictures,
    ) -> None:
        self.path = path
        self.pictures = pictures
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
        plate, output = self.pictures(item)
        rgb = review_frame(plate, output, self.look, stamp)
        self.writer.write(Frame(index=frame.index, pts=frame.pts, rgb=rgb))

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.writer.__exit__(exc_type, exc, tb)
