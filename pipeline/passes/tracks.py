"""The ``tracks`` pass: every track's faces per frame as JSON lines, and a Nuke ``.chan`` per track.

A record per track per frame in the track's span::

    {"track": 3, "frame": 1012, "state": "detected", "identity": "hero", "similarity": 0.71,
     "box": [x1, y1, x2, y2], "landmarks_raw": [[x, y] x 5], "landmarks": [[x, y] x 5]}

``state``: ``detected`` (the face was found and replaced), ``bridged`` (not found,
replaced from its neighbours), ``missing`` (neither: left as the plate).  ``landmarks_raw``
are the detector's, ``landmarks`` the smoothed ones that were rendered; ``similarity`` is
the output face's cosine to the identity where QC measured it.

Where a shot's ``fixes:`` (:mod:`pipeline.tracking.fixes`) decide a record, it carries
``"fix": j``, the fix's position in the shot's ``fixes:`` (absent otherwise, so a shot
without fixes writes the records it always did):

* ``keep_plate``: ``state`` is ``kept`` (left as the plate on purpose, not lost);
* ``identity``: ``identity`` is the fix's on its frames (``state`` as without the fix);
* ``box``: a track of its own (:data:`~pipeline.tracking.fixes.FIX_TRACK_BASE` + j) with
  ``state`` ``box``, the fix's identity, the interpolated box and the template landmarks the
  plan placed in it (the render may move them to the face its detector finds in the box).

``faces`` fixes change render settings only and mark no record.

The ``.chan`` file has one line per frame with a face: ``frame tx ty tz rx ry rz sx sy sz``,
the face's similarity transform (the 112 px ArcFace template placed on the face):
translation of the template's centre in Nuke's pixel coordinates (origin bottom left,
y up), rotation about z in degrees (counter-clockwise in Nuke's view), uniform scale
relative to the template; tz, rx, ry are 0 and sz is 1.  Nuke's Axis and Camera read the
first six columns; a Transform can be driven from them with an expression.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.geometry.align import estimate_similarity, invert_affine
from pipeline.geometry.types import Face, FaceTask
from pipeline.tracking.faceplan import ShotFacePlan
from pipeline.tracking.fixes import (
    FIX_TRACK_BASE,
    AddBox,
    FaceSettings,
    FixOp,
    KeepPlate,
    SwitchIdentity,
)

TEMPLATE_SIZE = 112


@dataclass(frozen=True)
class TrackFrame:
    """One track in one frame (the ``tracks`` pass's record)."""

    track: int
    frame: int
    state: str
    identity: str | None
    similarity: float | None
    box: list[float] | None
    landmarks_raw: list[list[float]] | None
    landmarks: list[list[float]] | None
    fix: int | None = None
    """The position of the shot's fix that decided this record (None: no fix did)."""


def face_transform(landmarks: np.ndarray, height: int) -> tuple[float, float, float, float]:
    """(tx, ty, rotation degrees, scale) of the template placed on ``landmarks``, in Nuke's coordinates."""
    to_crop = estimate_similarity(np.asarray(landmarks, np.float64), TEMPLATE_SIZE, "arcface")
    to_frame = invert_affine(to_crop)
    centre = to_frame @ np.array([TEMPLATE_SIZE / 2, TEMPLATE_SIZE / 2, 1.0])
    a, b = float(to_frame[0, 0]), float(to_frame[1, 0])
    scale = math.hypot(a, b)
    # Image rotation (y down) is the negative of Nuke's (y up).
    degrees = -math.degrees(math.atan2(b, a))
    return float(centre[0]), float(height - centre[1]), degrees, scale


def track_frames(
    numbers: Sequence[int],
    faces: Sequence[Sequence[Face]],
    track_ids: Sequence[Sequence[int]],
    tasks: Sequence[Sequence[FaceTask]],
    *,
    parts: Mapping[int, Sequence[int]],
    identities: Mapping[int, str | None],
    similarity: Mapping[tuple[int, int], float],
    fixes: Sequence[FixOp] = (),
) -> Iterator[TrackFrame]:
    """Every plan track's record in every frame of its span.

    ``numbers[i]``: frame number of analysed frame i; ``faces``/``track_ids``: the detections
    and their tracker ids; ``tasks``: what was rendered (plan track ids); ``parts``: plan track
    -> tracker ids stitched into it; ``identities``: plan track -> identity (None: untouched);
    ``similarity``: (plan track, frame index) -> the output face's cosine to its identity;
    ``fixes``: the shot's fixes that made ``tasks`` (:func:`~pipeline.tracking.fixes.apply_fixes`).
    """
    owner = {part: track for track, ids in parts.items() for part in ids}
    spans: dict[int, list[int]] = {}
    raw: dict[tuple[int, int], Face] = {}
    for i, (frame_faces, ids) in enumerate(zip(faces, track_ids, strict=True)):
        for face, tid in zip(frame_faces, ids, strict=True):
            track = owner.get(int(tid), int(tid))
            raw[(track, i)] = face
            spans.setdefault(track, [i, i])[1] = i
    rendered = {(t.track_id, i): t for i, frame_tasks in enumerate(tasks) for t in frame_tasks}
    for track, i in rendered:
        span = spans.setdefault(track, [i, i])
        span[0], span[1] = min(span[0], i), max(span[1], i)
    for track in sorted(spans):
        first, last = spans[track]
        for i in range(first, last + 1):
            found, task = raw.get((track, i)), rendered.get((track, i))
            state = "detected" if found is not None else ("bridged" if task is not None else "missing")
            if found is not None and task is None and identities.get(track) is not None:
                state = "missing"  # found but not replaced
            identity, fix = identities.get(track), None
            for j, op in _fixes_on(fixes, track, i, rendered=task is not None):
                fix = j
                if isinstance(op, KeepPlate):
                    state = "kept"
                elif isinstance(op, SwitchIdentity):
                    identity = op.identity
                else:
                    state, identity = "box", op.identity
            yield TrackFrame(
                track=track,
                frame=int(numbers[i]),
                state=state,
                identity=identity,
                similarity=similarity.get((track, i)),
                box=_floats(task.box if task is not None else found.box if found is not None else None),
                landmarks_raw=None if found is None else np.asarray(found.landmarks, float).round(3).tolist(),
                landmarks=None if task is None else np.asarray(task.landmarks, float).round(3).tolist(),
                fix=fix,
            )


def plan_track_frames(
    numbers: Sequence[int],
    faces: Sequence[Sequence[Face]],
    track_ids: Sequence[Sequence[int]],
    plan: ShotFacePlan,
    *,
    fixes: Sequence[FixOp] = (),
) -> list[TrackFrame]:
    """:func:`track_frames` of a shot's face plan, ``fixes`` applied to it
    (:func:`~pipeline.tracking.fixes.apply_fixes`); similarity comes later, from QC's measures."""
    return list(
        track_frames(
            numbers,
            faces,
            track_ids,
            plan.tasks,
            parts={t: summary.parts or (t,) for t, summary in plan.tracks.items()},
            identities={t: summary.identity for t, summary in plan.tracks.items()},
            similarity={},
            fixes=fixes,
        )
    )


def _fixes_on(
    fixes: Sequence[FixOp], track: int, i: int, *, rendered: bool
) -> Iterator[tuple[int, KeepPlate | SwitchIdentity | AddBox]]:
    """The fixes (position, fix) that decide ``track``'s record on frame index ``i``, in order (the
    last wins): a keep where the track is not rendered, an identity where it is, the box of its own."""
    for j, op in enumerate(fixes):
        if not op.span.start <= i < op.span.end or isinstance(op, FaceSettings):
            continue
        if isinstance(op, AddBox):
            decides = rendered and track == FIX_TRACK_BASE + j
        else:
            decides = op.track == track and rendered == isinstance(op, SwitchIdentity)
        if decides:
            yield j, op


def _floats(values: np.ndarray | None) -> list[float] | None:
    return None if values is None else [round(float(v), 3) for v in values]


def jsonl(records: Sequence[TrackFrame]) -> bytes:
    """The records as JSON lines (``fix`` only where a fix decided the record)."""
    return "".join(json.dumps(_fields(r), separators=(",", ":")) + "\n" for r in records).encode()


def _fields(record: TrackFrame) -> dict[str, object]:
    fields = dict(record.__dict__)
    if fields["fix"] is None:
        del fields["fix"]
    return fields


def chan(records: Sequence[TrackFrame], height: int) -> bytes:
    """One track's ``.chan`` lines (frames with rendered landmarks, else the detector's)."""
    lines = []
    for r in records:
        marks = r.landmarks if r.landmarks is not None else r.landmarks_raw
        if marks is None:
            continue
        tx, ty, rz, s = face_transform(np.asarray(marks), height)
        lines.append(f"{r.frame} {tx:.4f} {ty:.4f} 0 0 0 {rz:.4f} {s:.6f} {s:.6f} 1\n")
    return "".join(lines).encode()
