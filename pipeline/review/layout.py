"""Review layouts: plate and output side by side, a wipe between them, or the output alone.

Every layout is scaled down (never up) to fit ``max_width`` and rounded to even sizes, which
4:2:0 H.264 needs.  The output's panel (:func:`output_panel`) is where face boxes land.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import cv2
import numpy as np

Layout = Literal["side_by_side", "wipe", "after"]
LAYOUTS: tuple[Layout, ...] = ("side_by_side", "wipe", "after")
WIPE_LINE = (255, 255, 255)
"""The colour of the wipe's line."""


@dataclass(frozen=True)
class Panel:
    """Where the output's picture lies in the review frame: offset and scale of source pixels."""

    x: int
    y: int
    scale: float


def _even(value: float) -> int:
    return max(2, int(value) // 2 * 2)


def review_size(width: int, height: int, layout: Layout, max_width: int) -> tuple[int, int]:
    """(width, height) of the review frame of a ``width`` x ``height`` source: even, at most ``max_width``."""
    panels = 2 if layout == "side_by_side" else 1
    scale = min(1.0, max_width / (panels * width))
    return _even(panels * width * scale), _even(height * scale)


def output_panel(width: int, height: int, layout: Layout, size: tuple[int, int]) -> Panel:
    """The output's panel of a ``size`` review frame of a ``width`` x ``height`` source."""
    panel_width = size[0] // 2 if layout == "side_by_side" else size[0]
    x = size[0] - panel_width if layout == "side_by_side" else 0
    return Panel(x=x, y=0, scale=panel_width / width)


def to_8bit(rgb: np.ndarray) -> np.ndarray:
    """``rgb`` as uint8 (16-bit frames keep their top byte; floats in 0-1 are scaled)."""
    if rgb.dtype == np.uint8:
        return rgb
    if rgb.dtype == np.uint16:
        return (rgb >> 8).astype(np.uint8)
    return np.clip(np.rint(np.asarray(rgb, np.float32) * 255.0), 0, 255).astype(np.uint8)


def _fit(rgb: np.ndarray, width: int, height: int) -> np.ndarray:
    if rgb.shape[1] == width and rgb.shape[0] == height:
        return rgb
    return cv2.resize(rgb, (width, height), interpolation=cv2.INTER_AREA)


def compose(plate: np.ndarray, output: np.ndarray, layout: Layout, size: tuple[int, int]) -> np.ndarray:
    """The review frame (uint8, ``size`` = (width, height)) of a plate frame and its output frame."""
    width, height = size
    plate8, out8 = to_8bit(plate), to_8bit(output)
    if layout == "after":
        return np.ascontiguousarray(_fit(out8, width, height))
    if layout == "side_by_side":
        half = width // 2
        frame = np.empty((height, width, 3), np.uint8)
        frame[:, :half] = _fit(plate8, half, height)
        frame[:, half:] = _fit(out8, width - half, height)
        return frame
    frame = _fit(out8, width, height).copy()
    half = width // 2
    frame[:, :half] = _fit(plate8, width, height)[:, :half]
    line = max(1, width // 400)
    frame[:, half - line // 2 - line % 2 : half + line // 2] = WIPE_LINE
    return frame
