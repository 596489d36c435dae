"""Notes acted on: a shot's fixes applied to its face plan, frame range by frame range.

The job spec's ``fixes:`` (``cluster/spec/fixes.py``) arrive here as :data:`FixOp` values in shot
frame indices (0 = the shot's first analysed frame), end exclusive, each with the spec field that
gave it (``shots[0].fixes[2]``) and a label for people (``fix 2 (frames 1013-1028, track 2)``):

* :class:`KeepPlate`: that track's tasks are removed on those frames: the plate's face stays;
* :class:`SwitchIdentity`: that track's tasks render another identity there;
* :class:`AddBox`: a face the detector missed, at keyframed boxes interpolated linearly (held before
  the first key and after the last), with the five landmarks at the ArcFace template's proportions of
  the box; its tasks carry ``extra["fix_box"] = True`` (track id :data:`FIX_TRACK_BASE` + the fix's
  position, apart from every tracker id);
* :class:`FaceSettings`: every task on those frames carries ``extra["faces"]``, the ``faces`` keys
  that frame renders with instead of the shot's (the tasks of boxes that fixes add there included,
  whichever comes first in ``fixes:``).

A fix naming a track that has no task on its frames is a :class:`~pipeline.errors.SpecError` naming
the fix and the tracks that do: it is known only after analysis, so the shot fails with it.
Fixes apply in the order given, ``faces`` settings after the others (a later one's keys over an
earlier one's); the plan's tracks and identities (what QC and the summary show)
stay those of the analysis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pipeline.errors import SpecError
from pipeline.geometry.align import ARCFACE_112
from pipeline.geometry.types import FaceTask
from pipeline.tracking.faceplan import ShotFacePlan

FIX_TRACK_BASE = 1_000_000
"""Track ids of boxes added by fixes start here (fix ``j``: ``FIX_TRACK_BASE + j``)."""

RENDER_FACE_FIELDS = ("enhance", "enhance_blend", "occlusion", "color_match", "mask_erode", "mask_blur")
"""The ``faces`` keys a fix may set for its frames (the others belong to the whole shot)."""


@dataclass(frozen=True, kw_only=True)
class FixSpan:
    """Which fix this is and the frames it covers."""

    name: str
    """The spec field of the fix (``shots[0].fixes[2]``), for errors."""
    label: str
    """How people read it: ``fix 2 (frames 1013-1028, track 2)``."""
    start: int
    """First shot frame index fixed."""
    end: int
    """One past the last shot frame index fixed."""

    def frames(self, n_frames: int) -> range:
        if not 0 <= self.start < self.end <= n_frames:
            raise SpecError(
                self.name, f"frames {self.start}-{self.end - 1} are outside the shot's {n_frames}"
            )
        return range(self.start, self.end)


@dataclass(frozen=True, kw_only=True)
class KeepPlate:
    span: FixSpan
    track: int


@dataclass(frozen=True, kw_only=True)
class SwitchIdentity:
    span: FixSpan
    track: int
    identity: str


@dataclass(frozen=True, kw_only=True)
class AddBox:
    span: FixSpan
    keys: Mapping[int, tuple[float, float, float, float]]
    """Shot frame index -> box ``[x0, y0, x1, y1]`` in pixels."""
    identity: str


@dataclass(frozen=True, kw_only=True)
class FaceSettings:
    span: FixSpan
    faces: Mapping[str, Any]
    """``faces`` keys (of :data:`RENDER_FACE_FIELDS`) and their values for these frames."""


FixOp = KeepPlate | SwitchIdentity | AddBox | FaceSettings


def switched_tracks(fixes: Sequence[FixOp]) -> frozenset[int]:
    """The tracks a fix gives an identity: planned even when selection left them untouched
    (:func:`~pipeline.tracking.faceplan.plan_shot`'s ``also_render``)."""
    return frozenset(f.track for f in fixes if isinstance(f, SwitchIdentity))


def apply_fixes(plan: ShotFacePlan, fixes: Sequence[FixOp]) -> ShotFacePlan:
    """``plan`` with ``fixes`` applied in order (``plan`` itself is left as it is).

    ``plan`` made with ``also_render=switched_tracks(fixes)``: the tasks of undecided tracks that no
    fix switched are dropped at the end."""
    tasks = [list(frame) for frame in plan.tasks]
    settings: list[tuple[FaceSettings, range]] = []
    for position, fix in enumerate(fixes):
        frames = fix.span.frames(len(tasks))
        if isinstance(fix, FaceSettings):
            settings.append((fix, frames))  # once every task is there: a box added after it takes it too
            continue
        if isinstance(fix, KeepPlate | SwitchIdentity):
            _check_track(fix, plan, frames)
        for f in frames:
            tasks[f] = _fixed_frame(fix, position, f, tasks[f])
    for fix, frames in settings:
        overrides = dict(fix.faces)
        for f in frames:
            tasks[f] = [
                replace(t, extra={**t.extra, "faces": {**t.extra.get("faces", {}), **overrides}})
                for t in tasks[f]
            ]
    for frame in tasks:
        frame[:] = [t for t in frame if not t.extra.get("undecided")]
        frame.sort(key=lambda task: task.track_id)
    kept = tuple((f.track, f.span.start, f.span.end) for f in fixes if isinstance(f, KeepPlate))
    return ShotFacePlan(tasks=tasks, tracks=dict(plan.tracks), kept=plan.kept + kept)


def _fixed_frame(
    fix: KeepPlate | SwitchIdentity | AddBox, position: int, f: int, frame: list[FaceTask]
) -> list[FaceTask]:
    if isinstance(fix, KeepPlate):
        return [t for t in frame if t.track_id != fix.track]
    if isinstance(fix, SwitchIdentity):
        return [_switched(t, fix.identity) if t.track_id == fix.track else t for t in frame]
    box = box_at(fix.keys, f)
    task = FaceTask(
        track_id=FIX_TRACK_BASE + position,
        identity=fix.identity,
        box=box,
        landmarks=template_landmarks(box),
        extra={"fix_box": True},
    )
    return [*frame, task]


def _switched(task: FaceTask, identity: str) -> FaceTask:
    extra = {k: v for k, v in task.extra.items() if k != "undecided"}
    return replace(task, identity=identity, extra=extra)


def _check_track(fix: KeepPlate | SwitchIdentity, plan: ShotFacePlan, frames: range) -> None:
    """SpecError naming the fix when its track is not on screen on any of its frames."""
    present = sorted(
        tid for tid, t in plan.tracks.items() if t.first_frame < frames.stop and frames.start <= t.last_frame
    )
    if fix.track not in present:
        there = ", ".join(str(t) for t in present) if present else "none"
        raise SpecError(
            fix.span.name,
            f"{fix.span.label}: track {fix.track} is not on these frames (tracks there: {there})",
        )


def box_at(keys: Mapping[int, Sequence[float]], frame: int) -> np.ndarray:
    """The box at ``frame``: linear between the keyframes around it, the nearest key's outside them."""
    frames = sorted(keys)
    values = np.array([keys[k] for k in frames], dtype=np.float64)
    out = [np.interp(frame, frames, values[:, i]) for i in range(4)]
    return np.asarray(out, dtype=np.float32)


def template_landmarks(box: np.ndarray) -> np.ndarray:
    """Five landmarks (5, 2) at the ArcFace template's proportions of ``box``: those of a frontal face,
    kept where the pack's detector finds no face inside the box at render time
    (:mod:`pipeline.faces.boxfix`)."""
    x0, y0, x1, y1 = (float(v) for v in box)
    unit = ARCFACE_112 / 112.0
    points = np.stack([x0 + unit[:, 0] * (x1 - x0), y0 + unit[:, 1] * (y1 - y0)], axis=1)
    return points.astype(np.float32)
