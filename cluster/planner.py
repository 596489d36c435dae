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
from dataclasses import dataclass

import numpy as np

from cluster.checks import PreparedJob
from cluster.keys import RenderKey
from cluster.ledger import Ledger
from cluster.manifest import RenderRecord
from cluster.shot_run import ShotRun
from pipeline.chunking import Chunk
from pipeline.faces.types import Face, FaceTask


@dataclass(frozen=True)
class ChunkRender:
    """One chunk's render: its face tasks, its key, and the segment an earlier run committed, if any."""

    chunk: Chunk
    tasks: list[list[FaceTask]]
    key: RenderKey
    committed: RenderRecord | None


@dataclass(frozen=True)
class ShotRenders:
    """A planned shot: how many tracks, how long planning took, and every chunk's render."""

    tracks: int
    seconds: float
    chunks: list[ChunkRender]


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
        from pipeline.faceplan import plan_shot

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
        frames_url = shot.ref.output_url if shot.is_sequence else None
        chunks = []
        for chunk in shot.renders:
            tasks = face_plan.for_range(chunk.start_frame - first, chunk.end_frame - first)
            key = self.prepared.keys.render(
                shot.fingerprint, chunk, run.encoder, tasks, shot.settings, frames_url
            )
            chunks.append(ChunkRender(chunk, tasks, key, self.ledger.segment(run.name, chunk.index, key)))
        return ShotRenders(tracks=len(face_plan.tracks), seconds=seconds, chunks=chunks)
