"""Timecode arithmetic, non-drop and drop-frame."""

from __future__ import annotations

from fractions import Fraction

import pytest

from pipeline.video.timecode import add_frames

NTSC = Fraction(30000, 1001)
NTSC60 = Fraction(60000, 1001)


@pytest.mark.parametrize(
    ("tc", "frames", "rate", "expected"),
    [
        ("01:00:00:00", 0, Fraction(25), "01:00:00:00"),
        ("01:00:00:00", 13, Fraction(25), "01:00:00:13"),
        ("01:00:00:24", 1, Fraction(25), "01:00:01:00"),
        ("00:00:00:23", 1, Fraction(24000, 1001), "00:00:01:00"),  # 23.976 counts 24 labels, never drops
        ("00:59:59:29", 1, NTSC, "01:00:00:00"),  # ':' at 29.97 is non-drop
        ("23:59:59:24", 1, Fraction(25), "00:00:00:00"),  # wraps at 24 h
        ("00:00:00:00", -1, Fraction(25), "23:59:59:24"),
        # Drop-frame: labels ;00 and ;01 are skipped each minute but every tenth.
        ("00:00:59;29", 1, NTSC, "00:01:00;02"),
        ("00:01:00;02", -1, NTSC, "00:00:59;29"),
        ("00:09:59;29", 1, NTSC, "00:10:00;00"),
        ("00:00:00;00", 17982, NTSC, "00:10:00;00"),  # frames in ten drop-frame minutes
        ("00:00:00;00", 107892, NTSC, "01:00:00;00"),  # frames in one drop-frame hour
        ("00:00:00;00", 1800, NTSC, "00:01:00;02"),
        ("00:00:59.29", 1, NTSC, "00:01:00.02"),  # '.' is drop-frame too, and kept
        ("00:00:59;59", 1, NTSC60, "00:01:00;04"),  # 59.94 drops four labels
        ("00:00:00;00", 2 * 107892, NTSC60, "01:00:00;00"),
    ],
)
def test_add_frames(tc: str, frames: int, rate: Fraction, expected: str) -> None:
    assert add_frames(tc, frames, rate) == expected


@pytest.mark.parametrize("rate", [NTSC, NTSC60, Fraction(25)])
def test_stepping_one_frame_at_a_time_matches_one_jump(rate: Fraction) -> None:
    sep = ":" if rate == 25 else ";"
    start = f"00:08:59{sep}00"
    tc = start
    for _ in range(3 * 60 * 60):  # three minutes of 60 fps: across several minute and ten-minute marks
        tc = add_frames(tc, 1, rate)
    assert tc == add_frames(start, 3 * 60 * 60, rate)
    assert add_frames(tc, -3 * 60 * 60, rate) == start


@pytest.mark.parametrize(
    ("tc", "rate", "match"),
    [
        ("1:00:00", Fraction(25), "not HH:MM:SS:FF"),
        ("01:00:00:25", Fraction(25), "out of range"),
        ("01:60:00:00", Fraction(25), "out of range"),
        ("00:01:00;00", NTSC, "does not exist"),
        ("00:00:00;00", Fraction(25), "29.97 or 59.94"),
        ("00:00:00;00", Fraction(30), "29.97 or 59.94"),
    ],
)
def test_bad_timecodes_are_refused(tc: str, rate: Fraction, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        add_frames(tc, 1, rate)
