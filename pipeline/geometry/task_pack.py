"""A chunk's face tasks packed into a few arrays for the trip to a render actor.

A crowd chunk holds thousands of :class:`~pipeline.geometry.types.FaceTask` (12 faces x 480
frames); pickled one by one (each a dataclass holding two small arrays) they cost the planner
~150 ms per chunk to serialise and the render actor as much to read back.  :func:`packed` wraps
them so that pickling writes the boxes and landmarks as two arrays and the rest as plain lists,
and unpickling gives back the same ``list[list[FaceTask]]`` (equal values, dtypes and shapes):
the receiver never sees the wrapper.  Tasks whose arrays do not share one dtype and shape are
pickled as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pipeline.geometry.types import FaceTask


class PackedTasks:
    """``tasks`` (per frame) that pickle as arrays and unpickle as the list of lists they are."""

    def __init__(self, tasks: Sequence[Sequence[FaceTask]]) -> None:
        self.tasks = tasks

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        flat = [t for frame in self.tasks for t in frame]
        boxes = [np.asarray(t.box) for t in flat]
        marks = [np.asarray(t.landmarks) for t in flat]
        if not _uniform(boxes) or not _uniform(marks):
            return _as_they_are, ([list(frame) for frame in self.tasks],)
        return unpack_tasks, (
            [len(frame) for frame in self.tasks],
            [t.track_id for t in flat],
            [t.identity for t in flat],
            np.stack(boxes) if boxes else None,
            np.stack(marks) if marks else None,
            [t.extra for t in flat],
        )


def packed(tasks: Sequence[Sequence[FaceTask]]) -> PackedTasks:
    """``tasks`` to hand to Ray (``ray.put``, a call's argument): they arrive as a plain list."""
    return PackedTasks(tasks)


def unpack_tasks(
    counts: list[int],
    track_ids: list[int],
    identities: list[str],
    boxes: np.ndarray | None,
    marks: np.ndarray | None,
    extras: list[dict[str, Any]],
) -> list[list[FaceTask]]:
    """The tasks per frame from their packed arrays (each task's arrays are rows of them)."""
    flat = []
    if boxes is not None and marks is not None:
        rows = zip(track_ids, identities, boxes, marks, extras, strict=True)
        flat = [FaceTask(t, identity, box, lm, extra) for t, identity, box, lm, extra in rows]
    out, start = [], 0
    for n in counts:
        out.append(flat[start : start + n])
        start += n
    return out


def _as_they_are(tasks: list[list[FaceTask]]) -> list[list[FaceTask]]:
    return tasks


def _uniform(arrays: list[np.ndarray]) -> bool:
    return all(a.dtype == arrays[0].dtype and a.shape == arrays[0].shape for a in arrays)
