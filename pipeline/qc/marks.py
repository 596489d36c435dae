"""Per-frame marks, the shot's faces regrouped per plan track, and marks merged into flags.

Each check (coverage, identity, stability) marks single analysed frames
(:class:`Mark`); :func:`merge_marks` joins consecutive marks of one track and
reason into one :class:`~pipeline.qc.records.Flag` with frame numbers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipeline.geometry.types import Face, FaceTask
from pipeline.qc.records import Flag
from pipeline.tracking.faceplan import ShotFacePlan


@dataclass(frozen=True)
class Mark:
    """One analysed frame (index ``index``, 0 = the shot's first analysed frame) of one track."""

    index: int
    track: int | None
    reason: str
    severity: float
    value: float
    threshold: float
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ShotTracks:
    """The shot's detections and tasks per plan track: ``{plan track: {analysed index: ...}}``."""

    detections: dict[int, dict[int, Face]]
    tasks: dict[int, dict[int, FaceTask]]
    others: list[dict[int, Face]]
    """Per analysed index: every detection of the frame by tracker id."""

    @classmethod
    def build(
        cls, faces: Sequence[Sequence[Face]], track_ids: Sequence[Sequence[int]], plan: ShotFacePlan
    ) -> ShotTracks:
        owner = {part: tid for tid, summary in plan.tracks.items() for part in (summary.parts or (tid,))}
        detections: dict[int, dict[int, Face]] = {}
        per_frame: list[dict[int, Face]] = []
        for i, (frame_faces, ids) in enumerate(zip(faces, track_ids, strict=True)):
            if len(frame_faces) != len(ids):
                raise ValueError(f"analysed frame {i}: {len(frame_faces)} faces but {len(ids)} track ids")
            per_frame.append({int(t): f for f, t in zip(frame_faces, ids)})
            for face, tracker_id in zip(frame_faces, ids):
                tid = owner.get(int(tracker_id))
                if tid is not None:
                    detections.setdefault(tid, {})[i] = face
        tasks: dict[int, dict[int, FaceTask]] = {}
        for i, frame_tasks in enumerate(plan.tasks):
            for task in frame_tasks:
                tasks.setdefault(task.track_id, {})[i] = task
        return cls(detections=detections, tasks=tasks, others=per_frame)


def runs(indices: Sequence[int] | set[int]) -> Iterator[tuple[int, int]]:
    """Consecutive integers grouped as inclusive ``(first, last)`` runs, in order."""
    ordered = sorted(indices)
    if not ordered:
        return
    start = prev = ordered[0]
    for i in ordered[1:]:
        if i != prev + 1:
            yield start, prev
            start = i
        prev = i
    yield start, prev


def excess_severity(value: float, threshold: float, low: float, high: float, span: float = 2.0) -> float:
    """``low`` at the threshold rising to ``high`` at ``(1 + span) * threshold``, clipped."""
    over = (value / threshold - 1.0) / span if threshold > 0 else 1.0
    return float(low + (high - low) * np.clip(over, 0.0, 1.0))


def merge_marks(shot: str, numbers: Sequence[int], marks: Sequence[Mark]) -> list[Flag]:
    """One flag per run of consecutive analysed frames with marks of the same track and reason.

    The flag's value, threshold and detail are those of its worst frame (``extra["peak"]``, a
    frame number); its severity the maximum; boolean extras are true if any frame's is.
    """
    groups: dict[tuple[int | None, str], dict[int, Mark]] = {}
    for mark in marks:
        frames = groups.setdefault((mark.track, mark.reason), {})
        held = frames.get(mark.index)
        if held is None or mark.severity > held.severity:
            frames[mark.index] = mark
    flags: list[Flag] = []
    for (track, reason), frames in groups.items():
        for a, b in runs(set(frames)):
            run = [frames[i] for i in range(a, b + 1)]
            worst = max(run, key=lambda m: (m.severity, m.value))
            extra: dict[str, Any] = {}
            for m in run:
                for key, value in m.extra.items():
                    extra[key] = (extra.get(key, False) or value) if isinstance(value, bool) else value
            extra["peak"] = int(numbers[worst.index])
            flags.append(
                Flag(
                    shot=shot,
                    first=int(numbers[a]),
                    last=int(numbers[b]),
                    track=track,
                    reason=reason,
                    severity=round(worst.severity, 4),
                    value=round(float(worst.value), 6),
                    threshold=float(worst.threshold),
                    detail=worst.detail,
                    extra=extra,
                )
            )
    flags.sort(key=lambda f: (-f.severity, f.first, -1 if f.track is None else f.track, f.reason))
    return flags
