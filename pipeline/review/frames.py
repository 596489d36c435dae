"""One review frame as an actor makes it: the layout of plate and output, and the burn-ins it knows.

The shot's name (top left), the source frame number and timecode (bottom left) and, by each
face box in the output's panel, the identity of its track.  The QC flags (bottom right) are
concluded later, by the driver, and burnt in by :mod:`pipeline.review.flags`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from pipeline.review.layout import Layout, compose, output_panel, review_size
from pipeline.review.text import Label, draw_labels, label_box, text_size
from pipeline.video.timecode import add_frames

START_TIMECODE = "00:00:00:00"
"""The timecode of frame 0 of a source that states none."""


@dataclass(frozen=True)
class ReviewLook:
    """How a shot's review frames look: the source size, the layout, the review size, the shot name."""

    shot: str
    width: int
    height: int
    layout: Layout
    size: tuple[int, int]

    @classmethod
    def of(cls, shot: str, width: int, height: int, layout: Layout, max_width: int) -> ReviewLook:
        return cls(shot, width, height, layout, review_size(width, height, layout, max_width))

    @property
    def text(self) -> int:
        """The burn-ins' font size."""
        return text_size(self.size[1])

    @property
    def margin(self) -> int:
        return max(2, self.text // 2)


@dataclass(frozen=True)
class FrameStamp:
    """What is burnt into one frame: its number, its timecode, and (box, identity) of each face."""

    number: int
    timecode: str
    faces: Sequence[tuple[np.ndarray, str]] = ()


def timecode_of(start: str | None, position: int, rate: Fraction) -> str:
    """The timecode of source position ``position`` (``start``: the source's first frame's)."""
    try:
        return add_frames(start or START_TIMECODE, position, rate if rate > 0 else Fraction(24))
    except ValueError:
        return add_frames(START_TIMECODE, position, Fraction(24))


def stamp_label(look: ReviewLook, stamp: FrameStamp) -> Label:
    """The frame number and timecode, bottom left (fixed width, so every frame's box is the same)."""
    return Label(f"{stamp.number:07d}  {stamp.timecode}", look.margin, look.size[1] - look.margin, "ld")


def stamp_box(look: ReviewLook) -> tuple[int, int, int, int]:
    """(left, top, right, bottom) of the frame number's box in every frame of ``look``."""
    return label_box(stamp_label(look, FrameStamp(0, START_TIMECODE)), look.text)


def review_frame(plate: np.ndarray, output: np.ndarray, look: ReviewLook, stamp: FrameStamp) -> np.ndarray:
    """The review frame (uint8 RGB, ``look.size``) of a plate frame and its output, burnt in."""
    frame = compose(plate, output, look.layout, look.size)
    panel = output_panel(look.width, look.height, look.layout, look.size)
    labels = [Label(look.shot, look.margin, look.margin, "la"), stamp_label(look, stamp)]
    for box, identity in stamp.faces:
        x = panel.x + float(box[0]) * panel.scale
        y = panel.y + float(box[1]) * panel.scale
        labels.append(Label(identity, max(0.0, x), max(float(look.text + look.margin), y), "ld"))
    return draw_labels(frame, labels, look.text)
