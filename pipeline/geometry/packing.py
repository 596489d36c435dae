"""A chunk's faces and face tasks packed into a few arrays for their trips between actors.

A crowd chunk holds thousands of :class:`~pipeline.geometry.types.FaceTask` (12 faces x 480
frames); pickled one by one (each a dataclass holding two small arrays) they cost the planner
~150 ms per chunk to serialise and the render actor as much to read back.  :func:`packed` wraps
them so that pickling writes the boxes and landmarks as two arrays and the rest as plain lists,
and unpickling gives back the same ``list[list[FaceTask]]`` (equal values, dtypes and shapes):
the receiver never sees the wrapper.  Tasks whose arrays do not share one dtype and shape are
pickled as they are.  :func:`packed_faces` does the same for an analysis's faces on their way
from the render actor to the shot's planner actor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pipeline.geometry.types import Face, FaceTask


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


class PackedFaces:
    """Faces (per frame) that pickle as arrays and unpickle as the list of lists they are."""

    def __init__(self, faces: Sequence[Sequence[Face]]) -> None:
        self.faces = faces

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        flat = [f for frame in self.faces for f in frame]
        boxes = [np.asarray(f.box) for f in flat]
        marks = [np.asarray(f.landmarks) for f in flat]
        embeddings = [f.embedding for f in flat]
        if not flat or not _uniform(boxes) or not _uniform(marks):
            return _as_they_are, ([list(frame) for frame in self.faces],)
        present = [e is not None for e in embeddings]
        stacked = [np.asarray(e) for e in embeddings if e is not None]
        packed_embeddings: Any = embeddings  # as they are, unless every one is there and alike
        if all(present) and _uniform(stacked):
            packed_embeddings = np.stack(stacked)
        return unpack_faces, (
            [len(frame) for frame in self.faces],
            np.stack(boxes),
            np.stack(marks),
            [f.score for f in flat],
            packed_embeddings,
        )


def packed_faces(faces: Sequence[Sequence[Face]]) -> PackedFaces:
    """``faces`` to hand to Ray: they arrive as a plain ``list[list[Face]]``."""
    return PackedFaces(faces)


def unpack_faces(
    counts: list[int], boxes: np.ndarray, marks: np.ndarray, scores: list[Any], embeddings: Any
) -> list[list[Face]]:
    """The faces per frame from their packed arrays (each face's arrays are rows of them)."""
    flat = Face.rows(boxes, marks, scores, list(embeddings))
    out, start = [], 0
    for n in counts:
        out.append(flat[start : start + n])
        start += n
    return out
