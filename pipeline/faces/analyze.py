"""Detection and recognition over a batch of frames."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import cv2
import numpy as np

from pipeline.faces.align import warp_crops
from pipeline.faces.types import Face

if TYPE_CHECKING:
    from pipeline.models.loader import FaceModels


def to_uint8(frame: np.ndarray) -> np.ndarray:
    """A uint8 view of a frame for the models (uint16 frames are scaled by 255/65535)."""
    if frame.dtype == np.uint8:
        return frame
    if frame.dtype != np.uint16:
        raise ValueError(f"frames must be uint8 or uint16, got {frame.dtype}")
    return cv2.convertScaleAbs(frame, alpha=255.0 / 65535.0)


class FaceAnalyzer:
    """Detects faces and (optionally) embeds them, batching model calls across frames."""

    def __init__(self, models: FaceModels, *, batch_size: int = 8) -> None:
        self.models = models
        self.batch_size = batch_size
        self.stage_seconds: dict[str, float] = {"detect": 0.0, "recognize": 0.0}

    def analyze(self, frames: Sequence[np.ndarray], *, embed: bool = True) -> list[list[Face]]:
        """Faces per frame (uint8 or uint16 RGB frames); ``embedding`` set when ``embed``."""
        views = [to_uint8(f) for f in frames]
        started = time.perf_counter()
        detector = self.models.detector
        found: list[list[Face]] = []
        for start in range(0, len(views), self.batch_size):
            found.extend(detector.detect_batch(views[start : start + self.batch_size]))
        self.stage_seconds["detect"] += time.perf_counter() - started
        if not embed:
            return found

        started = time.perf_counter()
        recognizer = self.models.recognizer
        # align every face of every frame, then one batched model call
        crops = [
            warp_crops(view, [f.landmarks for f in faces], recognizer.crop_size, "arcface")[0]
            for view, faces in zip(views, found)
            if faces
        ]
        vectors = recognizer.embed_aligned(np.concatenate(crops)) if crops else np.zeros((0, 0), np.float32)
        result, k = [], 0
        for faces in found:
            result.append([dataclasses.replace(f, embedding=vectors[k + j]) for j, f in enumerate(faces)])
            k += len(faces)
        self.stage_seconds["recognize"] += time.perf_counter() - started
        return result
