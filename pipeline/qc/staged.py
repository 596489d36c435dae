"""QC in two stages, so the driver keeps no embeddings while a shot renders.

At planning, the driver holds every detection with its embedding: :func:`plan_checks`
runs everything that needs them (identity switches, the original faces' similarity to
their identity) and keeps the detections without embeddings.  When the shot is
published, :func:`finish_checks` adds what the actors measured (identity after the
swap, flicker, seams) and gives the shot's :class:`~pipeline.qc.analyze.ShotQC`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.faces.config import SelectionConfig
from pipeline.geometry.types import Face
from pipeline.qc.analyze import ShotQC, analyze_shot
from pipeline.qc.config import QcConfig
from pipeline.qc.records import FaceMeasure
from pipeline.tracking.faceplan import ShotFacePlan

NEEDS_EMBEDDINGS = ("identity_switch",)
"""Flags decided at planning (they compare the original faces' embeddings)."""


@dataclass(frozen=True)
class PlanQC:
    """A shot's QC inputs without embeddings, and what was concluded from the embeddings."""

    shot: str
    numbers: tuple[int, ...]
    first: int
    faces: list[list[Face]]
    track_ids: list[list[int]]
    plan: ShotFacePlan
    references: Mapping[str, np.ndarray]
    selection: SelectionConfig
    chunk_starts: tuple[int, ...]
    early: ShotQC


def plan_checks(
    shot: str,
    numbers: Sequence[int],
    first: int,
    faces: Sequence[Sequence[Face]],
    track_ids: Sequence[Sequence[int]],
    plan: ShotFacePlan,
    references: Mapping[str, np.ndarray],
    selection: SelectionConfig,
    config: QcConfig,
    chunk_starts: Sequence[int],
) -> PlanQC:
    """The planning stage (see :func:`pipeline.qc.analyze.analyze_shot` for the arguments)."""
    early = analyze_shot(
        shot, numbers, first, faces, track_ids, plan, [], references, selection, config, chunk_starts
    )
    lean = [[dataclasses.replace(f, embedding=None) for f in frame] for frame in faces]
    return PlanQC(
        shot=shot,
        numbers=tuple(int(n) for n in numbers),
        first=first,
        faces=lean,
        track_ids=[list(map(int, ids)) for ids in track_ids],
        plan=plan,
        references=dict(references),
        selection=selection,
        chunk_starts=tuple(chunk_starts),
        early=early,
    )


def finish_checks(planned: PlanQC, measures: Sequence[FaceMeasure], config: QcConfig) -> ShotQC:
    """The shot's QC: the planning stage's conclusions plus the actors' ``measures``."""
    late = analyze_shot(
        planned.shot,
        planned.numbers,
        planned.first,
        planned.faces,
        planned.track_ids,
        planned.plan,
        measures,
        planned.references,
        planned.selection,
        config,
        planned.chunk_starts,
    )
    early = planned.early
    flags = [f for f in late.flags if f.reason not in NEEDS_EMBEDDINGS]
    flags += [f for f in early.flags if f.reason in NEEDS_EMBEDDINGS]
    flags.sort(key=lambda f: (-f.severity, f.first, f.track if f.track is not None else -1, f.reason))
    series = dataclasses.replace(late.series, similarity_before=early.series.similarity_before)
    tracks = {}
    for tid, row in late.tracks.items():
        before = early.tracks.get(tid, {}).get("similarity_before")
        after = row.get("similarity_after")
        moved = None if before is None or after is None else round(after - before, 4)
        tracks[tid] = {**row, "similarity_before": before, "moved": moved}
    return dataclasses.replace(late, flags=tuple(flags), series=series, tracks=tracks)
