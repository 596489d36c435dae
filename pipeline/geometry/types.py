"""Small frozen records that flow between detection, tracking and rendering.

Conventions: frames are RGB, ``HxWx3``; coordinates are frame pixels, x right,
y down; landmarks are the five ArcFace points in insightface order (left eye,
right eye, nose tip, left mouth corner, right mouth corner, "left" as seen in
the picture).  Embeddings are L2-normalised float32 vectors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from pipeline.lora.adapter import LoadedAdapter


@dataclass(frozen=True, eq=False)
class Face:
    """One detected face in one frame."""

    box: np.ndarray  # (4,) float32: x1, y1, x2, y2
    landmarks: np.ndarray  # (5, 2) float32
    score: float
    embedding: np.ndarray | None = None  # (D,) float32, L2-normalised, recognizer space

    def __post_init__(self) -> None:
        if np.shape(self.box) != (4,):
            raise ValueError(f"Face.box must have shape (4,), got {np.shape(self.box)}")
        if np.shape(self.landmarks) != (5, 2):
            raise ValueError(f"Face.landmarks must have shape (5, 2), got {np.shape(self.landmarks)}")

    @classmethod
    def rows(
        cls,
        boxes: np.ndarray,
        landmarks: np.ndarray,
        scores: list[float],
        embeddings: list[np.ndarray | None],
    ) -> list[Face]:
        """One face per row of ``boxes`` (N, 4) and ``landmarks`` (N, 5, 2), shapes checked once."""
        if boxes.shape[1:] != (4,) or landmarks.shape[1:] != (5, 2) or not len(boxes) == len(landmarks):
            raise ValueError(f"Face.rows: boxes {boxes.shape}, landmarks {landmarks.shape}")
        out = []
        new = object.__new__
        for box, marks, score, embedding in zip(boxes, landmarks, scores, embeddings, strict=True):
            face = new(cls)
            # The fields of a frozen dataclass, stored where its own __init__ stores them (its __dict__).
            face.__dict__.update(box=box, landmarks=marks, score=score, embedding=embedding)
            out.append(face)
        return out

    @property
    def area(self) -> float:
        x1, y1, x2, y2 = (float(v) for v in self.box)
        return max(0.0, x2 - x1) * max(0.0, y2 - y1)


@dataclass(frozen=True, eq=False)
class FaceTask:
    """What to render for one face in one frame: where it is and whom it becomes."""

    track_id: int
    identity: str  # name of the source identity in the job spec
    box: np.ndarray  # (4,) float32
    landmarks: np.ndarray  # (5, 2) float32, smoothed when tracking smooths
    extra: dict = field(default_factory=dict)  # optional per-task data (e.g. dense landmarks)


@dataclass(frozen=True, eq=False)
class Identity:
    """One source person, ready for selection (embedding) and swapping (source face)."""

    name: str
    embedding: np.ndarray  # (D,) float32, L2-normalised, recognizer space
    source_rgb: np.ndarray  # HxWx3 uint8, the first image
    source_landmarks: np.ndarray  # (5, 2) float32 in source_rgb
    source_box: np.ndarray  # (4,) float32 in source_rgb
    adapter: LoadedAdapter | None = None  # swapper LoRA adapter for this person; None = base model
    prepared: Any = None
    """What one swapper's ``prepare`` made of this identity (:func:`~pipeline.faces.identity.prepared_for`); then
    ``source_rgb`` is dropped (an empty array) and renderers use this instead."""
