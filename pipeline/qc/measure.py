"""What a render actor measures of each face it replaced, with the pixels it already holds.

Per replaced face per frame (:class:`~pipeline.qc.records.FaceMeasure`): the face box's
mean colours on a coarse grid in the output and in the plate (the driver compares them
frame to frame for flicker), the seam (gradient across the matte's edge in the output
over the plate's there), the mean matte in the box, and on every ``identity_every``-th
frame the output face's cosine to its identity in the recognizer's space (one batched
recognizer call per chunk).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import cv2
import numpy as np

from pipeline.faces.analyze import to_uint8
from pipeline.geometry.align import warp_crops
from pipeline.geometry.types import FaceTask
from pipeline.qc.records import GRID, FaceMeasure

EDGE_LOW, EDGE_HIGH = 0.1, 0.9
"""The matte's edge band: where it is neither plate nor face."""


def _box(task: FaceTask, shape: tuple[int, ...]) -> tuple[int, int, int, int] | None:
    height, width = shape[:2]
    x1, y1, x2, y2 = (float(v) for v in task.box)
    x0, y0 = max(0, int(np.floor(x1))), max(0, int(np.floor(y1)))
    x1i, y1i = min(width, int(np.ceil(x2))), min(height, int(np.ceil(y2)))
    if x1i - x0 < GRID or y1i - y0 < GRID:
        return None
    return x0, y0, x1i, y1i


def _grid(region: np.ndarray, top: float) -> tuple[float, ...]:
    small = cv2.resize(region.astype(np.float32), (GRID, GRID), interpolation=cv2.INTER_AREA)
    return tuple(round(float(v), 5) for v in (small / top).reshape(-1))


def _gradient(region: np.ndarray) -> np.ndarray:
    grey = cv2.cvtColor(np.ascontiguousarray(region), cv2.COLOR_RGB2GRAY)
    gx = cv2.Sobel(grey, cv2.CV_32F, 1, 0, ksize=3)
    gy = cv2.Sobel(grey, cv2.CV_32F, 0, 1, ksize=3)
    return cv2.magnitude(gx, gy)


def seam_ratio(out: np.ndarray, plate: np.ndarray, matte: np.ndarray) -> float:
    """Mean gradient of the output over the plate's along the matte's edge band (1.0 without one)."""
    band = (matte > EDGE_LOW) & (matte < EDGE_HIGH)
    if band.sum() < 8:
        return 1.0
    top = float(np.iinfo(out.dtype).max) if np.issubdtype(out.dtype, np.integer) else 1.0
    floor = 0.02 * top  # a flat plate must not turn noise into a seam
    return float((_gradient(out)[band].mean() + floor) / (_gradient(plate)[band].mean() + floor))


def measure_frame(
    frame: int,
    plate: np.ndarray,
    out: np.ndarray,
    matte: np.ndarray | None,
    tasks: Sequence[FaceTask],
) -> list[FaceMeasure]:
    """One measure per task of the frame (similarity left None: see :func:`add_identity`)."""
    top = float(np.iinfo(out.dtype).max) if np.issubdtype(out.dtype, np.integer) else 1.0
    measures = []
    for task in tasks:
        box = _box(task, out.shape)
        if box is None:
            continue
        x0, y0, x1, y1 = box
        # the seam is looked for around the box (the matte's edge lies at and beyond it)
        mx, my = (x1 - x0) // 4, (y1 - y0) // 4
        gx0, gy0 = max(0, x0 - mx), max(0, y0 - my)
        gx1, gy1 = min(out.shape[1], x1 + mx), min(out.shape[0], y1 + my)
        area = matte[gy0:gy1, gx0:gx1] if matte is not None else None
        measures.append(
            FaceMeasure(
                frame=frame,
                track=int(task.track_id),
                identity=task.identity,
                similarity_after=None,
                out_grid=_grid(out[y0:y1, x0:x1], top),
                plate_grid=_grid(plate[y0:y1, x0:x1], top),
                seam=1.0
                if area is None
                else seam_ratio(out[gy0:gy1, gx0:gx1], plate[gy0:gy1, gx0:gx1], area),
                matte=0.0 if matte is None else float(matte[y0:y1, x0:x1].mean()),
            )
        )
    return measures


def add_identity(
    measures: list[FaceMeasure],
    outputs: Mapping[int, np.ndarray],
    tasks: Mapping[int, Sequence[FaceTask]],
    *,
    every: int,
    embed: Callable[[np.ndarray], np.ndarray],
    crop_size: int,
    references: Mapping[str, np.ndarray],
) -> list[FaceMeasure]:
    """``measures`` with ``similarity_after`` on frames whose index is a multiple of ``every``.

    ``outputs``/``tasks`` by frame index; ``embed`` is the recognizer's ``embed_aligned``
    (ArcFace-aligned uint8 crops -> L2-normalised rows); one call for the whole chunk.
    """
    import dataclasses

    wanted = [k for k, m in enumerate(measures) if m.frame % every == 0 and m.identity in references]
    if not wanted:
        return measures
    crops = []
    for k in wanted:
        m = measures[k]
        task = next(t for t in tasks[m.frame] if int(t.track_id) == m.track)
        crops.append(warp_crops(to_uint8(outputs[m.frame]), [task.landmarks], crop_size, "arcface")[0][0])
    vectors = embed(np.stack(crops))
    out = list(measures)
    for k, vector in zip(wanted, vectors, strict=True):
        reference = references[measures[k].identity]
        cosine = float(
            np.dot(vector, reference) / (np.linalg.norm(vector) * np.linalg.norm(reference) + 1e-12)
        )
        out[k] = dataclasses.replace(measures[k], similarity_after=round(cosine, 5))
    return out
