"""Burn-in text drawn with a real TrueType renderer (Pillow's ImageFont/ImageDraw).

The font is OpenImageIO's DroidSansMono, which ships with the ``OpenImageIO`` package Recast
already depends on for plates; where it is missing, Pillow's own scalable default font
(Pillow >= 10.1).  Text is white on an opaque black box: legible on any plate, and the same pixels whatever the
picture under it (a burn-in can be compared with a reference render of its text).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFont

FONT_NAME = "DroidSansMono.ttf"

Font = ImageFont.FreeTypeFont | ImageFont.ImageFont


def font_path() -> str | None:
    """The TrueType file of the burn-ins (None: not installed; Pillow's default font is used)."""
    try:
        import OpenImageIO
    except ImportError:  # pragma: no cover - a dependency of the plates
        return None
    path = os.path.join(os.path.dirname(OpenImageIO.__file__), "share", "fonts", "OpenImageIO", FONT_NAME)
    return path if os.path.isfile(path) else None


@functools.lru_cache(maxsize=16)
def font(size: int) -> Font:
    """The burn-in font at ``size`` pixels (cached: fonts are immutable)."""
    path = font_path()
    if path is not None:
        return ImageFont.truetype(path, size)
    return ImageFont.load_default(size=size)


def text_size(height: int) -> int:
    """The burn-in font size for a picture ``height`` pixels tall (at least 10 px)."""
    return max(10, round(height / 30))


@dataclass(frozen=True)
class Label:
    """A text at a place: ``anchor`` is Pillow's (``la`` top left, ``ra`` top right, ``ld`` bottom left...)."""

    text: str
    x: float
    y: float
    anchor: str = "la"


def label_box(label: Label, size: int) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of ``label``'s box, its padding included (right, bottom exclusive)."""
    left, top, right, bottom = font(size).getbbox(label.text, anchor=label.anchor)
    pad = max(1, size // 6)
    return (
        int(label.x + left) - pad,
        int(label.y + top) - pad,
        int(label.x + right) + pad + 1,
        int(label.y + bottom) + pad + 1,
    )


def draw_labels(rgb: np.ndarray, labels: Sequence[Label], size: int) -> np.ndarray:
    """``rgb`` (uint8 HxWx3) with every label drawn on its black box; a new array."""
    if not labels:
        return rgb
    image = Image.fromarray(np.ascontiguousarray(rgb), "RGB")
    draw = ImageDraw.Draw(image)
    face = font(size)
    for label in labels:
        left, top, right, bottom = label_box(label, size)
        draw.rectangle((left, top, right - 1, bottom - 1), fill=(0, 0, 0))
        draw.text((label.x, label.y), label.text, font=face, anchor=label.anchor, fill=(255, 255, 255))
    return np.asarray(image)
