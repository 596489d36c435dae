"""Inclusive frame ranges as a job spec writes them (``1009-1092``, ``1009``, ``[1009, 1092]``)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import model_validator

from pipeline.configbase import Frozen

_RANGE_RE = re.compile(r"^\s*(-?\d+)\s*(?:-\s*(-?\d+)\s*)?$")


class FrameRange(Frozen):
    """Inclusive frame numbers ``first``-``last`` (a sequence's own numbers; a video's from 0)."""

    first: int
    """First frame rendered, inclusive (``1009-1092`` and ``1009`` are accepted as shorthand)."""
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
                raise ValueError(f"{data!r} is not a frame range like 1009-1092")
            first, last = match.group(1), match.group(2) or match.group(1)
            return {"first": int(first), "last": int(last)}
        if isinstance(data, list | tuple) and len(data) == 2:
            return {"first": data[0], "last": data[1]}
        return data

    @model_validator(mode="after")
    def _ordered(self) -> FrameRange:
        if self.last < self.first:
            raise ValueError(f"last frame {self.last} is before first frame {self.first}")
        return self

    def __str__(self) -> str:
        return f"{self.first}-{self.last}"
