"""QC in two stages, so the driver keeps no embeddings while a shot renders.

At planning, the driver holds every detection with its embedding: :func:`plan_checks`
runs everything that needs them (identity switches, the original faces' similarity to
their identity) and keeps the detections without embeddings.  When the shot is
published, :func:`finish_checks` adds what the actors measured (identity after the
swap, flicker, seams) and gives the shot's :class:`~pipeline.qc.analyze.ShotQC`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.geometry.types import Face
from pipeline.qc.analyze import ShotQC, ShotQCInputs, analyze_shot
from pipeline.qc.config import QcConfig
from pipeline.qc.records import FaceMeasure

NEEDS_EMBEDDINGS = ("identity_switch",)
"""Flags decided at planning (they compare the original faces' embeddings)."""


@dataclass(frozen=True)
class PlanQC:
    """A shot's QC inputs without embeddings, and what was concluded from the embeddings."""

    inputs: ShotQCInputs
    early: ShotQC


def plan_checks(inputs: ShotQCInputs, config: QcConfig) -> PlanQC:
    """The planning stage: the checks that need the detections' embeddings; the inputs kept without them."""
    early = analyze_shot(inputs, [], config, stable_checks=False)  # the publish stage measures those
    lean = dataclasses.replace(
        inputs,
        numbers=tuple(int(n) for n in inputs.numbers),
        faces=[[_without_embedding(f) for f in frame] for frame in inputs.faces],
        track_ids=[list(map(int, ids)) for ids in inputs.track_ids],
        references=dict(inputs.references),
        chunk_starts=tuple(inputs.chunk_starts),
    )
    return PlanQC(inputs=lean, early=early)


def _without_embedding(face: Face) -> Face:
    """``face`` without its embedding: ``dataclasses.replace`` without re-running its checks (a crowd
    shot has ~100,000 faces; its fields were checked when it was made)."""
    lean = object.__new__(Face)
    lean.__dict__.update(face.__dict__, embedding=None)  # where a frozen dataclass keeps its fields
    return lean


def finish_checks(planned: PlanQC, measures: Sequence[FaceMeasure], config: QcConfig) -> ShotQC:
    """The shot's QC: the planning stage's conclusions plus the actors' ``measures``."""
    late = analyze_shot(planned.inputs, measures, config)
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
