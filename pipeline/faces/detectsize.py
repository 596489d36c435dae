"""Detection at the resolution the faces need (``faces.detect_size: auto``).

The detector sees a frame letterboxed into its input (640 x 640 for the packs
here): a 1080p frame at a third of its size, a 4K frame at a sixth.  In ``auto``
mode :class:`DetectTiles` probes the first frame of each run of frames (a chunk)
at that input, once letterboxed and once in tiles of the input's size at full
resolution (overlapping by :data:`OVERLAP`), then detects the run one of three ways:

* small faces: the tiles find a face the letterbox misses (a head under about 30 px
  in 1080p, 60 px in 4K).  Every frame is detected both ways and the results merged
  (the letterboxed faces as they are, plus the tiles' new ones), at the full input.
* large faces only: the run is detected at the smallest input (a multiple of
  :data:`STEP`, not under :data:`MIN_SIDE`) at which the smallest probed face is
  still :data:`SAFE_FACE_PX` on its shorter side, if the detector runs at that size
  (:class:`pipeline.models.detectors.detector_sizes.DetectorSizes`; a graph that cannot keeps
  its size and says why once).  At that size the probe frame must give every face
  the full input found (IoU >= :data:`SAME_FACE_IOU`), and a face found under
  :data:`REVERT_PX` sends the rest of the run back to the full input.  YuNet at
  320 x 320 costs a sixth of 640 x 640 (7 against 42 ms a frame, one thread, 2-core
  EPYC); boxes and landmarks move by up to 9 % of the face's height against the
  640 x 640 ones (480 x 480 moves them by 7 %: the detector's own spread between
  sizes), and jitter no more across frames of a moving face.
* no face: the full input, as ``fixed``.

``fixed`` (the default) never probes: detections as before.  Faces that appear
later in a run, smaller than the probe's, are found as well as the run's input size
allows (down to the detector's smallest anchor, a third of the safe size).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.faces.config import FaceConfig
from pipeline.geometry.boxes import box_iou
from pipeline.geometry.types import Face
from pipeline.models.detectors.detector_sizes import input_size

if TYPE_CHECKING:
    from pipeline.models.detectors.detector_sizes import DetectorSizes

OVERLAP = 0.25
"""Overlap of neighbouring tiles, as a fraction of the tile size."""
NEW_FACE_IOU = 0.3
"""A tile's face overlapping every letterboxed face less than this is a face the letterbox missed."""
MERGE_IOU = 0.4
"""A tile's face overlapping a face already kept at least this much is that face (dropped)."""
EDGE_PX = 2.0
"""A tile's face this close to an inner tile edge is cut by it; the neighbouring tile has it whole."""
SAFE_FACE_PX = 48.0
"""The shorter side, in detector pixels, the smallest probed face keeps at a reduced input.
The detectors' smallest anchors are about 16 px (SCRFD and RetinaFace: 16 px anchors at
stride 8; YuNet: one prior per 8 px cell), so a face can shrink to a third of its size
in the probe frame within the run and still be found."""
REVERT_PX = 32.0
"""A face found under this (detector pixels) at a reduced input: the rest of the run goes back
to the full input, while the face is still twice the smallest anchor."""
SAME_FACE_IOU = 0.5
"""At a reduced input, every face the full input found in the probe frame must be found
overlapping at least this much, or the run keeps the full input."""
MIN_SIDE = 160
"""No input side below this: under it the detectors' stride-32 maps are 4 cells or fewer."""
STEP = 32
"""Input sides are multiples of the detectors' largest stride."""


def tiles(height: int, width: int, tile_w: int, tile_h: int) -> list[tuple[int, int, int, int]]:
    """(x, y, w, h) of tiles of about ``tile_w`` x ``tile_h`` covering the frame, overlapping."""

    def starts(length: int, tile: int) -> list[int]:
        if length <= tile:
            return [0]
        n = math.ceil((length - tile) / (tile * (1.0 - OVERLAP))) + 1
        return [round(v) for v in np.linspace(0, length - tile, n)]

    tw, th = min(tile_w, width), min(tile_h, height)
    return [(x, y, tw, th) for y in starts(height, th) for x in starts(width, tw)]


def face_px(face: Face, frame_hw: tuple[int, ...], size: tuple[int, int]) -> float:
    """The face's shorter side in the pixels of a ``size`` (width, height) detector input."""
    h, w = frame_hw[:2]
    scale = min(size[0] / w, size[1] / h)
    x1, y1, x2, y2 = (float(v) for v in face.box)
    return min(x2 - x1, y2 - y1) * scale


def reduced_size(base: tuple[int, int], frame_hw: tuple[int, ...], faces: Sequence[Face]) -> tuple[int, int]:
    """The smallest input below ``base`` (width, height; sides multiples of :data:`STEP`, the
    shorter not under :data:`MIN_SIDE`, ``base``'s aspect) at which every face in ``faces`` keeps
    :data:`SAFE_FACE_PX`; ``base`` when none does or there is no face."""
    if not faces:
        return base
    bw, bh = base
    chosen = base
    for width in range(STEP * ((bw - 1) // STEP), 0, -STEP):
        size = (width, max(STEP, round(bh * width / bw / STEP) * STEP))
        if min(size) < MIN_SIDE or min(face_px(f, frame_hw, size) for f in faces) < SAFE_FACE_PX:
            break
        chosen = size
    return chosen


class DetectTiles:
    """Per run of consecutive frames: the full input, full input + tiles, or a reduced input."""

    def __init__(self) -> None:
        self.tiled: bool | None = None  # None: not probed yet
        self.tile_calls = 0
        self.size: tuple[int, int] | None = None
        """The input the run is detected at (set by the probe; back to full by a small face)."""
        self.reverted = False
        """Whether a small face sent the run back from a reduced input to the full one."""
        self.notes: list[str] = []
        """Why the run was not detected at the reduced input it could have been (for the summary)."""
        self._reduced: Any = None  # the detector at ``size`` while it is below the full input

    @classmethod
    def of(cls, config: FaceConfig) -> DetectTiles | None:
        """A plan for ``faces.detect_size: auto``; None for ``fixed`` (detections as before)."""
        return cls() if config.detect_size == "auto" else None

    def detect(
        self,
        detector: Any,
        views: Sequence[np.ndarray],
        batch_size: int,
        sizes: DetectorSizes | None = None,
    ) -> list[list[Face]]:
        """Faces per frame of ``views`` (RGB uint8), best score first; ``sizes``: the detector
        at reduced inputs (None: the full input only)."""
        if not views:
            return []
        if self.tiled is None:
            self._probe(detector, views[0], batch_size, sizes)
        found: list[list[Face]] = []
        for start in range(0, len(views), batch_size):
            part = views[start : start + batch_size]
            if self._reduced is None:
                found.extend(detector.detect_batch(part))
                continue
            faces = self._reduced.detect_batch(part)
            found.extend(faces)
            size = input_size(self._reduced)
            if any(face_px(f, v.shape, size) < REVERT_PX for fs, v in zip(faces, part) for f in fs):
                self._reduced, self.size, self.reverted = None, input_size(detector), True
        if not self.tiled:
            return found
        return [_merge(f, self._tiled(detector, v, batch_size)) for f, v in zip(found, views)]

    def _probe(self, detector: Any, view: np.ndarray, batch_size: int, sizes: DetectorSizes | None) -> None:
        """Tiles or not, and the input size, from the run's first frame."""
        first = detector.detect_batch([view])[0]
        self.tiled = any(_is_new(f, first) for f in self._tiled(detector, view, batch_size))
        self.size = base = input_size(detector)
        if self.tiled or sizes is None:
            return
        size = reduced_size(base, view.shape, first)
        if size == base:
            return
        reduced = sizes.at(size, view)
        if reduced is None:
            if sizes.refused is not None:
                self.notes.append(sizes.refused)
            return
        again = reduced.detect_batch([view])[0]
        if again and all(_max_iou(f, again) >= SAME_FACE_IOU for f in first):
            self._reduced, self.size = reduced, size

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
                    if _cut(f, x, y, tw_, th_, width=w, height=h):
                        continue
                    shift = np.array([x, y], np.float32)
                    box = f.box + np.concatenate([shift, shift])
                    found.append(Face(box=box, landmarks=f.landmarks + shift, score=f.score))
        return found


def _cut(face: Face, x: int, y: int, tw: int, th: int, *, width: int, height: int) -> bool:
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
