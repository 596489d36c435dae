"""Which detected faces the analysis pass embeds: per track, not per face per frame.

The identity decision (tracking, stitching, reference selection) needs a track's
embeddings, not every frame's.  :class:`EmbedSchedule` follows the faces of one run
of consecutive frames (one chunk, batch after batch) with a cheap box match and
embeds a face when the shot's tracker may need it:

* **start**: the first frame of the run, or a face without a match in the previous
  frame (a new face, a face back after a gap);
* **stride**: every frame whose number is a multiple of ``stride`` (absolute frame
  numbers, so every face of such a frame is embedded, whatever chunk it falls in);
* **jump**: its box overlaps its previous box by less than :data:`JUMP_IOU` (a cut,
  fast motion: the tracker's IoU test may fail and the cosine decides), or its
  landmarks moved against its box by more than :data:`JUMP_LANDMARKS` of the box
  size (a turn, an occlusion ending);
* **unsure**: another face is near it (boxes grown by :data:`NEAR_MARGIN` of their
  size overlap) in this frame or in any of the last :data:`NEAR_MEMORY` frames, or
  two faces claim the same previous face: crossing faces, where the tracker's
  assignment uses the cosine.

Every other face keeps ``embedding=None``; the tracker then associates it by IoU
alone, which is what it does anyway when one face is alone and moves smoothly.
Mode ``every_frame`` embeds every face (the behaviour before schedules).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

from pipeline.faces.config import FaceConfig
from pipeline.geometry.boxes import box_iou
from pipeline.geometry.types import Face

JUMP_IOU = 0.5
"""Below this IoU with its previous box a face is embedded (the tracker's own gate is 0.3)."""
JUMP_LANDMARKS = 0.1
"""Largest landmark move relative to the box, as a fraction of the box size."""
NEAR_MARGIN = 0.5
"""Boxes grown by this fraction of their width and height on every side count as near."""
NEAR_MEMORY = 8
"""Frames back in which two faces near each other still make a face "unsure" (longer
than the tracker's default ``max_gap_frames``: a face hidden behind another is still
a live track for that long)."""


def _grown(boxes: np.ndarray, margin: float) -> np.ndarray:
    size = boxes[:, 2:] - boxes[:, :2]
    return np.concatenate([boxes[:, :2] - margin * size, boxes[:, 2:] + margin * size], axis=1)


def _overlaps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, M) whether boxes ``a`` and ``b`` intersect (touching edges do not)."""
    return (
        (a[:, None, 0] < b[None, :, 2])
        & (b[None, :, 0] < a[:, None, 2])
        & (a[:, None, 1] < b[None, :, 3])
        & (b[None, :, 1] < a[:, None, 3])
    )


class EmbedSchedule:
    """Decides, frame after frame of one run of consecutive frames, which faces to embed."""

    def __init__(self, stride: int = 8, *, every_frame: bool = False) -> None:
        if stride < 1:
            raise ValueError(f"stride must be >= 1, got {stride}")
        self.stride = stride
        self.every_frame = every_frame
        self._previous: list[Face] | None = None
        self._previous_number: int | None = None
        self._recent: deque[np.ndarray] = deque(maxlen=NEAR_MEMORY)
        self.faces_seen = 0
        self.faces_chosen = 0

    @classmethod
    def of(cls, config: FaceConfig) -> EmbedSchedule:
        """The schedule ``config.embed`` and ``config.embed_stride`` ask for."""
        return cls(config.embed_stride, every_frame=config.embed == "every_frame")

    def choose(self, number: int, faces: Sequence[Face]) -> list[bool]:
        """Whether to embed each face of frame ``number`` (frames must come in order)."""
        chosen = self._choose(number, faces)
        boxes = np.array([f.box for f in faces], np.float64).reshape(-1, 4)
        self._previous, self._previous_number = list(faces), number
        self._recent.append(boxes)
        self.faces_seen += len(faces)
        self.faces_chosen += sum(chosen)
        return chosen

    def _choose(self, number: int, faces: Sequence[Face]) -> list[bool]:
        n = len(faces)
        previous = self._previous
        consecutive = self._previous_number is not None and number == self._previous_number + 1
        if n == 0 or self.every_frame or number % self.stride == 0 or not previous or not consecutive:
            return [True] * n
        boxes = np.array([f.box for f in faces], np.float64)
        before = np.array([f.box for f in previous], np.float64)
        iou = box_iou(boxes, before)
        best = iou.argmax(axis=1)
        chosen = [False] * n
        for i in range(n):
            j = int(best[i])
            if iou[i, j] < JUMP_IOU or int((best == j).sum()) > 1 or _landmarks_jump(faces[i], previous[j]):
                chosen[i] = True
        grown = _grown(boxes, NEAR_MARGIN)
        near_now = _overlaps(grown, _grown(boxes, NEAR_MARGIN))
        np.fill_diagonal(near_now, False)
        for k in np.flatnonzero(near_now.any(axis=1)).tolist():
            chosen[k] = True
        for past in self._recent:
            if len(past) < 2:
                continue
            crowded = _overlaps(grown, _grown(past, NEAR_MARGIN)).sum(axis=1) >= 2
            for k in np.flatnonzero(crowded).tolist():
                chosen[k] = True
        return chosen


def _landmarks_jump(face: Face, before: Face) -> bool:
    """Landmarks moved against the box by more than :data:`JUMP_LANDMARKS` of its size."""
    box, old = np.asarray(face.box, np.float64), np.asarray(before.box, np.float64)
    size = max(float(box[2] - box[0]), float(box[3] - box[1]), 1.0)
    shift = (box[:2] + box[2:] - old[:2] - old[2:]) / 2.0
    moved = np.asarray(face.landmarks, np.float64) - np.asarray(before.landmarks, np.float64) - shift
    return float(np.abs(moved).max()) > JUMP_LANDMARKS * size
