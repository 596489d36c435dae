"""Where an actor's chunk frames come from: the decoder, or the pictures its analysis kept.

The analysis of a chunk keeps the chunk's decoded pictures when they fit the actor's
``decode_cache_mb`` (:mod:`pipeline.video.decoded_cache`); the render of that chunk on the same
actor converts them instead of decoding again.  Both give byte-identical frames.
"""

from __future__ import annotations

from collections.abc import Iterator

from actors.plates import PlateFrames
from pipeline.video.chunking import Chunk
from pipeline.video.decode import Frame
from pipeline.video.decoded_cache import MIB, ChunkCollector, DecodedCache
from pipeline.video.decoders import VideoDecoder
from pipeline.video.probe import VideoInfo


class ChunkFrames:
    """An actor's frame sources for analyses and renders, with its decoded-picture cache."""

    def __init__(self, plates: PlateFrames, codec_threads: int, cache_mb: int) -> None:
        self.plates = plates
        self.codec_threads = codec_threads
        self.decoder: VideoDecoder | None = None  # set by the actor's set-up
        self.cache = DecodedCache(cache_mb * MIB)

    def decode(self, shot_url: str, info: VideoInfo, chunk: Chunk) -> Iterator[Frame]:
        """Frames ``[chunk.start_frame, chunk.end_frame)`` decoded from the source."""
        if info.sequence is not None:
            return self.plates.decode(info, chunk)
        assert self.decoder is not None  # the actor's set-up made it
        return self.decoder.frames(
            shot_url, info, chunk.start_frame, chunk.end_frame, threads=self.codec_threads
        )

    def for_analysis(
        self, shot_url: str, info: VideoInfo, chunk: Chunk
    ) -> tuple[Iterator[Frame], ChunkCollector | None]:
        """The analysis' frames, and the collector keeping their decoded pictures (None: no room).

        Call :meth:`analysed` with the collector once the analysis succeeded."""
        frames = self.decode(shot_url, info, chunk)
        collector = self.cache.collector(shot_url, info, chunk.start_frame, chunk.end_frame)
        return (frames if collector is None else collector.wrap(frames)), collector

    def analysed(self, collector: ChunkCollector | None) -> None:
        if collector is not None:
            self.cache.admit(collector)

    def for_render(self, shot_url: str, info: VideoInfo, chunk: Chunk) -> tuple[Iterator[Frame], bool]:
        """The render's frames, and whether they come from the analysis' pictures (True) or a decode."""
        kept = self.cache.take(shot_url, info, chunk.start_frame, chunk.end_frame)
        if kept is not None:
            return kept.frames(), True
        return self.decode(shot_url, info, chunk), False
