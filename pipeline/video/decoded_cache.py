"""Decoded pictures kept from a chunk's analysis for its render: one CPU decode per frame.

An actor analyses a chunk (decode -> detect -> embed), and later usually renders the same
chunk (the dispatcher prefers the analysing actor).  Instead of decoding the chunk a second
time, the analysis keeps each frame's decoded picture (``Frame.yuv``, an ``av.VideoFrame``:
about 1.5 bytes per pixel at 8 bit 4:2:0, 3 at 10 bit; never the RGB) and the render converts
it with :class:`~pipeline.video.decode.DecodeConversion`, exactly the conversion ``decode_range``
uses, so the render's frames are byte-identical to decoding.

Policy (a cache miss only costs a decode, never a different output):

* a chunk is admitted whole, and only if all of it fits in what is left of the budget;
  nothing older is evicted: renders run in chunk order, so the earliest analysed
  chunks are the first rendered;
* collecting stops as soon as a chunk outgrows what is left, so an analysis never holds
  more than the budget;
* a render takes its chunk (take removes it) and releases the same shot's entries that
  end at or before its start: renders of a shot are dispatched in chunk order, so those
  went to another actor;
* sources without a decoded picture (alpha, image sequences) are not kept;
* the cache lives in its actor, which lives for one job: the job's end frees it.

Not thread-safe: one actor call at a time (the collecting iterator runs on the analysis'
reader thread while the call waits for it).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

import av

from pipeline.video.decode import DecodeConversion, Frame
from pipeline.video.probe import VideoInfo

MIB = 1024 * 1024


def picture_bytes(picture: av.VideoFrame) -> int:
    """Bytes a decoded picture holds: its planes' buffer sizes."""
    return sum(int(plane.buffer_size) for plane in picture.planes)


@dataclass(frozen=True)
class ChunkKey:
    """A chunk of one source: frames ``[start_frame, end_frame)`` of ``url``."""

    url: str
    start_frame: int
    end_frame: int


@dataclass
class CachedChunk:
    """A chunk's decoded pictures in frame order (``(index, pts, picture)``), the source's
    description they were decoded with, and their bytes."""

    key: ChunkKey
    info: VideoInfo
    pictures: deque[tuple[int, int, av.VideoFrame]] = field(default_factory=deque)
    nbytes: int = 0
    complete: bool = True
    """False once the chunk outgrew its room or a frame had no decoded picture: not admitted."""

    def frames(self) -> Iterator[Frame]:
        """The chunk's frames, as ``decode_range`` yields them; each picture is dropped once yielded."""
        conversion = DecodeConversion(self.info)
        while self.pictures:
            index, pts, picture = self.pictures.popleft()
            yield Frame(index=index, pts=pts, rgb=conversion.to_rgb(picture), yuv=picture)


class ChunkCollector:
    """Keeps the decoded pictures of frames passing through :meth:`wrap`, up to ``room`` bytes."""

    def __init__(self, key: ChunkKey, info: VideoInfo, room: int) -> None:
        self.chunk = CachedChunk(key, info)
        self.room = room

    def wrap(self, frames: Iterator[Frame]) -> Iterator[Frame]:
        chunk = self.chunk
        for frame in frames:
            if chunk.complete:
                size = picture_bytes(frame.yuv) if frame.yuv is not None else 0
                if frame.yuv is None or chunk.nbytes + size > self.room:
                    chunk.complete = False
                    chunk.pictures.clear()
                    chunk.nbytes = 0
                else:
                    chunk.pictures.append((frame.index, frame.pts, frame.yuv))
                    chunk.nbytes += size
            yield frame


class DecodedCache:
    """Chunks' decoded pictures, at most ``budget_bytes`` in all (0: disabled); see the module docstring."""

    def __init__(self, budget_bytes: int) -> None:
        if budget_bytes < 0:
            raise ValueError(f"budget_bytes must be >= 0, got {budget_bytes}")
        self.budget_bytes = budget_bytes
        self._chunks: dict[ChunkKey, CachedChunk] = {}

    @property
    def held_bytes(self) -> int:
        return sum(c.nbytes for c in self._chunks.values())

    def __len__(self) -> int:
        return len(self._chunks)

    def collector(self, url: str, info: VideoInfo, start_frame: int, end_frame: int) -> ChunkCollector | None:
        """A collector for this chunk's analysis (None: the cache is disabled or full)."""
        room = self.budget_bytes - self.held_bytes
        if self.budget_bytes == 0 or room <= 0 or info.sequence is not None:
            return None
        return ChunkCollector(ChunkKey(url, start_frame, end_frame), info, room)

    def admit(self, collector: ChunkCollector) -> bool:
        """Keep the collected chunk if it is whole (every frame, nothing dropped) and fits."""
        chunk = collector.chunk
        key = chunk.key
        self._chunks.pop(key, None)  # the same chunk analysed again: the new pictures replace the old
        whole = chunk.complete and len(chunk.pictures) == key.end_frame - key.start_frame
        if not whole or chunk.nbytes > self.budget_bytes - self.held_bytes:
            chunk.pictures.clear()
            return False
        self._chunks[key] = chunk
        return True

    def take(self, url: str, info: VideoInfo, start_frame: int, end_frame: int) -> CachedChunk | None:
        """Remove and return this chunk if held for the same source description; also release the
        same shot's chunks ending at or before ``start_frame``."""
        for key in [k for k in self._chunks if k.url == url and k.end_frame <= start_frame]:
            del self._chunks[key]
        chunk = self._chunks.pop(ChunkKey(url, start_frame, end_frame), None)
        if chunk is None or chunk.info != info:
            return None
        return chunk

    def clear(self) -> None:
        self._chunks.clear()
