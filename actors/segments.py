"""A video chunk's encoded segments: the output's, one per compositing pass (ProRes 4444) and the
review segment (H.264, :mod:`actors.review`) when the job makes review movies.

Each segment is encoded to a local file, hashed, then uploaded whole to the job's work
area; the driver merges every kind's segments like the output's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Self

from actors.batches import Rendered
from actors.results import VideoPass
from actors.review import REVIEW_PASS, ReviewSegment, review_segment_url, upload
from pipeline.colour import ColourTags, written_tags
from pipeline.passes.layers import video_pass_frames
from pipeline.video.chunking import Chunk
from pipeline.video.decode import Frame
from pipeline.video.encode import EncoderChoice, EncodeSettings, SegmentWriter, choose_encoder
from pipeline.video.probe import VideoInfo

VIDEO_PASSES = ("matte", "face")
"""Passes written as movies with the output (``tracks`` is written by the driver)."""


def pass_segment_url(segment_url: str, name: str) -> str:
    """``…/00003-<key>.mp4`` -> ``…/00003-<key>.<name>.mov``."""
    return os.path.splitext(segment_url)[0] + f".{name}.mov"


def pass_encoder(info: VideoInfo, colour: ColourTags | None = None) -> tuple[VideoInfo, EncoderChoice]:
    """The 16-bit RGB source description and ProRes 4444 (with alpha) encoder of the pass movies.

    ``colour``: the output's tags, which the passes carry too (None: the source's)."""
    deep = dataclasses.replace(info, bit_depth=16, pix_fmt="yuva444p10le")
    choice = choose_encoder(EncodeSettings(codec="prores_4444"), deep)
    tags = written_tags("prores_4444", colour) if colour is not None else choice.colour
    return deep, dataclasses.replace(choice, pix_fmt="yuva444p10le", colour=tags)


@dataclass(frozen=True)
class UploadedSegments:
    """What :meth:`ChunkSegments.upload` uploaded: the output's segment (sha256 and size) and each pass's."""

    sha256: str
    bytes: int
    passes: dict[str, VideoPass]


class ChunkSegments:
    """The output's segment writer plus one per pass, fed :class:`Rendered` frames in order."""

    def __init__(
        self,
        folder: str,
        info: VideoInfo,
        encoder: EncoderChoice,
        chunk: Chunk,
        passes: Sequence[str],
        *,
        threads: int = 0,
        review: ReviewSegment | None = None,
    ) -> None:
        self.folder = folder
        self.written = 0
        self._stack = contextlib.ExitStack()
        self.path = os.path.join(folder, f"segment.{encoder.container}")
        self.writer = self._stack.enter_context(
            SegmentWriter(self.path, info, encoder, chunk, threads=threads)
        )
        self.pass_paths: dict[str, str] = {}
        self.pass_writers: dict[str, SegmentWriter] = {}
        names = [p for p in passes if p in VIDEO_PASSES]
        if names:
            deep, choice = pass_encoder(info, encoder.colour)
            for name in names:
                self.pass_paths[name] = os.path.join(folder, f"segment.{name}.mov")
                writer = SegmentWriter(self.pass_paths[name], deep, choice, chunk, threads=threads)
                self.pass_writers[name] = self._stack.enter_context(writer)
        self.review = self._stack.enter_context(review) if review is not None else None

    def write(self, item: Rendered) -> None:
        frame = item.frame
        out = Frame(index=frame.index, pts=frame.pts, rgb=item.pixels, alpha=frame.alpha, yuv=frame.yuv)
        self.writer.write(out)
        if self.pass_writers:
            layers = video_pass_frames(frame, item.pixels, item.matte)
            for name, writer in self.pass_writers.items():
                writer.write(layers[name])
        if self.review is not None:
            self.review.write(item)
        self.written += 1

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stack.__exit__(exc_type, exc, tb)

    def upload(self, segment_url: str) -> UploadedSegments:
        """Upload every closed segment: the output's to ``segment_url``, each pass's next to it."""
        output = upload(self.path, segment_url)
        passes = {
            name: upload(path, pass_segment_url(segment_url, name)) for name, path in self.pass_paths.items()
        }
        if self.review is not None:
            passes[REVIEW_PASS] = upload(self.review.path, review_segment_url(segment_url))
        return UploadedSegments(sha256=output.sha256, bytes=output.bytes, passes=passes)
