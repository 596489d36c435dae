"""Landmarks of a face a fix boxed by hand (``fixes: - box: ...``), found by the pack's detector.

The plan places the five landmarks of a fix's box at the template's proportions
(:func:`pipeline.tracking.fixes.template_landmarks`); at render time, with the frame's pixels at
hand, :func:`refine_box_tasks` runs the detector on a crop around each such box and takes the
landmarks of the face it finds there (the one whose landmarks lie inside the box, most overlapping
it).  Where it finds none, the template's landmarks stay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from pipeline.faces.analyze import to_uint8
from pipeline.geometry.boxes import box_iou
from pipeline.geometry.types import FaceTask
from pipeline.models.roles import Detector

FIX_BOX = "fix_box"
"""The ``extra`` key of the tasks a fix's box made."""

MARGIN = 0.5
"""The crop around a box: this fraction of its size on each side."""


def refine_box_tasks(tasks: Sequence[FaceTask], rgb: np.ndarray, detector: Detector) -> list[FaceTask]:
    """``tasks`` of one frame, each made by a fix's box with the landmarks the detector finds inside it."""
    return [_refined(t, rgb, detector) if t.extra.get(FIX_BOX) else t for t in tasks]


def _refined(task: FaceTask, rgb: np.ndarray, detector: Detector) -> FaceTask:
    height, width = rgb.shape[:2]
    x0, y0, x1, y1 = (float(v) for v in task.box)
    mx, my = (x1 - x0) * MARGIN, (y1 - y0) * MARGIN
    cx0, cy0 = max(0, int(x0 - mx)), max(0, int(y0 - my))
    cx1, cy1 = min(width, int(np.ceil(x1 + mx))), min(height, int(np.ceil(y1 + my)))
    if cx1 - cx0 < 8 or cy1 - cy0 < 8:
        return task
    crop = np.ascontiguousarray(to_uint8(rgb[cy0:cy1, cx0:cx1, :3]))
    best: tuple[float, np.ndarray] | None = None
    for face in detector.detect(crop):
        landmarks = np.asarray(face.landmarks, np.float32) + np.array([cx0, cy0], np.float32)
        inside = (
            (landmarks[:, 0] >= x0)
            & (landmarks[:, 0] <= x1)
            & (landmarks[:, 1] >= y0)
            & (landmarks[:, 1] <= y1)
        )
        if not inside.all():
            continue
        box = np.asarray(face.box, np.float32) + np.array([cx0, cy0, cx0, cy0], np.float32)
        overlap = float(box_iou(box, task.box)[0, 0])
        if best is None or overlap > best[0]:
            best = (overlap, landmarks)
    if best is None:
        return task
    return replace(task, landmarks=best[1], extra={**task.extra, "detected": True})
