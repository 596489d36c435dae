"""Reading a delivered clip for the invisible watermark: faces found, then votes in their blocks.

A leaked clip comes without face boxes.  Reading every 8x8 block of the frame
lets the unmarked background drown the mark when the face is a small part of
the picture, so :func:`read_clip` finds the faces itself (a pack's detector)
and keeps only the grid blocks wholly inside each face box, by the embedder's
own rule (:func:`pipeline.provenance.watermark.block_coeffs`).  What it reads
does not depend on the key: :func:`scan` votes it for one key, so many keys
(or job ids) are tried on one decode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, cast

from pipeline.models.roles import Detector
from pipeline.provenance.config import WatermarkConfig
from pipeline.provenance.watermark import BlockCoeffs, Detection, Votes, block_coeffs

DETECT_BATCH = 8
"""Frames per detector call."""


@dataclass(frozen=True)
class ClipReading:
    """The marked-coefficient blocks read in each frame, and the faces each frame had."""

    blocks: list[list[BlockCoeffs]]
    faces: list[int]
    """Faces found per frame (0 for every frame when every block was read)."""
    all_blocks: bool

    @property
    def frames(self) -> int:
        return len(self.blocks)


def read_frames(frames: Sequence[Any], detector: Detector | None) -> ClipReading:
    """Read RGB uint8 ``frames``: blocks inside the faces ``detector`` finds, or every block when None."""
    blocks: list[list[BlockCoeffs]] = []
    faces: list[int] = []
    for start in range(0, len(frames), DETECT_BATCH):
        batch = list(frames[start : start + DETECT_BATCH])
        found = detector.detect_batch(batch) if detector is not None else [None] * len(batch)
        for frame, frame_faces in zip(batch, found, strict=True):
            boxes = None if frame_faces is None else [cast(Sequence[float], f.box) for f in frame_faces]
            blocks.append(block_coeffs(frame, boxes))
            faces.append(0 if frame_faces is None else len(frame_faces))
    return ClipReading(blocks, faces, detector is None)


def read_clip(url: str, detector: Detector | None, *, max_frames: int) -> ClipReading:
    """Decode up to ``max_frames`` frames of the video at ``url`` and read them (:func:`read_frames`).

    Raises :class:`pipeline.errors.RecastError` or ``av.FFmpegError`` for an unreadable input."""
    import av

    from pipeline.errors import RecastError
    from pipeline.store import storage

    blocks: list[list[BlockCoeffs]] = []
    faces: list[int] = []
    with (
        storage.fetched(url, suffix=PurePosixPath(url).suffix) as local,
        av.open(local) as container,
    ):
        if not container.streams.video:
            raise RecastError(f"{url}: has no video stream")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        batch: list[Any] = []
        for frame in container.decode(stream):
            if len(blocks) + len(batch) >= max_frames:
                break
            batch.append(frame.to_ndarray(format="rgb24"))
            if len(batch) == DETECT_BATCH:
                part = read_frames(batch, detector)
                blocks += part.blocks
                faces += part.faces
                batch = []
        part = read_frames(batch, detector)
        blocks += part.blocks
        faces += part.faces
    return ClipReading(blocks, faces, detector is None)


@dataclass(frozen=True)
class Scan:
    """Votes of a reading for one key: over each window of frames, and over the whole reading."""

    windows: list[tuple[int, Detection]]
    """(end frame, result) of each window."""
    overall: Detection


def scan(reading: ClipReading, config: WatermarkConfig, window: int) -> Scan:
    """Sum the votes of ``reading`` with ``config``'s key and step, per ``window`` frames and overall."""
    total = Votes(config)
    windows: list[tuple[int, Detection]] = []
    for start in range(0, reading.frames, window):
        votes = Votes(config)
        for frame_blocks in reading.blocks[start : start + window]:
            votes.add_blocks(frame_blocks)
        windows.append((min(reading.frames, start + window), votes.result()))
        total.merge(votes)
    return Scan(windows, total.result())
