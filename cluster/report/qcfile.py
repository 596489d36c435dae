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

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pipeline.qc.records import Flag, failed_reasons, flag_counts, review_peaks
from pipeline.store import storage
from pipeline.video.runs import IntRuns

if TYPE_CHECKING:
    from pipeline.qc.analyze import ShotQC
    from pipeline.qc.config import QcConfig

QC_FOLDER = "qc"
"""The folder of the work area that holds each shot's QC file (``qc/<shot>.json``)."""


FrameNumbers = IntRuns
"""A shot's analysed frame numbers (increasing), kept as runs: a shot of 14,400 frames numbered one after
the other is one run (:class:`~pipeline.video.runs.IntRuns`)."""


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

    def failed(self, config: QcConfig) -> list[str]:
        """Reasons present in this shot that ``config.fail_on`` gates on (as ``ShotQC.failed``)."""
        return failed_reasons(self.flags, config.fail_on)

    def review_positions(self, limit: int = 12) -> list[int]:
        """Source positions of the worst frame of the ``limit`` worst flags (as ``ShotQC.review_positions``)."""
        positions = set()
        for number in review_peaks(self.flags, limit):
            index = self.numbers.position(number)
            if index is None:
                raise ValueError(f"frame number {number} is not one of shot {self.shot!r}'s")
            positions.add(self.first + index)
        return sorted(positions)

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
