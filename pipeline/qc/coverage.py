"""Coverage: was a replaced face replaced on every frame it was on screen?

A face flashing back to the original actor for a few frames is the worst error
a render can make, and the easiest to miss in a 10,000-frame shot.  Each frame
of a replaced face is one of:

- ``replaced``: detected and given a task;
- ``bridged``: not detected, but the plan interpolated a task over the gap, or a fix's box
  (``fixes: - box:``) covers where the face is;
- ``hidden``: neither, and the face's interpolated box is behind another detected
  face (the plan leaves it on purpose: nothing of it shows);
- ``unreplaced``: no task, so the plate's face shows if the face is there.

Faces are followed across the plan's tracks: when the tracker lost a face for
longer than its gap (or re-found it too late to be stitched), the plan has two
tracks; a track that starts soon after another ended, near where it ended, and
does not carry another identity, continues it (:class:`QcConfig` ``join_*``).
Frames between them, and frames of a continuing track left without an identity,
are unreplaced.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.geometry.types import Face
from pipeline.qc.config import QcConfig
from pipeline.qc.marks import Mark, ShotTracks, runs
from pipeline.tracking.faceplan import ShotFacePlan

STATES = ("replaced", "bridged", "hidden", "unreplaced")

# A face left as the plate while it was detected is certainly visible; one that was
# not detected may be covered by something that is not a face.
SEVERITY_SEEN = 1.0
SEVERITY_UNSEEN = 0.85


@dataclass(frozen=True)
class Coverage:
    """Per analysed frame, how many replaced faces were in each state; unreplaced runs as marks."""

    counts: dict[str, list[int]]
    marks: list[Mark]


def _centre(face: Face) -> np.ndarray:
    box = np.asarray(face.box, np.float64)
    return (box[:2] + box[2:]) / 2.0


def face_chains(plan: ShotFacePlan, tracks: ShotTracks, config: QcConfig) -> list[list[int]]:
    """Plan tracks that are one face, in time order (every track is in exactly one chain)."""
    order = sorted(
        (tid for tid in plan.tracks if tracks.detections.get(tid)),
        key=lambda tid: (plan.tracks[tid].first_frame, tid),
    )
    chains: list[list[int]] = []
    for tid in order:
        summary = plan.tracks[tid]
        dets = tracks.detections[tid]
        start_centre = _centre(dets[min(dets)])
        best: tuple[float, int] | None = None
        for c, chain in enumerate(chains):
            last = plan.tracks[chain[-1]]
            gap = summary.first_frame - last.last_frame - 1
            if gap < 0 or gap > config.join_gap_frames:
                continue
            identities = {plan.tracks[t].identity for t in chain} - {None}
            if summary.identity is not None and identities and summary.identity not in identities:
                continue  # decided to be someone else
            last_dets = tracks.detections[chain[-1]]
            # Face size from the tracks' mean areas: the boxes at either side of the gap are
            # often those of a half-covered face.
            size = np.sqrt(max(summary.mean_area, plan.tracks[chain[-1]].mean_area, 1.0))
            distance = float(np.linalg.norm(start_centre - _centre(last_dets[max(last_dets)]))) / size
            if distance <= config.join_distance and (best is None or distance < best[0]):
                best = (distance, c)
        if best is None:
            chains.append([tid])
        else:
            chains[best[1]].append(tid)
    return chains


def _interpolated_box(dets: dict[int, Face], i: int) -> np.ndarray | None:
    before = [f for f in dets if f < i]
    after = [f for f in dets if f > i]
    if not before or not after:
        return None
    a, b = max(before), min(after)
    w = (i - a) / (b - a)
    return (1.0 - w) * np.asarray(dets[a].box, np.float64) + w * np.asarray(dets[b].box, np.float64)


def _covered(box: np.ndarray, boxes: Sequence[np.ndarray], min_overlap: float) -> bool:
    area = max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])
    if area <= 0:
        return True
    for other in boxes:
        ix = min(box[2], float(other[2])) - max(box[0], float(other[0]))
        iy = min(box[3], float(other[3])) - max(box[1], float(other[1]))
        if ix > 0 and iy > 0 and ix * iy / area >= min_overlap:
            return True
    return False


def _boxed(plan: ShotFacePlan, dets: dict[int, Face], i: int, min_overlap: float) -> bool:
    """Whether a fix's box renders a face over this face on analysed frame ``i`` (its detected box
    there, else the one interpolated across the gap)."""
    boxes = [t for t in plan.tasks[i] if t.extra.get("fix_box")]
    if not boxes:
        return False
    face = np.asarray(dets[i].box, np.float64) if i in dets else _interpolated_box(dets, i)
    if face is None:
        return False
    return _covered(face, [np.asarray(t.box, np.float64) for t in boxes], min_overlap)


def coverage(plan: ShotFacePlan, tracks: ShotTracks, config: QcConfig) -> Coverage:
    """Coverage states per frame of every face that was replaced somewhere, and its unreplaced runs."""
    n = plan.num_frames
    counts = {state: [0] * n for state in STATES}
    marks: list[Mark] = []
    for chain in face_chains(plan, tracks, config):
        replaced = [tid for tid in chain if plan.tracks[tid].identity is not None]
        if not replaced:
            continue
        label = replaced[0]
        dets: dict[int, Face] = {}
        for tid in chain:
            dets.update(tracks.detections.get(tid, {}))
        chain_faces = {id(f) for f in dets.values()}
        first, last = plan.tracks[chain[0]].first_frame, plan.tracks[chain[-1]].last_frame
        unreplaced: dict[int, bool] = {}  # index -> the face was detected there
        for i in range(first, last + 1):
            if any(plan.is_kept(tid, i) for tid in chain):
                continue  # a fix keeps the plate's face here: asked for, not a gap
            task = next((tid for tid in chain if i in tracks.tasks.get(tid, {})), None)
            if task is not None:
                state = "replaced" if i in tracks.detections.get(task, {}) else "bridged"
            elif _boxed(plan, dets, i, config.hidden_overlap):
                state = "replaced" if i in dets else "bridged"
            elif i in dets:
                state = "unreplaced"
                unreplaced[i] = True
            else:
                box = _interpolated_box(dets, i)
                others = [f.box for f in tracks.others[i].values() if id(f) not in chain_faces]
                if box is not None and _covered(box, others, config.hidden_overlap):
                    state = "hidden"
                else:
                    state = "unreplaced"
                    unreplaced[i] = False
            counts[state][i] += 1
        for a, b in runs(set(unreplaced)):
            length = b - a + 1
            if length < config.min_unreplaced_run:
                continue
            seen = sum(unreplaced[i] for i in range(a, b + 1))
            detail = (
                f"face of track {label} ({plan.tracks[label].identity}) left as the plate for {length} "
                f"frame(s); detected on {seen} of them"
            )
            for i in range(a, b + 1):
                marks.append(
                    Mark(
                        index=i,
                        track=label,
                        reason="unreplaced",
                        severity=SEVERITY_SEEN if unreplaced[i] else SEVERITY_UNSEEN,
                        value=float(length),
                        threshold=float(config.min_unreplaced_run),
                        detail=detail,
                        extra={"tracks": list(chain)},
                    )
                )
    return Coverage(counts=counts, marks=marks)
