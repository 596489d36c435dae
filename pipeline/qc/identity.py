"""Identity: does the output look like whom it should, and did a track change person?

- *after*: the actors' ``similarity_after`` (output face vs its identity); below
  ``min_identity`` is ``low_identity``.
- *before*: the detected (original) face vs the same identity, from the detection
  embeddings, so a reader sees how far the render moved the face.
- *switches* (selection mode ``reference``): per frame, each track's detection
  against every reference.  Tracks swap people when two faces cross and the
  tracker gets it wrong; from then on the faces of a track look like another
  reference than the one decided for it.  A run of ``switch_frames`` frames where
  another reference (one that maps to another source) beats the track's own by
  ``switch_margin`` is ``identity_switch``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.faces.config import SelectionConfig
from pipeline.qc.config import QcConfig
from pipeline.qc.marks import Mark, ShotTracks, excess_severity, runs
from pipeline.qc.records import FaceMeasure
from pipeline.tracking.faceplan import ShotFacePlan


@dataclass(frozen=True)
class IdentitySeries:
    """Per analysed frame: mean similarity after/before over the faces measured (None: none)."""

    after: list[float | None]
    before: list[float | None]
    per_track: dict[int, dict[str, float | None]]
    """Plan track -> mean ``similarity_before`` / ``similarity_after`` / ``moved`` (after - before)."""
    marks: list[Mark]


def _unit(vector: np.ndarray) -> np.ndarray:
    v = np.asarray(vector, np.float64).reshape(-1)
    return v / max(math.sqrt(v.dot(v)), 1e-12)  # np.linalg.norm's own sum for a vector, without its checks


def _mean(values: Sequence[float]) -> float | None:
    """``np.mean(values)``, to the bit: under eight Python floats numpy adds them one by one from 0.0, as
    here (a frame's faces of one track: mostly one), without making an array of them."""
    if not values:
        return None
    if len(values) >= 8 or not all(type(value) is float for value in values):
        return float(np.mean(values))  # numpy's pairwise sum, or its dtype of numpy scalars
    total = 0.0
    for value in values:
        total += value
    return total / len(values)


def identity_series(
    plan: ShotFacePlan,
    tracks: ShotTracks,
    measures: Sequence[tuple[int, FaceMeasure]],
    references: Mapping[str, np.ndarray],
    config: QcConfig,
) -> IdentitySeries:
    """Similarity of every replaced face to its identity after and before rendering.

    ``measures`` are ``(analysed index, measure)`` pairs; ``references`` may hold the
    source identities' embeddings (for *before*): identities not in it have no *before*.
    """
    n = plan.num_frames
    after: list[list[float]] = [[] for _ in range(n)]
    before: list[list[float]] = [[] for _ in range(n)]
    track_after: dict[int, list[float]] = {}
    track_before: dict[int, list[float]] = {}
    before_at: dict[tuple[int, int], float] = {}
    marks: list[Mark] = []
    for tid, summary in plan.tracks.items():
        if summary.identity is None or summary.identity not in references:
            continue
        ref = _unit(references[summary.identity])
        for i, face in tracks.detections.get(tid, {}).items():
            if face.embedding is not None and i in tracks.tasks.get(tid, {}):
                sim = float(np.dot(_unit(face.embedding), ref))
                before[i].append(sim)
                before_at[(tid, i)] = sim
                track_before.setdefault(tid, []).append(sim)
    for i, m in measures:
        if m.similarity_after is None:
            continue
        after[i].append(m.similarity_after)
        track_after.setdefault(m.track, []).append(m.similarity_after)
        if m.similarity_after < config.min_identity:
            was = before_at.get((m.track, i))
            detail = f"output {m.similarity_after:.3f} to {m.identity!r}" + (
                "" if was is None else f" (the plate's face {was:.3f})"
            )
            gap = config.min_identity - m.similarity_after
            marks.append(
                Mark(
                    index=i,
                    track=m.track,
                    reason="low_identity",
                    severity=float(0.5 + 0.4 * np.clip(gap / 0.3, 0.0, 1.0)),
                    value=m.similarity_after,
                    threshold=config.min_identity,
                    detail=detail,
                )
            )
    per_track: dict[int, dict[str, float | None]] = {}
    for tid in sorted(set(track_after) | set(track_before)):
        a, b = _mean(track_after.get(tid, [])), _mean(track_before.get(tid, []))
        per_track[tid] = {
            "similarity_after": a,
            "similarity_before": b,
            "moved": None if a is None or b is None else a - b,
        }
    return IdentitySeries(
        after=[_mean(v) for v in after], before=[_mean(v) for v in before], per_track=per_track, marks=marks
    )


def identity_switches(
    plan: ShotFacePlan,
    tracks: ShotTracks,
    references: Mapping[str, np.ndarray],
    selection: SelectionConfig,
    config: QcConfig,
) -> list[Mark]:
    """Runs of frames where a track's faces look like another person's reference (mode reference)."""
    if selection.mode != "reference":
        return []
    refs = {name: _unit(references[name]) for name in sorted(selection.references) if name in references}
    marks: list[Mark] = []
    for tid, summary in sorted(plan.tracks.items()):
        if summary.identity is None:
            continue
        own = [r for r in refs if selection.references[r] == summary.identity]
        other = [r for r in refs if selection.references[r] != summary.identity]
        if not own or not other:
            continue
        margins: dict[int, tuple[float, str]] = {}
        for i, face in sorted(tracks.detections.get(tid, {}).items()):
            if face.embedding is None:
                continue
            emb = _unit(face.embedding)
            if emb.shape != refs[own[0]].shape:
                raise ValueError(
                    f"reference embeddings have {refs[own[0]].shape[0]} dims, faces {emb.shape[0]}"
                )
            mine = max(float(np.dot(emb, refs[r])) for r in own)
            rival = max(other, key=lambda r: float(np.dot(emb, refs[r])))
            margin = float(np.dot(emb, refs[rival])) - mine
            if margin >= config.switch_margin:
                margins[i] = (margin, rival)
        for a, b in runs(set(margins)):
            if b - a + 1 < config.switch_frames:
                continue
            for i in range(a, b + 1):
                margin, rival = margins[i]
                marks.append(
                    Mark(
                        index=i,
                        track=tid,
                        reason="identity_switch",
                        severity=excess_severity(margin, config.switch_margin, 0.7, 0.95, span=3.0),
                        value=margin,
                        threshold=config.switch_margin,
                        detail=(
                            f"track {tid} was decided {summary.identity!r} but its face is closer to "
                            f"reference {rival!r} ({selection.references[rival]!r}) by {margin:.3f}"
                        ),
                        extra={"rival": rival},
                    )
                )
    return marks
