"""Real shots for the QC tests: detections of the default pack on real face clips, tracked and planned."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import cv2
import numpy as np

from pipeline.faces.analyze import FaceAnalyzer
from pipeline.faces.config import SelectionConfig
from pipeline.geometry.types import Face
from pipeline.qc.analyze import ShotQC, ShotQCInputs, analyze_shot
from pipeline.qc.config import QcConfig
from pipeline.qc.records import GRID, FaceMeasure
from pipeline.tracking.faceplan import ShotFacePlan, plan_shot
from pipeline.tracking.tracker import TrackingConfig, track_chunk
from tests.faces_data import render_clip

FIRST_NUMBER = 1001  # a plate sequence's own numbering
FIRST_POSITION = 48  # the shot starts this far into its source
N = 26
"""Frames of :func:`occluded_frames`."""


@dataclass
class RealShot:
    faces: list[list[Face]]
    track_ids: list[list[int]]
    plan: ShotFacePlan

    @property
    def numbers(self) -> list[int]:
        return list(range(FIRST_NUMBER, FIRST_NUMBER + len(self.faces)))


def detect(models, frames: Sequence[np.ndarray]) -> list[list[Face]]:
    return FaceAnalyzer(models).analyze(frames)


def track_and_plan(
    faces: list[list[Face]],
    selection: SelectionConfig,
    refs: Mapping[str, np.ndarray] | None = None,
    tracking: TrackingConfig | None = None,
) -> RealShot:
    config = tracking or TrackingConfig()
    ids, _ = track_chunk(faces, 0, config, None)
    times = [i / 24.0 for i in range(len(faces))]
    plan = plan_shot(faces, ids, selection, refs or {}, config, frame_times=times)
    return RealShot(faces, ids, plan)


def qc_inputs(
    shot: RealShot,
    *,
    selection: SelectionConfig,
    refs: Mapping[str, np.ndarray] | None = None,
    chunk_starts: Sequence[int] = (0,),
    plan: ShotFacePlan | None = None,
) -> ShotQCInputs:
    """QC's inputs of ``shot`` (``plan``: another plan of its faces, e.g. with shaken landmarks)."""
    return ShotQCInputs(
        shot="sh010",
        numbers=shot.numbers,
        first=FIRST_POSITION,
        faces=shot.faces,
        track_ids=shot.track_ids,
        plan=plan or shot.plan,
        references=refs or {},
        selection=selection,
        chunk_starts=chunk_starts,
    )


def qc(
    shot: RealShot,
    *,
    selection: SelectionConfig,
    measures: Sequence[FaceMeasure] = (),
    refs: Mapping[str, np.ndarray] | None = None,
    config: QcConfig | None = None,
    chunk_starts: Sequence[int] = (0,),
    plan: ShotFacePlan | None = None,
) -> ShotQC:
    inputs = qc_inputs(shot, selection=selection, refs=refs, chunk_starts=chunk_starts, plan=plan)
    return analyze_shot(inputs, measures, config or QcConfig())


def still_measures(
    plan: ShotFacePlan, out: Sequence[float], plate: Sequence[float], seam: Sequence[float]
) -> list[FaceMeasure]:
    """A measure per task whose grids are uniform at the given levels per analysed frame."""
    cells = GRID * GRID * 3
    return [
        FaceMeasure(
            frame=FIRST_POSITION + i,
            track=task.track_id,
            identity=task.identity,
            similarity_after=None,
            out_grid=(float(out[i]),) * cells,
            plate_grid=(float(plate[i]),) * cells,
            seam=float(seam[i]),
            matte=0.9,
        )
        for i, tasks in enumerate(plan.tasks)
        for task in tasks
    ]


def with_landmarks(plan: ShotFacePlan, shift: Mapping[int, np.ndarray]) -> ShotFacePlan:
    """The plan with each frame's task landmarks moved by ``shift[frame]`` ((5, 2) pixels)."""
    tasks = [
        [
            replace(t, landmarks=(t.landmarks + shift[i]).astype(np.float32)) if i in shift else t
            for t in frame
        ]
        for i, frame in enumerate(plan.tasks)
    ]
    return ShotFacePlan(tasks=tasks, tracks=dict(plan.tracks))


def numbers_of(flags, reason: str) -> list[int]:
    """Every frame number covered by the flags of ``reason``, sorted."""
    return sorted({n for f in flags if f.reason == reason for n in range(f.first, f.last + 1)})


def occluded_frames() -> list[np.ndarray]:
    """A still real face; a dark board 150 px wide slides across it, 15 px a frame."""
    clip = render_clip([lambda t: (160.0, 120.0)], N, seed=1)
    frames = []
    for t, frame in enumerate(clip.frames):
        frame = frame.copy()
        x = -120 + 15 * t
        cv2.rectangle(frame, (x, 30), (x + 150, 215), (40, 44, 40), -1)
        frames.append(frame)
    return frames
