"""A chunk's detections as float64 arrays, and the box overlap the tracker computes on them.

The tracker (:mod:`pipeline.tracking.tracker`) converts a chunk's faces once, then
works frame by frame on these arrays.  Every helper here does the same float64
arithmetic, in the same order, as the per-face code it replaced, so track ids and
states are bit-identical (checked in ``tests/pipeline/tracking/test_vectorised.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.geometry.types import Face


def by_shape(
    embeddings: Sequence[np.ndarray | None], counts: Sequence[int] | None = None
) -> dict[tuple[int, ...], list[int]]:
    """Indices of the embeddings that are present (and counted), grouped by shape, in order."""
    out: dict[tuple[int, ...], list[int]] = {}
    for i, e in enumerate(embeddings):
        if e is not None and (counts is None or counts[i] > 0):
            out.setdefault(e.shape, []).append(i)
    return out


@dataclass(frozen=True)
class FrameArrays:
    """One frame's detections as arrays (float64: exact copies of the detector's float32)."""

    boxes: np.ndarray  # (n, 4)
    landmarks: np.ndarray  # (n, 5, 2)
    embeddings: list[np.ndarray | None]
    matrix: np.ndarray | None = None
    """(n, D): the embeddings stacked, when every face has one and all are (D,) (the usual case)."""


def chunk_arrays(faces_per_frame: Sequence[Sequence[Face]]) -> list[FrameArrays]:
    """Every frame of a chunk as arrays, converted once for the whole chunk."""
    flat = [f for faces in faces_per_frame for f in faces]
    boxes = np.array([f.box for f in flat], dtype=np.float64).reshape(-1, 4)
    landmarks = np.array([f.landmarks for f in flat], dtype=np.float64).reshape(-1, 5, 2)
    matrix: np.ndarray | None = None
    embeddings: list[np.ndarray | None]
    shapes = {None if f.embedding is None else f.embedding.shape for f in flat}
    only = next(iter(shapes)) if len(shapes) == 1 else None
    if only is not None and len(only) == 1:
        matrix = np.array([f.embedding for f in flat], dtype=np.float64)
        embeddings = list(matrix)
    else:
        embeddings = [None if f.embedding is None else np.asarray(f.embedding, np.float64) for f in flat]
    out = []
    start = 0
    for faces in faces_per_frame:
        end = start + len(faces)
        rows = None if matrix is None else matrix[start:end]
        out.append(FrameArrays(boxes[start:end], landmarks[start:end], embeddings[start:end], rows))
        start = end
    return out


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """:func:`box_iou` of (N, 4) and (M, 4) float64 boxes: the same arithmetic, fewer numpy calls."""
    zero = 0.0
    ax0, ay0, ax1, ay1 = a[:, 0, None], a[:, 1, None], a[:, 2, None], a[:, 3, None]
    bx0, by0, bx1, by1 = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    inter = np.maximum(np.minimum(ax1, bx1) - np.maximum(ax0, bx0), zero) * np.maximum(
        np.minimum(ay1, by1) - np.maximum(ay0, by0), zero
    )
    union = (
        (np.maximum(ax1 - ax0, zero) * np.maximum(ay1 - ay0, zero))
        + (np.maximum(bx1 - bx0, zero) * np.maximum(by1 - by0, zero))
        - inter
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / union, 0.0)


def iou_pair(a: Sequence[float], b: Sequence[float]) -> float:
    """:func:`box_iou` of two boxes in plain floats: the same float64 arithmetic, in the same order."""
    a0, a1, a2, a3 = a
    b0, b1, b2, b3 = b
    inter = max(min(a2, b2) - max(a0, b0), 0.0) * max(min(a3, b3) - max(a1, b1), 0.0)
    union = max(a2 - a0, 0.0) * max(a3 - a1, 0.0) + max(b2 - b0, 0.0) * max(b3 - b1, 0.0) - inter
    return inter / union if union > 0 else 0.0
