"""Inclusive frame ranges as a job spec writes them (``1009-1092``, ``1009``, ``[1009, 1092]``)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import model_validator

from pipeline.configbase import Frozen

_RANGE_RE = re.compile(r"^\s*(-?\d{1,12})\s*(?:-\s*(-?\d{1,12})\s*)?$")
MAX_FRAME_NUMBER = 10**9
"""Frame numbers lie strictly within +-10^9 (a plate numbered from 1001 at 24 fps reaches 10^9 after
a year and a half): a number past it is a typo or a hostile spec, refused before anything is read."""


class FrameRange(Frozen):
    """Inclusive frame numbers ``first``-``last`` (a sequence's own numbers; a video's from 0)."""

    first: int
    """First frame rendered, inclusive (``1009-1092`` and ``1009`` are accepted as shorthand); frame
    numbers lie strictly between -1,000,000,000 and 1,000,000,000."""
    last: int
    """Last frame rendered, inclusive."""

    @model_validator(mode="before")
    @classmethod
    def _parse(cls, data: Any) -> Any:
        if isinstance(data, int) and not isinstance(data, bool):
            return {"first": data, "last": data}
        if isinstance(data, str):
            match = _RANGE_RE.match(data)
            if not match:
                shown = data if len(data) <= 40 else data[:37] + "..."
                raise ValueError(
                    f"{shown!r} is not a frame range like 1009-1092 (numbers of at most 12 digits)"
                )
            first, last = match.group(1), match.group(2) or match.group(1)
            return {"first": int(first), "last": int(last)}
        if isinstance(data, list | tuple) and len(data) == 2:
            return {"first": data[0], "last": data[1]}
        return data

    @model_validator(mode="after")
    def _ordered(self) -> FrameRange:
        if not (-MAX_FRAME_NUMBER < self.first and self.last < MAX_FRAME_NUMBER):
            raise ValueError(f"frame numbers must lie between -{MAX_FRAME_NUMBER:,} and {MAX_FRAME_NUMBER:,}")
        if self.last < self.first:
            raise ValueError(f"last frame {self.last} is before first frame {self.first}")
        return self

    def __str__(self) -> str:
        return f"{self.first}-{self.last}"
