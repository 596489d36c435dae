"""Increasing integers kept as arithmetic runs: a shot's timestamps, keyframes and frame numbers.

A constant-rate video of 14,400 frames has 14,400 timestamps one frame duration apart, and an
intra-only one (ProRes, DNxHR, an image sequence) a keyframe at every frame: as tuples of Python
ints that is about a megabyte per shot, which a driver holding a feature film's 300 shots keeps for
the whole job.  :class:`IntRuns` keeps them as runs of equal steps, one run for such a shot, and reads
like the tuple it was made of (indexing, slicing, iterating, comparing equal to it).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np


@dataclass(frozen=True, eq=False)
class IntRuns(Sequence[int]):
    """A sequence of integers as runs ``(index of its first item, first value, step, count)``.

    Made by :meth:`of`, which cuts the sequence into the fewest runs from the left, so two equal
    sequences have equal runs.  Equal to any sequence of the same integers (a tuple or list too);
    its hash is that of its runs (do not mix it with tuples as keys of one mapping)."""

    runs: tuple[tuple[int, int, int, int], ...]

    @classmethod
    def of(cls, values: Iterable[int]) -> IntRuns:
        """The runs of ``values`` (any integers; :meth:`position` wants them increasing)."""
        if isinstance(values, IntRuns):
            return values
        items = [int(v) for v in values]
        runs: list[tuple[int, int, int, int]] = []
        i, n = 0, len(items)
        while i < n:
            step = items[i + 1] - items[i] if i + 1 < n else 1
            j = i + 1
            while j < n and items[j] - items[j - 1] == step:
                j += 1
            runs.append((i, items[i], step, j - i))
            i = j
        return cls(tuple(runs))

    def __len__(self) -> int:
        if not self.runs:
            return 0
        start, _, _, count = self.runs[-1]
        return start + count

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[int, ...]: ...
    def __getitem__(self, index: int | slice) -> int | tuple[int, ...]:
        if isinstance(index, slice):
            start, stop, stride = index.indices(len(self))
            if stride != 1:
                return tuple(self[i] for i in range(start, stop, stride))
            return tuple(self._between(start, stop))
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("IntRuns index out of range")
        start, first, step, _ = self.runs[bisect.bisect_right(self.runs, index, key=_start) - 1]
        return first + step * (index - start)

    def _between(self, a: int, b: int) -> Iterator[int]:
        """Items ``[a, b)`` (``0 <= a``, ``b <= len``), run by run."""
        if a >= b:
            return
        k = bisect.bisect_right(self.runs, a, key=_start) - 1
        for start, first, step, count in self.runs[k:]:
            if start >= b:
                break
            lo, hi = max(a, start) - start, min(b, start + count) - start
            yield from range(first + step * lo, first + step * hi, step) if step else [first] * (hi - lo)

    def __iter__(self) -> Iterator[int]:
        return self._between(0, len(self))

    def __reversed__(self) -> Iterator[int]:
        return reversed(tuple(self))

    def __contains__(self, value: object) -> bool:
        return isinstance(value, int) and self.position(value) is not None

    def position(self, value: int) -> int | None:
        """Where ``value`` is (its index), None when it is not one of these (the items increasing)."""
        k = bisect.bisect_right(self.runs, value, key=_first) - 1
        if k < 0:
            return None
        start, first, step, count = self.runs[k]
        offset, left = divmod(value - first, step) if step else (0, value - first)
        return start + offset if left == 0 and offset < count else None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, IntRuns):
            return self.runs == other.runs
        if isinstance(other, tuple | list):
            return len(other) == len(self) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.runs)

    def __repr__(self) -> str:
        if len(self) <= 8:
            return f"IntRuns({tuple(self)!r})"
        return f"IntRuns({len(self)} items in {len(self.runs)} run(s), {self[0]}..{self[-1]})"

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        parts = [first + step * np.arange(count, dtype=np.int64) for _, first, step, count in self.runs]
        out = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        return out if dtype is None else out.astype(dtype)


def _start(run: tuple[int, int, int, int]) -> int:
    return run[0]


def _first(run: tuple[int, int, int, int]) -> int:
    return run[1]
