"""A shot's QC: the numbers per frame and the frames a supervisor should look at.

Runs on the driver once a shot's chunks have rendered: it has the detections and
tracker ids of every analysed frame, the face plan, and the actors' measures
(:class:`~pipeline.qc.records.FaceMeasure`).  The checks live beside this module
(:mod:`~pipeline.qc.coverage`, :mod:`~pipeline.qc.identity`,
:mod:`~pipeline.qc.stability`); this one checks the inputs, runs them, and keeps
the result as a :class:`ShotQC` (plain data, JSON through ``to_dict``).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipeline.faces.config import SelectionConfig
from pipeline.geometry.types import Face
from pipeline.qc.config import QcConfig
from pipeline.qc.coverage import STATES, coverage
from pipeline.qc.identity import identity_series, identity_switches
from pipeline.qc.marks import ShotTracks, merge_marks
from pipeline.qc.records import FaceMeasure, Flag, failed_reasons, flag_counts, review_peaks
from pipeline.qc.stability import Stability, stability
from pipeline.tracking.faceplan import ShotFacePlan

DIGITS = 4
"""Series are rounded to this many decimals in ``to_dict`` (a 10,000-frame shot stays small)."""


def _rounded(values: Sequence[float | None]) -> list[float | None]:
    return [None if v is None else round(float(v), DIGITS) for v in values]


@dataclass(frozen=True)
class QcSeries:
    """Numbers per analysed frame (lists of the shot's length; None: nothing measured there).

    ``numbers``: frame numbers; ``similarity_after``/``similarity_before``: mean over the faces
    measured; ``coverage``: state -> how many replaced faces were in it; ``jitter``,
    ``flicker``, ``seam``: the worst face of the frame.
    """

    numbers: list[int]
    similarity_after: list[float | None]
    similarity_before: list[float | None]
    coverage: dict[str, list[int]]
    jitter: list[float | None]
    flicker: list[float | None]
    seam: list[float | None]

    def reported(self) -> QcSeries:
        """These series as the summary and the report give them: measures to :data:`DIGITS` decimals.

        Worked out once (the series are not changed once made) and shared: not to be changed."""
        return self._reported

    @functools.cached_property
    def _reported(self) -> QcSeries:
        return QcSeries(
            numbers=list(self.numbers),
            similarity_after=_rounded(self.similarity_after),
            similarity_before=_rounded(self.similarity_before),
            coverage={k: list(v) for k, v in self.coverage.items()},
            jitter=_rounded(self.jitter),
            flicker=_rounded(self.flicker),
            seam=_rounded(self.seam),
        )

    def to_dict(self) -> dict[str, Any]:
        """:meth:`reported`'s fields, copies of its lists."""
        reported = self.reported()
        return {f.name: _copy_series(getattr(reported, f.name)) for f in dataclasses.fields(reported)}


def _copy_series(value: Any) -> Any:
    return {k: list(v) for k, v in value.items()} if isinstance(value, dict) else list(value)


@dataclass(frozen=True)
class ShotQC:
    """What QC concluded about one shot.

    ``first``: the source position of the first analysed frame (positions are what
    thumbnails are taken by; flags carry frame numbers).  ``flags`` are sorted by
    severity, worst first.  ``tracks``: per plan track, its identity and mean similarity
    before/after.  ``boundaries``: per chunk boundary (the frame number of the first frame
    after it), the worst flicker across it.
    """

    shot: str
    first: int
    flags: tuple[Flag, ...]
    series: QcSeries
    tracks: dict[int, dict[str, Any]]
    boundaries: dict[int, float | None]

    @property
    def counts(self) -> dict[str, int]:
        """Number of flags per reason (every reason present, zeros included)."""
        return flag_counts(self.flags)

    def failed(self, config: QcConfig) -> list[str]:
        """Reasons present in this shot that ``config.fail_on`` gates on, in ``REASONS`` order."""
        return failed_reasons(self.flags, config.fail_on)

    def position(self, number: int) -> int:
        """The source position of frame number ``number`` (ValueError if it was not analysed)."""
        try:
            return self.first + self.series.numbers.index(number)
        except ValueError:
            raise ValueError(f"frame number {number} is not one of shot {self.shot!r}'s") from None

    def review_positions(self, limit: int = 12) -> list[int]:
        """Source positions of the worst frame of the ``limit`` worst flags (to take thumbnails of)."""
        return sorted({self.position(p) for p in review_peaks(self.flags, limit)})

    def to_dict(self) -> dict[str, Any]:
        return {
            "shot": self.shot,
            "first": self.first,
            "frames": len(self.series.numbers),
            "counts": self.counts,
            "flags": [f.to_dict() for f in self.flags],
            "series": self.series.to_dict(),
            "tracks": {str(k): dict(v) for k, v in sorted(self.tracks.items())},
            "boundaries": {str(k): v for k, v in sorted(self.boundaries.items())},
        }


@dataclass(frozen=True)
class ShotQCInputs:
    """What QC looks at in one shot, besides the actors' measures and the configuration.

    Analysed frame ``i`` is source position ``first + i`` and frame number ``numbers[i]``;
    ``faces[i]``/``track_ids[i]`` its detections (with embeddings, for the checks that compare
    them) and their tracker ids; ``plan`` what was rendered; ``references`` identity name ->
    recognizer embedding (the references of ``selection``, and the source identities for
    "before"); ``chunk_starts`` the analysed indices where render chunks begin.
    """

    shot: str
    numbers: Sequence[int]
    first: int
    faces: Sequence[Sequence[Face]]
    track_ids: Sequence[Sequence[int]]
    plan: ShotFacePlan
    references: Mapping[str, np.ndarray]
    selection: SelectionConfig
    chunk_starts: Sequence[int]

    def check(self) -> None:
        """ValueError when the frames do not line up (lengths, increasing numbers, chunk starts)."""
        n = len(self.numbers)
        for name, value in (
            ("faces", self.faces),
            ("track_ids", self.track_ids),
            ("plan.tasks", self.plan.tasks),
        ):
            if len(value) != n:
                raise ValueError(f"analyze_shot: {name} has {len(value)} frames, numbers {n}")
        if any(b <= a for a, b in itertools.pairwise(self.numbers)):
            raise ValueError("analyze_shot: numbers must increase")
        bad = [s for s in self.chunk_starts if not 0 <= s < max(n, 1)]
        if bad:
            raise ValueError(f"analyze_shot: chunk_starts {bad} outside 0-{n - 1}")


def analyze_shot(
    inputs: ShotQCInputs, measures: Sequence[FaceMeasure], config: QcConfig, *, stable_checks: bool = True
) -> ShotQC:
    """QC of one shot: coverage, identity, identity switches, jitter, flicker and seams.

    ``measures``: the actors' (``frame`` = source position, ``track`` = plan track id).
    Flags carry frame numbers.  ``stable_checks`` False: no jitter, flicker or seams (the planning
    stage of :mod:`pipeline.qc.staged`, whose conclusions on those the publish stage replaces).
    """
    inputs.check()
    numbers, first, plan, references = inputs.numbers, inputs.first, inputs.plan, inputs.references
    n = len(numbers)
    indexed: list[tuple[int, FaceMeasure]] = []
    for m in measures:
        i = m.frame - first
        if not 0 <= i < n:
            raise ValueError(
                f"analyze_shot: measure of source frame {m.frame} outside {first}-{first + n - 1}"
            )
        indexed.append((i, m))
    tracks = ShotTracks.build(inputs.faces, inputs.track_ids, plan)
    cover = coverage(plan, tracks, config)
    ident = identity_series(plan, tracks, indexed, references, config)
    switches = identity_switches(plan, tracks, references, inputs.selection, config)
    if stable_checks:
        stable = stability(tracks, indexed, n, inputs.chunk_starts, config)
    else:
        nothing: list[float | None] = [None] * n
        stable = Stability(jitter=nothing, flicker=nothing, seam=nothing, boundary_flicker={}, marks=[])
    flags = merge_marks(inputs.shot, numbers, [*cover.marks, *ident.marks, *switches, *stable.marks])
    per_track: dict[int, dict[str, Any]] = {}
    for tid, summary in sorted(plan.tracks.items()):
        if summary.identity is None:
            continue
        per_track[tid] = {
            "identity": summary.identity,
            "parts": list(summary.parts),
            "first": int(numbers[summary.first_frame]),
            "last": int(numbers[summary.last_frame]),
            **{k: None if v is None else round(v, DIGITS) for k, v in ident.per_track.get(tid, {}).items()},
        }
    series = QcSeries(
        numbers=[int(v) for v in numbers],
        similarity_after=ident.after,
        similarity_before=ident.before,
        coverage={state: cover.counts[state] for state in STATES},
        jitter=stable.jitter,
        flicker=stable.flicker,
        seam=stable.seam,
    )
    boundaries = {
        int(numbers[s]): None if v is None else round(v, DIGITS) for s, v in stable.boundary_flicker.items()
    }
    return ShotQC(
        shot=inputs.shot,
        first=first,
        flags=tuple(flags),
        series=series,
        tracks=per_track,
        boundaries=boundaries,
    )
