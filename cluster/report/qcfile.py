"""A shot's QC in its own file: the per-frame series leave the driver's memory and the rewritten reports.

A shot's :class:`~pipeline.qc.analyze.ShotQC` holds numbers per analysed frame (tens of thousands of
values per series for a feature-length shot).  When the shot's QC reaches the driver,
:func:`cluster.report.cache.file_qc` writes it whole, redacted, once, to ``<work_url>/qc/<shot>.json``, draws its strip
chart once, and gives a :class:`FiledQC`: what the summary and the report show of it without the
series (flags, counts, per-track table, boundaries, the chart's text) and the file's URL.
``summary.json`` and ``report.json`` carry ``series_url`` where they carried ``series``; a reader
gets the series back with :func:`load_series`.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, overload

from pipeline.qc.records import Flag, flag_counts
from pipeline.store import storage

if TYPE_CHECKING:
    from pipeline.qc.analyze import ShotQC

QC_FOLDER = "qc"
"""The folder of the work area that holds each shot's QC file (``qc/<shot>.json``)."""


@dataclass(frozen=True)
class FrameNumbers(Sequence[int]):
    """A shot's analysed frame numbers (increasing), kept as runs of consecutive numbers: a shot of
    14,400 frames numbered one after the other is one run.  ``runs``: (index of the run's first frame,
    its number, how many frames)."""

    runs: tuple[tuple[int, int, int], ...]

    @classmethod
    def of(cls, numbers: Sequence[int]) -> FrameNumbers:
        runs: list[tuple[int, int, int]] = []
        for i, number in enumerate(numbers):
            if runs and runs[-1][1] + runs[-1][2] == number:
                start, first, count = runs[-1]
                runs[-1] = (start, first, count + 1)
            else:
                runs.append((i, int(number), 1))
        return cls(tuple(runs))

    def __len__(self) -> int:
        return self.runs[-1][0] + self.runs[-1][2] if self.runs else 0

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...
    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("frame index out of range")
        start, first, _ = self.runs[bisect.bisect_right(self.runs, (index, float("inf"))) - 1]
        return first + index - start

    def __iter__(self) -> Iterator[int]:
        for _, first, count in self.runs:
            yield from range(first, first + count)

    def position(self, number: int) -> int | None:
        """Where frame ``number`` is (its index), None when it is not one of these: a look-up among the
        runs, not a bisection through the frames one index at a time."""
        i = bisect.bisect_right(self.runs, number, key=lambda run: run[1]) - 1
        if i < 0:
            return None
        start, first, count = self.runs[i]
        return start + number - first if number < first + count else None


@dataclass(frozen=True)
class FiledQC:
    """A shot's QC as the driver keeps it once its series are in the shot's QC file (``series_url``):
    what :class:`~pipeline.qc.analyze.ShotQC` has but the series, its frame numbers as runs
    (:class:`FrameNumbers`, where thumbnails and flags are placed) and its strip chart (``chart``,
    drawn once, redacted, with the shot's fixes)."""

    shot: str
    first: int
    flags: tuple[Flag, ...]
    numbers: FrameNumbers
    tracks: dict[int, dict[str, Any]]
    boundaries: dict[int, float | None]
    series_url: str
    chart: str = field(metadata={"redacted": True})
    """The strip chart's HTML, drawn of the redacted QC: not redacted again (:class:`RedactedCopies`)."""

    @property
    def counts(self) -> dict[str, int]:
        """Number of flags per reason (every reason present, zeros included), as ``ShotQC.counts``."""
        return flag_counts(self.flags)

    def to_dict(self) -> dict[str, Any]:
        """``ShotQC.to_dict()`` with ``series_url`` in the place of ``series``."""
        return {
            "shot": self.shot,
            "first": self.first,
            "frames": len(self.numbers),
            "counts": self.counts,
            "flags": [f.to_dict() for f in self.flags],
            "series_url": self.series_url,
            "tracks": {str(k): dict(v) for k, v in sorted(self.tracks.items())},
            "boundaries": {str(k): v for k, v in sorted(self.boundaries.items())},
        }


def qc_file_url(work_url: str, shot: str) -> str:
    """Where the QC file of ``shot`` is in the work area ``work_url``."""
    return storage.join(work_url, QC_FOLDER, f"{shot}.json")


def frame_numbers(qc: ShotQC | FiledQC) -> Sequence[int]:
    """The shot's analysed frame numbers (frame ``numbers[i]`` is source position ``qc.first + i``)."""
    return qc.numbers if isinstance(qc, FiledQC) else qc.series.numbers


def load_series(qc: dict[str, Any]) -> dict[str, Any]:
    """The per-frame series of a shot's QC as ``summary.json`` or ``report.json`` has it (``shots[].qc``):
    read from its ``series_url`` (:mod:`pipeline.store.storage`), or its ``series`` where it has them."""
    if "series" in qc:
        return dict(qc["series"])
    data = json.loads(storage.read_bytes(qc["series_url"]))
    return dict(data["series"])
