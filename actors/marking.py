"""Marks put on rendered frames before encoding, and a record of the frames that got the watermark."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import cast

import numpy as np

from actors.results import ChunkWatermark
from pipeline.geometry.types import FaceTask
from pipeline.provenance.config import WatermarkConfig


def frame_ranges(numbers: Sequence[int]) -> list[list[int]]:
    """Sorted frame numbers as inclusive ``[first, last]`` runs of consecutive numbers."""
    runs: list[list[int]] = []
    for n in sorted(set(numbers)):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return runs


class FrameMarker:
    """``(position, rgb, tasks) -> rgb``: the invisible watermark in the replaced faces' boxes, then
    the review label, as configured; notes the frames the watermark went into (``record``)."""

    def __init__(
        self,
        watermark: WatermarkConfig | None,
        payload: int | None,
        review_label: bool,
        frame_number: Callable[[int], int],
    ) -> None:
        self.watermark = watermark if payload is not None else None
        self.payload = payload
        self.review_label = review_label
        self.frame_number = frame_number
        self.marked: list[int] = []
        """Source frame numbers (``VideoInfo.frame_number``) that got the watermark."""
        self.replaced: list[int] = []
        """Source frame numbers whose faces were replaced (AI-modified), marked or not."""
        self.seconds = 0.0
        """Time spent marking (the watermark and the label)."""

    def __call__(self, position: int, rgb: np.ndarray, tasks: Sequence[FaceTask]) -> np.ndarray:
        if tasks:
            self.replaced.append(self.frame_number(position))
        if self.watermark is None and not self.review_label:
            return rgb
        started = time.perf_counter()
        rgb = self._mark(rgb, tasks, position)
        self.seconds += time.perf_counter() - started
        return rgb

    def _mark(self, rgb: np.ndarray, tasks: Sequence[FaceTask], position: int) -> np.ndarray:
        from pipeline.provenance.watermark import blocks_inside, embed, label

        if self.watermark is not None and self.payload is not None and tasks:
            boxes = cast(list[Sequence[float]], [task.box for task in tasks])  # (4,) arrays of x1, y1, x2, y2
            if blocks_inside(boxes, rgb.shape[0], rgb.shape[1]):  # a face too small for one block gets none
                rgb = embed(rgb, boxes, self.payload, self.watermark)
                self.marked.append(self.frame_number(position))
        if self.review_label:
            rgb = label(rgb)
        return rgb

    def replaced_runs(self) -> tuple[tuple[int, int], ...]:
        """Runs ``(first, last)`` of the source frame numbers whose faces were replaced."""
        return tuple((first, last) for first, last in frame_ranges(self.replaced))

    def record(self) -> ChunkWatermark | None:
        """What the chunk's watermark was: payload, step and the marked frames' runs (None: no watermark)."""
        if self.watermark is None or self.payload is None:
            return None
        return ChunkWatermark(
            payload=f"{self.payload:08x}",
            step=self.watermark.step,
            frames=tuple((first, last) for first, last in frame_ranges(self.marked)),
        )
