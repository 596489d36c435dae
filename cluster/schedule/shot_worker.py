"""Per-shot work off the driver: each shot's tracker chain, face plan and QC in planner actors.

Tracking (the tracker chained through a shot's chunks in order), planning (identity per track,
smoothing, every chunk's face tasks and render key, the segments an earlier run committed) and QC's
conclusions cost tens to hundreds of milliseconds of CPU per chunk, more with crowds.  On the
driver they made it the bottleneck of a large cluster: at 1,024 actors it was 95 % busy and actors
waited for it longer than their calls took.  A few planner actors (``resources.planner_actors``) do
that work instead, each for the shots handed to it:

* an analysis comes back in two parts (``analyze_chunk_apart``): the driver reads the small one and
  hands the faces to the shot's planner actor as a reference, unread;
* the planner actor commits the analysis record, tracks every chunk that follows the last tracked
  one (committing their tracking records), and once the whole shot is tracked, plans it: it puts
  each chunk's face tasks in Ray's object store and returns their references with the render keys,
  so the render actors read the tasks and the driver never does;
* at publish it finishes QC with the actors' measures and writes the ``tracks`` pass.

Calls to one actor run one at a time in the order the driver made them, so a shot's chain stays
sequential and deterministic: the same tracks, plans, keys and outputs as when the driver did it.
The actors write analysis and tracking records with the job's manifest key; the segments' records
(the commits) and the shot's published record stay with the driver, behind its lease.  The actors
ask Ray for no CPU (the render actors' reservations are unchanged) and are placed on the driver's
node: what they own (the face tasks) lives and dies with the driver, and a lost worker node never
takes a shot's chain with it.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from cluster.checks.prepare import PlannedShot
from cluster.report.cache import file_qc
from cluster.report.qcfile import FiledQC, qc_file_url
from cluster.report.summary import FixMark, fix_marks
from cluster.schedule.planner import PlanContext, ShotPlanner, ShotRenders
from cluster.schedule.shot_finish import finish_qc, write_tracks
from cluster.state.ledger import Ledger
from cluster.state.manifest import JobManifest
from pipeline.errors import RecastError, SpecError
from pipeline.geometry.packing import packed
from pipeline.geometry.types import Face
from pipeline.qc.analyze import ShotQC
from pipeline.qc.records import FaceMeasure
from pipeline.store import storage
from pipeline.store.retries import RetryTally
from pipeline.tracking.tracker import TrackerState, track_chunk
from pipeline.video.encode import EncoderChoice

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShotStep:
    """What one call on a planner actor did for a shot.

    ``reused``: chunks whose analyses an earlier run committed (the first call only); ``tracked``
    chunks and their ``faces``, in ``seconds``; ``renders``: the plan, once every chunk is tracked
    (face tasks as references); ``error``: planning refused (e.g. a fix naming a track not on its
    frames); ``records`` written; ``notes``: the manifest's warnings and records not trusted.
    """

    shot: str
    reused: tuple[int, ...] = ()
    tracked: int = 0
    faces: int = 0
    seconds: float = 0.0
    renders: ShotRenders | None = None
    error: str | None = None
    records: int = 0
    notes: tuple[list[str], list[str]] = ([], [])
    cpu_seconds: float = 0.0
    """The planner actor's CPU time in this call (the driver's would have been)."""
    storage_retries: int = 0
    """The planner actor's object-store retries since its previous answer (its set-up's and
    prefetches' with the first)."""


@dataclass(frozen=True)
class ShotFinish:
    """QC's conclusions of a published shot and its ``tracks`` pass files (pass file -> URL).

    ``qc``: filed (a :class:`~cluster.report.qcfile.FiledQC`: its per-frame series written to the
    shot's QC file and its strip chart drawn here, off the driver), or the whole ``ShotQC`` when the
    file could not be written (the driver tries again and keeps it whole if it cannot either), or
    None (no QC)."""

    qc: Any
    pass_files: dict[str, str]
    cpu_seconds: float = 0.0
    storage_retries: int = 0


@dataclass
class _Shot:
    """A planner actor's state of one shot, from its first call until it is finished or dropped."""

    shot: PlannedShot
    encoder: EncoderChoice
    pending: dict[int, list[list[Face]]] = field(default_factory=dict)
    """Chunk -> its faces, analysed but not tracked yet (an earlier chunk is still out)."""
    next_to_track: int = 0
    state: TrackerState | None = None
    faces: list[list[Face]] = field(default_factory=list)
    track_ids: list[list[int]] = field(default_factory=list)
    planned: bool = False
    track_frames: list[Any] = field(default_factory=list)
    qc_plan: Any = None


class ShotWorker:
    """Tracks, plans and finishes the shots handed to it (the plain class; :data:`ShotWorkerActor`)."""

    def __init__(self, context: PlanContext, manifest_key: bytes | None) -> None:
        # The job's storage settings, as the driver and render actors have them, before the manifest is
        # read; its retries go with each answer (set-up's and prefetches' with the next one).
        self.retries = RetryTally(storage.configure(context.spec.storage))
        self.context = context
        self.manifest = JobManifest(context.work_url, manifest_key)
        self.ledger = Ledger(self.manifest, resumed=context.resumed)
        self.planner = ShotPlanner(context, self.ledger)
        self.shots: dict[str, _Shot] = {}

    def prefetch(self, shots: list[str]) -> None:
        """A resume: read these shots' records ahead, in the order they will be opened."""
        self.ledger.prefetch(shots)

    def ready(self) -> bool:
        """True once the actor is up (its modules imported)."""
        return True

    def open(
        self, shot: PlannedShot, encoder: EncoderChoice, embeddings: dict[str, Any] | None = None
    ) -> ShotStep:
        """Take ``shot`` on; the analyses an earlier run committed are read and tracked now
        (``embeddings``: the identities', when the actor was started before they were known)."""
        cpu = time.thread_time()
        if embeddings is not None:
            self.planner.embeddings = embeddings
        state = self.shots[shot.ref.name] = _Shot(shot, encoder)
        reused = []
        for chunk in shot.plan.chunks:
            key = shot.analysis_keys[chunk.index]
            faces = self.ledger.analysis(shot.ref.name, chunk.index, key, chunk.frame_count)
            if faces is not None:
                state.pending[chunk.index] = faces
                reused.append(chunk.index)
        return self._track(state, reused=tuple(reused), cpu=cpu)

    def add_analysis(self, shot: str, index: int, faces: list[list[Face]], actor: str) -> ShotStep:
        """Commit chunk ``index``'s faces (analysed by ``actor``), then track what is ready."""
        cpu = time.thread_time()
        state = self.shots.get(shot)
        if state is None:  # dropped: the shot failed
            return ShotStep(shot)
        written = self.ledger.records_written
        self.ledger.commit_analysis(shot, index, state.shot.analysis_keys[index], faces, actor)
        state.pending[index] = faces
        return self._track(state, written=written, cpu=cpu)

    def finish(self, shot: str, measures: list[FaceMeasure]) -> ShotFinish:
        """QC's conclusions with the actors' ``measures``, and the ``tracks`` pass (when asked)."""
        cpu = time.thread_time()
        state = self.shots.pop(shot)
        # Its records are final: copied into one object, for a resume to read in one go.
        self.ledger.compact_shot(shot)
        whole = finish_qc(state.qc_plan, measures, self.context.spec.qc)
        qc: ShotQC | FiledQC | None = whole
        if whole is not None:  # filed here: its series are written and its chart drawn off the driver
            url = qc_file_url(self.context.work_url, shot)
            qc = _filed(whole, url=url, fixes=fix_marks(state.shot.settings.fixes))
        pass_urls = state.shot.pass_urls
        files = {}
        if "tracks" in pass_urls:
            files = write_tracks(state.shot, state.track_frames, pass_urls["tracks"], measures)
        return ShotFinish(
            qc, files, cpu_seconds=time.thread_time() - cpu, storage_retries=self.retries.take()
        )

    def drop(self, shot: str) -> None:
        """Forget ``shot`` (it failed)."""
        self.shots.pop(shot, None)

    def _track(
        self, state: _Shot, *, cpu: float, reused: tuple[int, ...] = (), written: int | None = None
    ) -> ShotStep:
        """Track every chunk that follows the last tracked one, in order; plan once all are
        (``cpu``: the thread's CPU time when the call began; ``written``: the records count then)."""
        name, shot = state.shot.ref.name, state.shot
        started = time.perf_counter()
        written = self.ledger.records_written if written is None else written
        tracked = faces = 0
        while state.next_to_track in state.pending:
            index = state.next_to_track
            chunk_faces = state.pending.pop(index)
            state_in = state.state.to_dict() if state.state is not None else None
            key = self.context.keys.track(shot.analysis_keys[index], state_in)
            committed = self.ledger.tracking(name, index, key, len(chunk_faces))
            if committed is not None:
                ids, state.state = committed
            else:
                start = shot.plan.chunks[index].start_frame
                ids, state.state = track_chunk(chunk_faces, start, self.context.spec.tracking, state.state)
                self.ledger.commit_tracking(name, index, key, state_in, state.state, ids)
            state.faces.extend(chunk_faces)
            state.track_ids.extend(ids)
            tracked += 1
            faces += sum(len(f) for f in chunk_faces)
            state.next_to_track += 1
        seconds = time.perf_counter() - started
        renders, error = None, None
        if state.next_to_track == len(shot.plan.chunks) and not state.planned:
            state.planned = True
            try:
                planned = self.planner.plan(shot, state.encoder, state.faces, state.track_ids)
            except SpecError as exc:  # a fix naming a track not on its frames, known only now
                error = str(exc)
            else:
                state.track_frames, state.qc_plan = planned.track_frames, planned.qc
                # Packed: a crowd chunk's thousands of tasks pickle as a few arrays (they arrive as a list).
                chunks = [dataclasses.replace(c, tasks=ray.put(packed(c.tasks))) for c in planned.chunks]
                renders = dataclasses.replace(planned, chunks=chunks, track_frames=[], qc=None)
            state.faces, state.track_ids = [], []  # the plan holds what the shot needs from here
        return ShotStep(
            name,
            reused=reused,
            tracked=tracked,
            faces=faces,
            seconds=seconds,
            renders=renders,
            error=error,
            records=self.ledger.records_written - written,
            notes=self.manifest.take_notes(),
            cpu_seconds=time.thread_time() - cpu,
            storage_retries=self.retries.take(),
        )


ShotWorkerActor = ray.remote(num_cpus=0, max_restarts=0)(ShotWorker)
"""A :class:`ShotWorker` as a Ray actor (one call at a time, in the order they were made)."""


def _filed(qc: ShotQC, *, url: str, fixes: list[FixMark]) -> ShotQC | FiledQC:
    """``qc`` filed (:func:`~cluster.report.cache.file_qc`), or as it is when its file cannot be written."""
    try:
        return file_qc(qc, url=url, name=qc.shot, fixes=fixes)
    except RecastError as exc:
        logger.warning("QC file of %s: %s; the driver tries again", qc.shot, exc)
        return qc


class ShotWorkers:
    """The driver's planner actors (``count``, at most one per shot): each of ``shots`` is handed to
    one, in turn in this order (longest first), and every call on it returns a future the event
    loop waits on beside its other work.  On a resume each reads its shots' records ahead."""

    def __init__(
        self, context: PlanContext, *, manifest_key: bytes | None, count: int, shots: list[str]
    ) -> None:
        # Hard affinity: Ray's soft affinity places a CPU-less actor elsewhere when the driver's node
        # has no CPUs (a head kept free of work), and a planner actor on a worker node dies with it.
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        self._start = lambda: ShotWorkerActor.options(scheduling_strategy=here).remote(context, manifest_key)
        self.actors: list[Any] = [self._start() for _ in range(max(1, min(count, len(shots))))]
        self._shots, self._resumed = shots, context.resumed
        self._assign()
        self.embeddings: dict[str, Any] | None = None
        """The identities' embeddings, when known only after the actors were started (given to each
        shot's first call)."""

    def _assign(self) -> None:
        """Each shot to an actor in turn; on a resume each reads its shots' records ahead."""
        self._of: dict[str, Any] = {s: self.actors[i % len(self.actors)] for i, s in enumerate(self._shots)}
        if self._resumed:
            for i, actor in enumerate(self.actors):
                actor.prefetch.remote(self._shots[i :: len(self.actors)])

    def wait_ready(self, tries: int = 3) -> None:
        """Until every planner actor is up, started before the render actors.  One that could not start
        (e.g. its modules not importable yet while the node unpacks the job's working directory) is
        started again, ``tries`` times in all."""
        for attempt in range(1, tries + 1):
            failed = []
            for i, actor in enumerate(self.actors):
                try:
                    ray.get(actor.ready.remote())
                except RayError as exc:
                    if attempt == tries:
                        raise
                    logger.warning("planner actor %d did not start (%s); starting it again", i, exc)
                    failed.append(i)
            if not failed:
                return
            time.sleep(1.0)
            for i in failed:
                self.actors[i] = self._start()
            self._assign()

    def open(self, shot: PlannedShot, encoder: EncoderChoice) -> Future[ShotStep]:
        return self._of[shot.ref.name].open.remote(shot, encoder, self.embeddings).future()

    def add_analysis(self, shot: str, index: int, faces: Any, actor: str) -> Future[ShotStep]:
        """``faces``: the reference the analysis returned them as (resolved in the planner actor)."""
        return self._of[shot].add_analysis.remote(shot, index, faces, actor).future()

    def finish(self, shot: str, measures: list[FaceMeasure]) -> Future[ShotFinish]:
        return self._of[shot].finish.remote(shot, measures).future()

    def drop(self, shot: str) -> None:
        if shot in self._of:
            self._of[shot].drop.remote(shot)

    def close(self) -> None:
        for actor in self.actors:
            ray.kill(actor)
