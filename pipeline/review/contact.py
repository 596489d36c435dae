"""A shot's contact sheet: one row per QC flag (the worst flagged frame, before and after), labelled.

A shot without flags gets a sheet that says "no QC flags" over a few evenly spaced frames.
PNG, drawn with the burn-ins' font (:mod:`pipeline.review.text`).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np
from PIL import Image

from pipeline.qc.records import Flag
from pipeline.review.layout import to_8bit
from pipeline.review.text import Label, draw_labels

CELL_WIDTH = 320
"""Width of each before/after picture on the sheet."""
GAP = 8
TEXT = 14
HEADER = 2 * TEXT + 3 * GAP
"""Height of the sheet's title strip."""
LABEL = TEXT + 2 * GAP
"""Height of the label above each row."""
NO_FLAGS = "no QC flags"
MAX_ROWS = 24
"""Flags on one sheet at most (the worst); the report and summary.json list every flag."""
EVEN_FRAMES = 4
"""Frames on the sheet of a shot without flags."""


@dataclass(frozen=True, eq=False)
class SheetRow:
    """One row of the sheet: its label and the frame before and after (any size, RGB)."""

    label: str
    before: np.ndarray
    after: np.ndarray


def flag_frames(flags: Sequence[Flag]) -> list[tuple[Flag, int]]:
    """Each flag (the :data:`MAX_ROWS` worst) with the frame number it is shown by: its worst frame
    (``extra["peak"]``, :func:`pipeline.qc.marks.merge_marks`) where QC recorded one, else its first."""
    out = []
    for flag in sorted(flags, key=lambda f: -f.severity)[:MAX_ROWS]:
        peak = flag.extra.get("peak")
        frame = int(peak) if isinstance(peak, int) and flag.first <= peak <= flag.last else flag.first
        out.append((flag, frame))
    return out


def flag_label(flag: Flag, frame: int) -> str:
    track = "" if flag.track is None else f"  track {flag.track}"
    return f"{flag.reason}{track}  frame {frame}"


def even_frames(numbers: Sequence[int], count: int = EVEN_FRAMES) -> list[int]:
    """``count`` frame numbers evenly spaced over ``numbers`` (all of them when fewer)."""
    if len(numbers) <= count:
        return list(numbers)
    return [numbers[round(i * (len(numbers) - 1) / (count - 1))] for i in range(count)]


def cell_height(width: int, height: int) -> int:
    """The height of a picture of a ``width`` x ``height`` shot on the sheet."""
    return max(2, round(CELL_WIDTH * height / width))


def sheet_size(rows: int, cell: int) -> tuple[int, int]:
    """(width, height) of a sheet of ``rows`` rows of pictures ``cell`` pixels tall."""
    return 2 * CELL_WIDTH + 3 * GAP, HEADER + rows * (LABEL + cell) + GAP


def contact_sheet(title: str, rows: Sequence[SheetRow], *, note: str | None = None) -> bytes:
    """The sheet as PNG bytes: ``title`` (and ``note``) on top, then each row's label and pictures."""
    first = rows[0].after if rows else np.zeros((9, 16, 3), np.uint8)
    cell = cell_height(first.shape[1], first.shape[0])
    width, height = sheet_size(len(rows), cell)
    sheet = np.full((height, width, 3), 32, np.uint8)
    labels = [Label(title, GAP, GAP, "la")]
    if note is not None:
        labels.append(Label(note, GAP, 2 * GAP + TEXT, "la"))
    for i, row in enumerate(rows):
        top = HEADER + i * (LABEL + cell)
        labels.append(Label(row.label, GAP, top + GAP, "la"))
        for j, picture in enumerate((row.before, row.after)):
            x = GAP + j * (CELL_WIDTH + GAP)
            fitted = cv2.resize(to_8bit(picture), (CELL_WIDTH, cell), interpolation=cv2.INTER_AREA)
            sheet[top + LABEL : top + LABEL + cell, x : x + CELL_WIDTH] = fitted
    sheet = draw_labels(sheet, labels, TEXT)
    buffer = io.BytesIO()
    Image.fromarray(sheet, "RGB").save(buffer, format="PNG")
    return buffer.getvalue()
