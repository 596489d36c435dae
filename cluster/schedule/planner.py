"""Planning a tracked shot's renders: identity per track, gap bridging, smoothing, the face tasks
and render key of every chunk, which segments an earlier run committed, and QC's part that needs
the plan.

It takes tens of milliseconds of CPU per chunk (more with crowds), so it runs in the shot's planner
actor (:mod:`cluster.schedule.shot_worker`), never on the driver's event loop.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cluster.checks.prepare import PlannedShot, PreparedJob
from cluster.report.summary import RerenderedChunk
from cluster.schedule.calls import adapter_identities
from cluster.schedule.shot_run import ChunkRender, segment_home
from cluster.spec.fixes import fix_ops, fix_records, fixes_of_chunk, rerender_reasons
from cluster.spec.job import JobSpec
from cluster.spec.shot_refs import ShotSettings
from cluster.state.keys import JobKeys
from cluster.state.ledger import Ledger
from cluster.state.manifest import SegmentHome
from cluster.state.recover import WantedChunk
from pipeline.geometry.types import Face
from pipeline.passes.tracks import TrackFrame, plan_track_frames
from pipeline.tracking.fixes import FixOp
from pipeline.video.chunking import Chunk
from pipeline.video.encode import EncoderChoice
from pipeline.video.probe import VideoInfo


@dataclass(frozen=True, kw_only=True)
class PlanContext:
    """What planning needs of the job, small enough to hand to every planner actor once."""

    spec: JobSpec
    keys: JobKeys
    work_url: str
    resumed: bool
    earlier_fixes: dict[str, list[dict[str, Any]]]
    embeddings: dict[str, np.ndarray]
    """Identity -> recognizer-space embedding (from the render actors)."""

    @classmethod
    def of(cls, prepared: PreparedJob, embeddings: dict[str, np.ndarray]) -> PlanContext:
        return cls(
            spec=prepared.spec,
            keys=prepared.keys,
            work_url=prepared.work_url,
            resumed=prepared.resumed,
            earlier_fixes=prepared.earlier_fixes,
            embeddings=embeddings,
        )


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
    """Plans tracked shots (in the planner actor that tracked them)."""

    def __init__(self, context: PlanContext, ledger: Ledger) -> None:
        self.context = context
        self.ledger = ledger
        self.embeddings = context.embeddings

    def plan(
        self, shot: PlannedShot, encoder: EncoderChoice, faces: list[list[Face]], track_ids: list[list[int]]
    ) -> ShotRenders:
        """Plan ``shot`` from the faces and track ids of all its frames."""
        from pipeline.tracking.faceplan import plan_shot
        from pipeline.tracking.fixes import apply_fixes, switched_tracks

        spec = self.context.spec
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
        qc = self._plan_qc(shot, numbers, faces, track_ids, face_plan) if spec.qc.enabled else None
        frames_url = shot.ref.output_url if shot.is_sequence else None
        chunks = []
        home = segment_home(shot, self.context.work_url)
        for chunk in shot.renders:
            tasks = face_plan.for_range(chunk.start_frame - first, chunk.end_frame - first)
            key = self.context.keys.render(
                shot.fingerprint,
                chunk,
                encoder,
                tasks,
                shot.settings,
                frames_url,
                fixes=chunk_fixes(shot.settings, shot.info, chunk),
            )
            committed = self.ledger.segment(shot.ref.name, chunk.index, key, home)
            chunks.append(ChunkRender(chunk, tasks, key, committed, affinity=adapter_identities(spec, tasks)))
        chunks = self._recover(shot, chunks, home)
        return ShotRenders(
            tracks=len(face_plan.tracks),
            seconds=seconds,
            chunks=chunks,
            track_frames=records,
            qc=qc,
            rerendered=self._rerendered(shot),
        )

    def _recover(self, shot: PlannedShot, chunks: list[ChunkRender], home: SegmentHome) -> list[ChunkRender]:
        """Chunks of a published video shot whose segments are gone, cut back out of its output (see
        :mod:`cluster.state.recover`) instead of rendered again."""
        if shot.is_sequence:
            return chunks  # its frames are the output's own files: reused where they are
        first = shot.window.delivered[0]
        wanted = [
            WantedChunk(c.chunk.index, c.key, c.chunk.start_frame - first, c.chunk.frame_count)
            for c in chunks
            if c.committed is None
        ]
        recovered = self.ledger.recovered_segments(
            shot.ref.name, wanted, home=home, output_url=shot.ref.output_url
        )
        return [
            dataclasses.replace(c, committed=recovered[c.chunk.index], recut=True)
            if c.chunk.index in recovered
            else c
            for c in chunks
        ]

    def _rerendered(self, shot: PlannedShot) -> dict[int, RerenderedChunk]:
        """The chunks that changed fixes touch, with the fixes (new, changed or removed since the last run)."""
        now = fix_records(shot.settings.fixes)
        earlier = self.context.earlier_fixes.get(shot.ref.name, [])
        if not self.context.resumed or not (now or earlier):
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
        shot: PlannedShot,
        numbers: list[int],
        faces: list[list[Face]],
        track_ids: list[list[int]],
        face_plan: Any,
    ) -> Any:
        """QC's part that needs tracking and the plan (see :mod:`pipeline.qc`)."""
        from pipeline.qc.analyze import ShotQCInputs
        from pipeline.qc.staged import plan_checks

        inputs = ShotQCInputs(
            shot=shot.ref.name,
            numbers=numbers,
            first=shot.plan.first_frame,
            faces=faces,
            track_ids=track_ids,
            plan=face_plan,
            references=self.embeddings,
            selection=shot.settings.selection,
            chunk_starts=[c.start_frame - shot.plan.first_frame for c in shot.plan.chunks],
        )
        return plan_checks(inputs, self.context.spec.qc)


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
