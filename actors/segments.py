"""A video chunk's files: the output's encoded segment, its matte and face pass frames (EXR, written
whole under their frame numbers, :mod:`pipeline.passes.video`) and the review segment (H.264,
:mod:`actors.review`) when the job makes review movies.

Each segment is encoded to a local file, hashed, then uploaded whole to the job's work
area; the driver merges every kind's segments like the output's.  Pass frames are written
on writer threads to their own patterns, each atomically (a temporary name, then a rename or
one PUT), as an image sequence's frames are.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import numpy as np

from actors.batches import Rendered
from actors.plates import write_layers
from actors.results import FrameFile, SequencePass, VideoLayersPlan, VideoPass
from actors.review import REVIEW_PASS, ReviewSegment, review_segment_url, upload
from pipeline.colour import ColourTags
from pipeline.passes.naming import LAYERS
from pipeline.stages import OrderedPool
from pipeline.video.chunking import Chunk
from pipeline.video.decode import Frame
from pipeline.video.encode import EncoderChoice, SegmentWriter
from pipeline.video.probe import VideoInfo


class PassLayers:
    """An actor's video pass converters (:class:`~pipeline.passes.video.VideoPassConverter`), one per
    colour config, colour tags and rate (each OCIO config read once, not once per chunk), and the
    chunks' pass writers."""

    def __init__(self) -> None:
        self._made: dict[Any, Any] = {}

    def layers(self, info: VideoInfo, plan: VideoLayersPlan, codec_threads: int) -> VideoLayers:
        """The writers of a chunk's pass frames (one per core, two at least, when ``codec_threads`` is 0)."""
        threads = max(2, codec_threads or os.cpu_count() or 2)
        return VideoLayers(info, plan, self.converter(info, plan.config), threads=threads)

    def converter(self, info: VideoInfo, config: str) -> Any:
        from pipeline.passes.video import VideoPassConverter

        tags = ColourTags.of(info.color_primaries, info.color_trc, info.colorspace, info.color_range)
        key = (config, tags, info.frame_rate)
        if key not in self._made:
            self._made[key] = VideoPassConverter(config, tags, info.frame_rate)
        return self._made[key]


class VideoLayers:
    """Writes a video chunk's matte and face pass frames to their patterns on ``threads`` writer threads."""

    def __init__(self, info: VideoInfo, plan: VideoLayersPlan, converter: Any, *, threads: int) -> None:
        from pipeline.plates.sequence import parse_sequence_url

        self.info, self.plan, self.converter = info, plan, converter
        self.patterns = {name: parse_sequence_url(url) for name, url in plan.urls.items() if name in LAYERS}
        self.pool = OrderedPool[dict[str, FrameFile]](threads)
        self._done: dict[str, SequencePass] | None = None

    def write(self, frame: Frame, out: np.ndarray, matte: np.ndarray | None) -> None:
        """Queue the pass frames of source frame ``frame`` (rendered as ``out``), if the shot delivers it."""
        first, end = self.plan.delivered
        if self.patterns and first <= frame.index < end:
            self.pool.submit(self._write, (frame, out, matte))

    def _write(self, item: tuple[Frame, np.ndarray, np.ndarray | None]) -> dict[str, FrameFile]:
        from pipeline.passes.video import video_frame_spec

        frame, out, matte = item
        return write_layers(
            frame.rgb,
            out,
            matte,
            number=self.info.frame_number(frame.index),
            patterns=self.patterns,
            header_spec=video_frame_spec(self.info, frame.index),
            to_pass=self.converter.to_pass,
            pass_header=self.converter.header,
        )

    def finish(self) -> dict[str, SequencePass]:
        """Every pass's frames written (waits for the writers; their first error is raised here)."""
        if self._done is None:
            files: dict[str, list[FrameFile]] = {name: [] for name in self.patterns}
            for written in self.pool.results():
                for name, file in written.items():
                    files[name].append(file)
            self._done = {
                name: SequencePass(url=self.plan.urls[name], frames=tuple(f)) for name, f in files.items()
            }
        return self._done

    def close(self) -> None:
        """Stop the writers (frames not started yet are not written)."""
        self.pool.__exit__(None, None, None)


@dataclass(frozen=True)
class UploadedSegments:
    """What :meth:`ChunkSegments.upload` uploaded: the output's segment (sha256 and size) and each pass's."""

    sha256: str
    bytes: int
    passes: dict[str, VideoPass | SequencePass]


class ChunkSegments:
    """The output's segment writer plus the pass frames' writers, fed :class:`Rendered` frames in order."""

    def __init__(
        self,
        folder: str,
        info: VideoInfo,
        encoder: EncoderChoice,
        chunk: Chunk,
        *,
        threads: int = 0,
        layers: VideoLayers | None = None,
        review: ReviewSegment | None = None,
    ) -> None:
        self.folder = folder
        self.written = 0
        self._stack = contextlib.ExitStack()
        self.path = os.path.join(folder, f"segment.{encoder.container}")
        self.writer = self._stack.enter_context(
            SegmentWriter(self.path, info, encoder, chunk, threads=threads)
        )
        self.layers = layers
        if layers is not None:
            self._stack.callback(layers.close)
        self.review = self._stack.enter_context(review) if review is not None else None

    def write(self, item: Rendered) -> None:
        frame = item.frame
        out = Frame(index=frame.index, pts=frame.pts, rgb=item.pixels, alpha=frame.alpha, yuv=frame.yuv)
        self.writer.write(out)
        if self.layers is not None:
            self.layers.write(frame, item.pixels, item.matte)
        if self.review is not None:
            self.review.write(item)
        self.written += 1

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if exc_type is None and self.layers is not None:
                self.layers.finish()  # every pass frame written before the writers stop
        finally:
            self._stack.__exit__(exc_type, exc, tb)

    def upload(self, segment_url: str) -> UploadedSegments:
        """Upload every closed segment: the output's to ``segment_url``, the review's next to it; the
        pass frames written (waited for)."""
        output = upload(self.path, segment_url)
        passes: dict[str, VideoPass | SequencePass] = {}
        if self.layers is not None:
            passes.update(self.layers.finish())
        if self.review is not None:
            passes[REVIEW_PASS] = upload(self.review.path, review_segment_url(segment_url))
        return UploadedSegments(sha256=output.sha256, bytes=output.bytes, passes=passes)
