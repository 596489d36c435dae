"""Detection and recognition over a batch of frames."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import cv2
import numpy as np

from pipeline.faces.detectsize import DetectTiles
from pipeline.faces.embedplan import EmbedSchedule
from pipeline.faces.refine import refine_faces
from pipeline.geometry.align import warp_crops
from pipeline.geometry.types import Face

if TYPE_CHECKING:
    from pipeline.models.loader import FaceModels
    from pipeline.video.decode import Frame


def to_uint8(frame: np.ndarray) -> np.ndarray:
    """A uint8 view of a frame for the models (uint16 frames are scaled by 255/65535)."""
    if frame.dtype == np.uint8:
        return frame
    if frame.dtype != np.uint16:
        raise ValueError(f"frames must be uint8 or uint16, got {frame.dtype}")
    return cv2.convertScaleAbs(frame, alpha=255.0 / 65535.0)


ANALYSIS_STAGES = ("letterbox", "detector", "postprocess", "refine", "align", "recognizer")
"""Stages of :attr:`FaceAnalyzer.stage_seconds` besides the totals ``detect`` and ``recognize``."""


class FaceAnalyzer:
    """Detects faces and (optionally) embeds them, batching model calls across frames.

    ``stage_seconds``: ``detect`` and ``recognize`` (totals), and their parts
    ``letterbox``, ``detector``, ``postprocess`` (from the detector, when it times
    itself), ``align`` and ``recognizer``; ``embedded`` counts the faces embedded."""

    def __init__(self, models: FaceModels, *, batch_size: int = 8) -> None:
        self.models = models
        self.batch_size = batch_size
        self.stage_seconds: dict[str, float] = dict.fromkeys(("detect", "recognize", *ANALYSIS_STAGES), 0.0)
        self.embedded = 0

    def analyze(
        self,
        frames: Sequence[np.ndarray],
        *,
        embed: bool = True,
        schedule: EmbedSchedule | None = None,
        numbers: Sequence[int] | None = None,
        tiles: DetectTiles | None = None,
        refine: bool = False,
    ) -> list[list[Face]]:
        """Faces per frame (uint8 or uint16 RGB frames); ``embedding`` set when ``embed``.

        With a ``schedule`` only the faces it chooses are embedded (``numbers``: the
        frames' numbers in the shot, consecutive runs in order); the others keep None.
        ``tiles``: detection at the faces' resolution (``faces.detect_size: auto``);
        ``refine``: each face the letterbox shows small detected again at the frame's own
        resolution (``faces.refine: auto``, :mod:`pipeline.faces.refine`; its time is ``refine``)."""
        views = [to_uint8(f) for f in frames]
        started = time.perf_counter()
        detector = self.models.detector
        before = self._detector_seconds()
        found: list[list[Face]] = []
        if tiles is not None:
            found = tiles.detect(detector, views, self.batch_size, self.models.detector_sizes)
        else:
            for start in range(0, len(views), self.batch_size):
                found.extend(detector.detect_batch(views[start : start + self.batch_size]))
        if refine:
            refining = time.perf_counter()
            found = refine_faces(detector, views, found, batch_size=self.batch_size)
            self.stage_seconds["refine"] += time.perf_counter() - refining
        self.stage_seconds["detect"] += time.perf_counter() - started
        for key, seconds in self._detector_seconds().items():
            self.stage_seconds[key] += seconds - before[key]
        if not embed:
            return found

        started = time.perf_counter()
        if schedule is None:
            wanted = [[True] * len(faces) for faces in found]
        else:
            if numbers is None or len(numbers) != len(found):
                raise ValueError("an embedding schedule needs one frame number per frame")
            wanted = [schedule.choose(n, faces) for n, faces in zip(numbers, found)]
        recognizer = self.models.recognizer
        chosen_at = time.perf_counter()  # the schedule's time counts as bookkeeping
        # align the chosen faces of every frame, then one batched model call
        crops = [
            warp_crops(
                view, [f.landmarks for f, w in zip(faces, chosen) if w], recognizer.crop_size, "arcface"
            )[0]
            for view, faces, chosen in zip(views, found, wanted)
            if any(chosen)
        ]
        aligned = time.perf_counter()
        self.stage_seconds["align"] += aligned - chosen_at
        vectors = recognizer.embed_aligned(np.concatenate(crops)) if crops else np.zeros((0, 0), np.float32)
        self.stage_seconds["recognizer"] += time.perf_counter() - aligned
        self.embedded += len(vectors)
        result, k = [], 0
        for faces, chosen in zip(found, wanted):
            row = []
            for f, w in zip(faces, chosen):
                if w:
                    row.append(dataclasses.replace(f, embedding=vectors[k]))
                    k += 1
                else:
                    row.append(f)
            result.append(row)
        self.stage_seconds["recognize"] += time.perf_counter() - started
        return result

    def _detector_seconds(self) -> dict[str, float]:
        """The detectors' own stage times so far (the pack's, and any at reduced sizes)."""
        sizes = self.models.detector_sizes
        detectors = [self.models.detector, *(sizes.made() if sizes is not None else [])]
        totals = dict.fromkeys(("letterbox", "detector", "postprocess"), 0.0)
        for d in detectors:
            timed: dict[str, float] = getattr(d, "stage_seconds", None) or {}
            for key in totals:
                totals[key] += timed.get(key, 0.0)
        return totals

    def analyze_frames(
        self,
        frames: Sequence[Frame],
        schedule: EmbedSchedule | None,
        tiles: DetectTiles | None,
        *,
        refine: bool = False,
    ) -> list[list[Face]]:
        """:meth:`analyze` for decoded frames (their numbers from ``Frame.index``)."""
        return self.analyze(
            [f.rgb for f in frames],
            schedule=schedule,
            numbers=[f.index for f in frames],
            tiles=tiles,
            refine=refine,
        )
