"""Planning a tracked shot's renders on a thread beside the event loop.

Planning a shot (identity per track, gap bridging, smoothing, the face tasks and
render key of every chunk, and which segments an earlier run committed) takes
tens of milliseconds per chunk; on the loop it would hold up every actor that
finishes meanwhile.  One planner thread does it while the loop keeps
dispatching; the loop takes each finished plan and submits its renders.
"""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cluster.checks.prepare import PreparedJob
from cluster.report.summary import RerenderedChunk
from cluster.schedule.shot_run import ChunkRender, ShotRun
from cluster.spec.fixes import fix_ops, fix_records, fixes_of_chunk, rerender_reasons
from cluster.spec.shot_refs import ShotSettings
from cluster.state.ledger import Ledger
from cluster.state.manifest import SegmentHome
from cluster.state.recover import PublishedMovies, WantedChunk
from pipeline.geometry.types import Face
from pipeline.passes.tracks import TrackFrame, plan_track_frames
from pipeline.tracking.fixes import FixOp
from pipeline.video.chunking import Chunk
from pipeline.video.probe import VideoInfo


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
    rerendered: dict[int, RerenderedChunk] = field(default_factory=dict)
    """Chunk -> why it renders again when changed fixes touch it (used for the chunks not reused)."""


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
        from pipeline.tracking.fixes import apply_fixes, switched_tracks

        spec = self.prepared.spec
        shot = run.shot
        started = time.perf_counter()
        first, end = shot.plan.first_frame, shot.plan.end_frame  # faces[0] is frame `first`
        ops = shot_fix_ops(shot.settings, first_number=shot.info.frame_number(first))
        face_plan = plan_shot(
            faces,
            track_ids,
            shot.settings.selection,
            self.embeddings,
            spec.tracking,
            frame_times=shot.info.frame_times()[first:end],
            also_render=switched_tracks(ops),
        )
        face_plan = apply_fixes(face_plan, ops)  # a fix naming a track not on its frames: SpecError
        seconds = time.perf_counter() - started
        numbers = shot.info.frame_numbers(first, end)
        records: list[TrackFrame] = []
        if "tracks" in shot.pass_urls:
            records = plan_track_frames(numbers, faces, track_ids, face_plan, fixes=ops)
        qc = self._plan_qc(run, numbers, faces, track_ids, face_plan) if spec.qc.enabled else None
        frames_url = shot.ref.output_url if shot.is_sequence else None
        chunks = []
        home = run.segment_home(self.prepared.work_url)
        for chunk in shot.renders:
            tasks = face_plan.for_range(chunk.start_frame - first, chunk.end_frame - first)
            key = self.prepared.keys.render(
                shot.fingerprint,
                chunk,
                run.encoder,
                tasks,
                shot.settings,
                frames_url,
                fixes=chunk_fixes(shot.settings, shot.info, chunk),
            )
            chunks.append(
                ChunkRender(chunk, tasks, key, self.ledger.segment(run.name, chunk.index, key, home))
            )
        chunks = self._recover(run, chunks, home)
        return ShotRenders(
            tracks=len(face_plan.tracks),
            seconds=seconds,
            chunks=chunks,
            track_frames=records,
            qc=qc,
            rerendered=self._rerendered(run),
        )

    def _recover(self, run: ShotRun, chunks: list[ChunkRender], home: SegmentHome) -> list[ChunkRender]:
        """Chunks of a published video shot whose segments are gone, cut back out of its output (see
        :mod:`cluster.state.recover`) instead of rendered again."""
        shot = run.shot
        if shot.is_sequence:
            return chunks  # its frames are the output's own files: reused where they are
        first = shot.window.delivered[0]
        wanted = [
            WantedChunk(c.chunk.index, c.key, c.chunk.start_frame - first, c.chunk.frame_count)
            for c in chunks
            if c.committed is None
        ]
        movies = PublishedMovies(
            shot.ref.output_url, {name: url for name, url in shot.pass_urls.items() if name != "tracks"}
        )
        recovered = self.ledger.recovered_segments(run.name, wanted, home=home, movies=movies)
        return [
            dataclasses.replace(c, committed=recovered[c.chunk.index], recut=True)
            if c.chunk.index in recovered
            else c
            for c in chunks
        ]

    def _rerendered(self, run: ShotRun) -> dict[int, RerenderedChunk]:
        """The chunks that changed fixes touch, with the fixes (new, changed or removed since the last run)."""
        shot = run.shot
        now = fix_records(shot.settings.fixes)
        earlier = self.prepared.earlier_fixes.get(run.name, [])
        if not self.prepared.resumed or not (now or earlier):
            return {}  # a first run renders everything: nothing is rendered again
        out = {}
        for chunk in shot.renders:
            first, last = (
                shot.info.frame_number(chunk.start_frame),
                shot.info.frame_number(chunk.end_frame - 1),
            )
            reasons = rerender_reasons(now, earlier, first, last)
            if reasons:
                out[chunk.index] = RerenderedChunk(chunk.index, (first, last), tuple(reasons))
        return out

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


def shot_fix_ops(settings: ShotSettings, *, first_number: int) -> list[FixOp]:
    """The shot's fixes in shot frame indices (0: the frame numbered ``first_number``); a box without an
    identity of its own takes the shot's selection source (mode reference: its first reference's)."""
    selection = settings.selection
    default = selection.source
    if selection.mode == "reference" and selection.references:
        default = min(selection.references.items())[1]
    return fix_ops(settings.fixes, first_number=first_number, default_identity=default, field=settings.field)


def chunk_fixes(settings: ShotSettings, info: VideoInfo, chunk: Chunk) -> list[dict[str, Any]]:
    """The fixes touching ``chunk``'s frames, canonical: what of the fixes enters its render key."""
    return fixes_of_chunk(
        settings.fixes, info.frame_number(chunk.start_frame), info.frame_number(chunk.end_frame - 1)
    )
