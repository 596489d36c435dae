"""The contact sheet: a labelled before/after row per flag, or a note and evenly spaced frames."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from pipeline.qc.records import Flag
from pipeline.review.contact import (
    CELL_WIDTH,
    HEADER,
    LABEL,
    NO_FLAGS,
    SheetRow,
    contact_sheet,
    even_frames,
    flag_frames,
    flag_label,
    sheet_size,
)


def _flag(first: int, last: int, peak: int | None, severity: float = 0.5) -> Flag:
    extra = {} if peak is None else {"peak": peak}
    return Flag("sh010", first, last, 1, "low_identity", severity, 0.2, 0.3, extra=extra)


def test_each_flag_is_shown_by_its_worst_frame_worst_flag_first() -> None:
    flags = [_flag(10, 20, 14, 0.4), _flag(30, 31, None, 0.9)]
    shown = flag_frames(flags)
    assert [n for _, n in shown] == [30, 14]
    assert flag_label(*shown[1]) == "low_identity  track 1  frame 14"


def test_even_frames() -> None:
    assert even_frames(list(range(1001, 1101))) == [1001, 1034, 1067, 1100]
    assert even_frames([5, 6]) == [5, 6]


def test_the_sheet_is_a_png_of_its_rows() -> None:
    before, after = np.zeros((90, 160, 3), np.uint8), np.full((90, 160, 3), 255, np.uint8)
    rows = [SheetRow("low_identity  track 1  frame 14", before, after)] * 3
    sheet = Image.open(io.BytesIO(contact_sheet("sh010", rows)))
    assert sheet.format == "PNG"
    assert sheet.size == sheet_size(3, 180) == (2 * CELL_WIDTH + 24, HEADER + 3 * (LABEL + 180) + 8)
    pixels = np.asarray(sheet.convert("RGB"))
    top = HEADER + LABEL + 40
    assert (pixels[top, 8 + 10] == 0).all() and (pixels[top, 8 + CELL_WIDTH + 8 + 10] == 255).all()
    label = pixels[HEADER + 4 : HEADER + LABEL - 4, 8 : 8 + CELL_WIDTH]
    assert (label == 255).any()  # the label is drawn


def test_a_sheet_without_flags_says_so() -> None:
    rows = [
        SheetRow(f"frame {n}", np.zeros((90, 160, 3), np.uint8), np.zeros((90, 160, 3), np.uint8))
        for n in range(4)
    ]
    noted = np.asarray(Image.open(io.BytesIO(contact_sheet("sh010", rows, note=NO_FLAGS))).convert("RGB"))
    plain = np.asarray(Image.open(io.BytesIO(contact_sheet("sh010", rows))).convert("RGB"))
    assert noted.shape == plain.shape
    assert not np.array_equal(noted[:HEADER], plain[:HEADER]) and np.array_equal(
        noted[HEADER:], plain[HEADER:]
    )
