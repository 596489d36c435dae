"""Landmarks at the plate's own resolution (``faces.refine: auto``).

The detector sees a frame letterboxed into its input: a 4K frame at a sixth of its size, so one
detector pixel is 6.4 plate pixels, and the five landmarks that place a 600 px face move by that
much from frame to frame: the replaced face swims.  Here each face the letterbox found is detected
again on a square crop around it, taken at (or near) the plate's own resolution and sized to the
detector's input, and its box and landmarks are taken from there, mapped back to the plate.

Frames the letterbox shrinks to :data:`LETTERBOX` or less are refined (1080p and larger; a 720p
frame's faces are already seen at half size), each face whose crop shows it at least :data:`GAIN`
times larger than the letterbox did (a 1080p frame's faces up to about 600 px, a 4K frame's up to
about 1,200 px).  The crop is :data:`MARGIN` times the face's
longer side, enlarged to the detector's input by at most :data:`MAX_ZOOM` (a small face is not blown
up further).  Of the crop's detections the one overlapping the face most is taken (IoU
at least :data:`MATCH_IOU`); a face with none keeps the letterbox's detection.  One more detector
call per refined face: counted in the analysis stage's ``detect`` time (``refine``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from pipeline.geometry.boxes import box_iou
from pipeline.geometry.types import Face
from pipeline.models.detectors.detector_sizes import input_size

LETTERBOX = 0.4
"""Frames the letterbox shrinks to this or less are refined (1080p: 0.33, 4K: 0.17; 720p, at 0.5, is not:
its faces are already seen at half size or more, and its analysis keeps its cost)."""
GAIN = 2.0
"""A face is refined when its crop shows it at least this many times larger than the letterbox."""
MARGIN = 1.8
"""The crop's side over the face box's longer side."""
MAX_ZOOM = 2.0
"""A crop is enlarged at most this much to the detector's input (a small face is not blown up more)."""
MATCH_IOU = 0.3
"""The crop's detection must overlap the face at least this much to replace it."""


@dataclass(frozen=True)
class _Crop:
    """Where face ``face`` of frame ``frame`` was cropped: the crop's top-left pixel in the plate and
    the scale from plate pixels to the detector's."""

    frame: int
    face: int
    x0: float
    y0: float
    scale: float


def refine_faces(
    detector: Any, views: Sequence[np.ndarray], found: Sequence[Sequence[Face]], *, batch_size: int
) -> list[list[Face]]:
    """``found`` (the faces the letterboxed frames ``views`` gave) with each face the letterbox showed
    small detected again on a crop at the plate's resolution: its box and landmarks from there."""
    width_in, height_in = input_size(detector)
    side_in = min(width_in, height_in)
    crops: list[np.ndarray] = []
    where: list[_Crop] = []
    for i, (view, faces) in enumerate(zip(views, found, strict=True)):
        height, width = view.shape[:2]
        letterbox = min(width_in / width, height_in / height)
        if letterbox > LETTERBOX:
            continue
        for j, face in enumerate(faces):
            x1, y1, x2, y2 = (float(v) for v in face.box)
            side = max(MARGIN * max(x2 - x1, y2 - y1), side_in / MAX_ZOOM)
            scale = side_in / side
            if scale < GAIN * letterbox:
                continue
            x0, y0, whole = int((x1 + x2 - side) // 2), int((y1 + y2 - side) // 2), int(np.ceil(side))
            crops.append(_crop(view, x0, y0, whole, side_in))
            where.append(_Crop(i, j, float(x0), float(y0), side_in / whole))
    out = [list(faces) for faces in found]
    for start in range(0, len(crops), batch_size):
        batch = crops[start : start + batch_size]
        for crop, detections in zip(
            where[start : start + batch_size], detector.detect_batch(batch), strict=True
        ):
            face = out[crop.frame][crop.face]
            better = _match(face, detections, crop)
            if better is not None:
                out[crop.frame][crop.face] = better
    return out


def _crop(view: np.ndarray, x0: int, y0: int, side: int, size: int) -> np.ndarray:
    """The square ``[x0, x0 + side) x [y0, y0 + side)`` of ``view`` (black outside the frame), resized to
    ``size`` x ``size`` (area-averaged when it shrinks)."""
    height, width = view.shape[:2]
    square = np.zeros((side, side, *view.shape[2:]), view.dtype)
    a, b = max(0, -y0), max(0, -x0)
    ys, xs = slice(max(0, y0), min(height, y0 + side)), slice(max(0, x0), min(width, x0 + side))
    part = view[ys, xs]
    square[a : a + part.shape[0], b : b + part.shape[1]] = part
    interpolation = cv2.INTER_AREA if side > size else cv2.INTER_LINEAR
    return cv2.resize(square, (size, size), interpolation=interpolation)


def _match(face: Face, detections: Sequence[Face], crop: _Crop) -> Face | None:
    """The crop's detection of ``face`` mapped back to the plate, None when none overlaps it enough."""
    best, best_iou = None, MATCH_IOU
    origin = np.array([crop.x0, crop.y0], np.float64)
    for d in detections:
        # Pixel centres as cv2.resize maps them: crop pixel p is plate pixel (p + 0.5) / scale - 0.5.
        corners = (np.asarray(d.box, np.float64).reshape(2, 2) + 0.5) / crop.scale - 0.5 + origin
        box = corners.reshape(4).astype(np.float32)
        iou = float(box_iou(box, np.asarray(face.box, np.float32))[0, 0])
        if iou >= best_iou:
            marks = (np.asarray(d.landmarks, np.float64) + 0.5) / crop.scale - 0.5 + origin
            best, best_iou = Face(box, marks.astype(np.float32), face.score, face.embedding), iou
    return best
