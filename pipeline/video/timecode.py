"""SMPTE timecode arithmetic: ``HH:MM:SS:FF`` plus a number of frames.

The frame field counts at the nominal rate (``round(rate)``: 24 for 23.976, 30
for 29.97).  A ``;`` (or ``.``) before the frames marks drop-frame timecode,
valid only at 29.97 and 59.94 (and their multiples of 30000/1001): frame
numbers 0-1 (0-3 at 59.94) are skipped at the start of every minute except each
tenth, so the timecode keeps pace with the wall clock.  The separator style of
the input is kept.  Timecode wraps at 24 hours, as FFmpeg's does.
"""

from __future__ import annotations

import re
from fractions import Fraction

_TIMECODE_RE = re.compile(r"^(\d{1,2}):(\d{2}):(\d{2})([:;.])(\d{2,3})$")


def _drop_per_minute(rate: Fraction, nominal: int) -> int:
    """Frame numbers dropped per minute (0 for non-drop rates); ValueError if drop cannot apply."""
    if nominal % 30 or rate != Fraction(nominal * 1000, 1001):
        raise ValueError(f"drop-frame timecode needs 29.97 or 59.94 fps, not {float(rate):.4g}")
    return 2 * nominal // 30


def add_frames(tc: str, frames: int, rate: Fraction) -> str:
    """The timecode ``frames`` frames after ``tc`` (before it when negative) at ``rate`` fps.

    Raises ValueError for a malformed timecode, a frame field at or above the
    nominal rate, a drop-frame timecode at another rate than 29.97/59.94, or a
    drop-frame label that does not exist (``00:01:00;00``).
    """
    match = _TIMECODE_RE.match(tc.strip())
    if match is None:
        raise ValueError(f"timecode {tc!r} is not HH:MM:SS:FF")
    if rate <= 0:
        raise ValueError(f"frame rate must be positive, got {rate}")
    hours, minutes, seconds, sep, ff = match.groups()
    h, m, s, f = int(hours), int(minutes), int(seconds), int(ff)
    nominal = max(1, round(rate))
    if m >= 60 or s >= 60 or f >= nominal:
        raise ValueError(f"timecode {tc!r} out of range at {nominal} fps")
    drop = _drop_per_minute(rate, nominal) if sep in ";." else 0
    if drop and f < drop and s == 0 and m % 10:
        raise ValueError(f"timecode {tc!r} does not exist in drop-frame counting")

    total_minutes = 60 * h + m
    number = (3600 * h + 60 * m + s) * nominal + f - drop * (total_minutes - total_minutes // 10)
    per_day = 24 * 3600 * nominal - drop * (24 * 60 - 24 * 6)
    number = (number + frames) % per_day

    if drop:
        per_ten_minutes = 600 * nominal - 9 * drop
        per_minute = 60 * nominal - drop
        tens, rest = divmod(number, per_ten_minutes)
        # The first minute of each ten keeps all its labels; the other nine skip `drop` each.
        skipped = 9 * drop * tens + (drop * ((rest - drop) // per_minute) if rest > drop else 0)
        number += skipped
    f = number % nominal
    total_seconds = number // nominal
    s, total_minutes = total_seconds % 60, total_seconds // 60
    m, h = total_minutes % 60, total_minutes // 60
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{f:02d}"


def smpte_packed(tc: str) -> int:
    """``tc`` as the 32-bit BCD word of an EXR/DPX ``smpte:TimeCode`` (SMPTE 12M: hours in the top
    byte, frames in the lowest; bit 6 of the frames byte set for drop-frame).  ValueError for a
    malformed timecode."""
    match = _TIMECODE_RE.match(tc.strip())
    if match is None:
        raise ValueError(f"timecode {tc!r} is not HH:MM:SS:FF")
    hours, minutes, seconds, sep, ff = match.groups()
    word = 0
    for value in (int(hours), int(minutes), int(seconds), int(ff) % 100):
        word = (word << 8) | ((value // 10) << 4) | (value % 10)
    return word | (0x40 if sep in ";." else 0)
