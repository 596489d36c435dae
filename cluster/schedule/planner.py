"""Planning a tracked shot's renders on a thread beside the event loop.

Planning a shot (identity per track, gap bridging, smoothing, the face tasks and
render key of every chunk, and which segments an earlier run committed) takes
tens of milliseconds per chunk; on the loop it would hold up every actor that
finishes meanwhile.  One planner thread does it while the loop keeps
dispatching; the loop takes each finished plan and submits its renders.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cluster.checks.prepare import PreparedJob
from cluster.schedule.shot_run import ChunkRender, ShotRun
from cluster.state.ledger import Ledger
from pipeline.geometry.types import Face
from pipeline.passes.tracks import TrackFrame, track_frames


@dataclass(frozen=True)
class ShotRenders:
    """A planned shot: how many tracks, how long planning took, and every chunk's render.

    ``track_frames``: the ``tracks`` pass's records (when asked), kept until the shot is published.
    ``qc``: what QC concluded from tracking and the plan (finished with the actors' measures).
    """

    tracks: int
    seconds: float
    chunks: list[ChunkRender]
    track_frames: list[TrackFrame] = field(default_factory=list)
    qc: Any = None


class ShotPlanner:
    """Plans shots on one thread, in the order they are handed in."""

    def __init__(self, prepared: PreparedJob, ledger: Ledger, embeddings: dict[str, np.ndarray]) -> None:
        self.prepared = prepared
        self.ledger = ledger
        self.embeddings = embeddings
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="plan")

    def submit(
        self, run: ShotRun, faces: list[list[Face]], track_ids: list[list[int]]
    ) -> Future[ShotRenders]:
        """Plan ``run`` from the faces and track ids of all its frames (handed over, not shared)."""
        return self._pool.submit(self._plan, run, faces, track_ids)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _plan(self, run: ShotRun, faces: list[list[Face]], track_ids: list[list[int]]) -> ShotRenders:
        from pipeline.tracking.faceplan import plan_shot

        spec = self.prepared.spec
        shot = run.shot
        started = time.perf_counter()
        first, end = shot.plan.first_frame, shot.plan.end_frame  # faces[0] is frame `first`
        face_plan = plan_shot(
            faces,
            track_ids,
            shot.settings.selection,
            self.embeddings,
            spec.tracking,
            frame_times=shot.info.frame_times()[first:end],
        )
        seconds = time.perf_counter() - started
        numbers = shot.info.frame_numbers(first, end)
        records: list[TrackFrame] = []
        if "tracks" in shot.pass_urls:
            parts = {t: summary.parts or (t,) for t, summary in face_plan.tracks.items()}
            identities = {t: summary.identity for t, summary in face_plan.tracks.items()}
            records = list(
                track_frames(
                    numbers,
                    faces,
                    track_ids,
                    face_plan.tasks,
                    parts=parts,
                    identities=identities,
                    similarity={},
                )
            )
        qc = self._plan_qc(run, numbers, faces, track_ids, face_plan) if spec.qc.enabled else None
        frames_url = shot.ref.output_url if shot.is_sequence else None
        chunks = []
        home = run.segment_home(self.prepared.work_url)
        for chunk in shot.renders:
            tasks = face_plan.for_range(chunk.start_frame - first, chunk.end_frame - first)
            key = self.prepared.keys.render(
                shot.fingerprint, chunk, run.encoder, tasks, shot.settings, frames_url
            )
            chunks.append(
                ChunkRender(chunk, tasks, key, self.ledger.segment(run.name, chunk.index, key, home))
            )
        return ShotRenders(
            tracks=len(face_plan.tracks), seconds=seconds, chunks=chunks, track_frames=records, qc=qc
        )

    def _plan_qc(
        self,
        run: ShotRun,
        numbers: list[int],
        faces: list[list[Face]],
        track_ids: list[list[int]],
        face_plan: Any,
    ) -> Any:
        """QC's part that needs tracking and the plan (see :mod:`pipeline.qc`)."""
        from pipeline.qc.analyze import ShotQCInputs
        from pipeline.qc.staged import plan_checks

        shot = run.shot
        inputs = ShotQCInputs(
            shot=run.name,
            numbers=numbers,
            first=shot.plan.first_frame,
            faces=faces,
            track_ids=track_ids,
            plan=face_plan,
            references=self.embeddings,
            selection=shot.settings.selection,
            chunk_starts=[c.start_frame - shot.plan.first_frame for c in shot.plan.chunks],
        )
        return plan_checks(inputs, self.prepared.spec.qc)
