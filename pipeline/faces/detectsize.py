"""Detection at the resolution the faces need (``faces.detect_size: auto``).

The detector sees a frame letterboxed into its input (640 x 640 for the packs
here): a 1080p frame at a third of its size, a 4K frame at a sixth, where a face
under about 30 px (1080p) or 60 px (4K) is too small to be found.  In ``auto`` mode
:class:`DetectTiles` probes the first frame of each run of frames (a chunk) twice:
letterboxed as always, and in tiles of the detector's input size at full
resolution (overlapping by :data:`OVERLAP`).  When the tiles find a face the
letterboxed pass does not, every frame of the run is detected both ways and the
results merged (the letterboxed faces as they are, plus the tiles' new ones); otherwise the run is detected as always, at the cost of the
one probe.  ``fixed`` (the default) never tiles: detections as before.

Not done here: a *smaller* input for shots whose faces are all large.  The
default pack's YuNet is exported at a fixed 640 x 640, so its cost per frame does
not shrink with the input; a detector with free input dimensions (SCRFD) could.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pipeline.faces.config import FaceConfig
from pipeline.faces.types import Face
from pipeline.tracking import box_iou

OVERLAP = 0.25
"""Overlap of neighbouring tiles, as a fraction of the tile size."""
NEW_FACE_IOU = 0.3
"""A tile's face overlapping every letterboxed face less than this is a face the letterbox missed."""
MERGE_IOU = 0.4
"""A tile's face overlapping a face already kept at least this much is that face (dropped)."""
EDGE_PX = 2.0
"""A tile's face this close to an inner tile edge is cut by it; the neighbouring tile has it whole."""


def input_size(detector: Any) -> tuple[int, int]:
    """The detector's input (width, height): ``input_size`` or ``input_width``/``input_height``."""
    size = getattr(detector, "input_size", None)
    if size is not None:
        return int(size[0]), int(size[1])
    return int(getattr(detector, "input_width", 640)), int(getattr(detector, "input_height", 640))


def tiles(height: int, width: int, tile_w: int, tile_h: int) -> list[tuple[int, int, int, int]]:
    """(x, y, w, h) of tiles of about ``tile_w`` x ``tile_h`` covering the frame, overlapping."""

    def starts(length: int, tile: int) -> list[int]:
        if length <= tile:
            return [0]
        n = math.ceil((length - tile) / (tile * (1.0 - OVERLAP))) + 1
        return [round(v) for v in np.linspace(0, length - tile, n)]

    tw, th = min(tile_w, width), min(tile_h, height)
    return [(x, y, tw, th) for y in starts(height, th) for x in starts(width, tw)]


class DetectTiles:
    """Per run of consecutive frames: letterbox only, or letterbox + full-resolution tiles."""

    def __init__(self) -> None:
        self.tiled: bool | None = None  # None: not probed yet
        self.tile_calls = 0

    @classmethod
    def of(cls, config: FaceConfig) -> DetectTiles | None:
        """A plan for ``faces.detect_size: auto``; None for ``fixed`` (detections as before)."""
        return cls() if config.detect_size == "auto" else None

    def detect(self, detector: Any, views: Sequence[np.ndarray], batch_size: int) -> list[list[Face]]:
        """Faces per frame of ``views`` (RGB uint8), best score first."""
        full: list[list[Face]] = []
        for start in range(0, len(views), batch_size):
            full.extend(detector.detect_batch(views[start : start + batch_size]))
        if not views:
            return full
        if self.tiled is None:
            probe = self._tiled(detector, views[0], batch_size)
            self.tiled = any(_is_new(f, full[0]) for f in probe)
        if not self.tiled:
            return full
        return [_merge(f, self._tiled(detector, v, batch_size)) for f, v in zip(full, views)]

    def _tiled(self, detector: Any, view: np.ndarray, batch_size: int) -> list[Face]:
        h, w = view.shape[:2]
        tw, th = input_size(detector)
        if w <= tw and h <= th:
            return []  # the letterbox already sees the frame at full resolution or more
        grid = tiles(h, w, tw, th)
        found: list[Face] = []
        for start in range(0, len(grid), batch_size):
            part = grid[start : start + batch_size]
            crops = [np.ascontiguousarray(view[y : y + th_, x : x + tw_]) for x, y, tw_, th_ in part]
            self.tile_calls += len(crops)
            for (x, y, tw_, th_), faces in zip(part, detector.detect_batch(crops)):
                for f in faces:
                    if _cut(f, x, y, tw_, th_, w, h):
                        continue
                    shift = np.array([x, y], np.float32)
                    box = f.box + np.concatenate([shift, shift])
                    found.append(Face(box=box, landmarks=f.landmarks + shift, score=f.score))
        return found


def _cut(face: Face, x: int, y: int, tw: int, th: int, width: int, height: int) -> bool:
    """Whether ``face`` touches an edge of its tile that is not an edge of the frame."""
    x1, y1, x2, y2 = (float(v) for v in face.box)
    return (
        (x > 0 and x1 <= EDGE_PX)
        or (y > 0 and y1 <= EDGE_PX)
        or (x + tw < width and x2 >= tw - EDGE_PX)
        or (y + th < height and y2 >= th - EDGE_PX)
    )


def _is_new(face: Face, known: Sequence[Face]) -> bool:
    return not known or _max_iou(face, known) < NEW_FACE_IOU


def _merge(full: list[Face], tiled: list[Face]) -> list[Face]:
    """The letterboxed pass's faces as they are (the same as ``fixed`` finds, so chunks with and
    without tiles agree), plus the tiles' faces none of them covers (NMS), highest score first."""
    kept = list(full)
    for face in sorted(tiled, key=lambda f: -f.score):
        if not kept or _max_iou(face, kept) < MERGE_IOU:
            kept.append(face)
    return sorted(kept, key=lambda f: -f.score)


def _max_iou(face: Face, others: Sequence[Face]) -> float:
    boxes = np.array([f.box for f in others], np.float64)
    return float(box_iou(np.asarray(face.box, np.float64)[None], boxes).max())
