"""The job driver: probe, plan, analyse, track, render, merge, publish.

Flow of one job (every shot at once, longest shots first)::

    probe every shot (driver)  ->  plan chunks
    analysis of every chunk on the actor pool ............ parallel
    tracking per shot, chunk after chunk, on the driver ... sequential, cheap (TrackerState chained)
    plan the shot's faces (identity per track, smoothing)
    render of every chunk on the actor pool ............... parallel, stateless -> seam-free
    merge the shot's segments (stream copy) as soon as they are all done, publish atomically

The encoder is chosen once per job by an actor (encoding happens there) and
passed to every render call.  Errors in the inputs are found before any
rendering starts (spec, shots, outputs, model pack, source faces) and raised
as :class:`~pipeline.errors.RecastError`; a failure while rendering fails that
shot only, and the summary says which and why.

Ray must already be initialised (``jobs/render.py`` does it).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import ray

from actors.render import ChunkAnalysis, IdentitySource, RenderActor, RenderConfig, SegmentResult
from cluster.dispatch import Dispatcher, Outcome, WorkItem, unwrap
from cluster.pool import PoolPlan, actor_execution_threads, kill_actors, plan_pool, start_actors
from cluster.spec import JobSpec, ShotRef, expand_shots, work_url_for
from cluster.summary import JobSummary, ShotSummary
from pipeline import storage
from pipeline.chunking import ChunkPlan, plan_chunks
from pipeline.encode import EncoderChoice
from pipeline.errors import RecastError, SpecError
from pipeline.faces.types import Face
from pipeline.probe import VideoInfo, probe
from pipeline.tracking import TrackerState, track_chunk

logger = logging.getLogger(__name__)

PROGRESS_EVERY_SECONDS = 10.0
_RENDER, _ANALYZE = 0, 1  # render work first: it finishes shots


@dataclass
class ShotRun:
    """Driver-side state of one shot while the job runs."""

    ref: ShotRef
    info: VideoInfo
    plan: ChunkPlan
    summary: ShotSummary
    rank: int  # 0 = the most work
    encoder: EncoderChoice | None = None
    analyses: dict[int, ChunkAnalysis] = field(default_factory=dict)
    next_to_track: int = 0
    tracker_state: TrackerState | None = None
    faces: list[list[Face]] = field(default_factory=list)
    track_ids: list[list[int]] = field(default_factory=list)
    segments: dict[int, SegmentResult] = field(default_factory=dict)
    started_at: float | None = None
    merging: Future | None = None
    done: bool = False
    info_ref: Any = None  # the VideoInfo put in the object store once, not pickled per call

    @property
    def chunks(self) -> int:
        return len(self.plan.chunks)

    def segment_url(self, work_url: str, index: int) -> str:
        ext = self.encoder.container if self.encoder is not None else "mkv"
        return storage.join(work_url, "segments", self.ref.name, f"{index:05d}.{ext}")


def render_config(spec: JobSpec, pool: PoolPlan) -> RenderConfig:
    """What every actor of the job is built from."""
    execution = spec.models.execution
    if pool.num_gpus == 0 and execution.intra_op_threads == 0:
        # CPU actors share the node's cores: each gets as many threads as CPUs it reserved.
        execution = execution.model_copy(update={"intra_op_threads": actor_execution_threads(pool)})
    return RenderConfig(
        pack_url=spec.models.pack,
        pack_cache_dir=spec.models.cache_dir,
        execution=execution,
        identities={
            name: IdentitySource(images=ident.images, face_index=ident.face_index)
            for name, ident in spec.identities.items()
        },
        faces=spec.faces,
    )


def prepare_shots(spec: JobSpec) -> tuple[list[ShotRef], list[ShotRef], str]:
    """Expand shots, apply ``output.if_exists``, and check the work area is writable.

    Returns (shots to render, shots skipped, work URL).
    """
    shots = expand_shots(spec)
    work_url = work_url_for(spec, shots)
    todo, skipped = [], []
    for shot in shots:
        if storage.exists(shot.output_url):
            if spec.output.if_exists == "fail":
                raise SpecError(
                    "output.if_exists",
                    f"{shot.output_url} already exists (set if_exists: skip or overwrite)",
                )
            if spec.output.if_exists == "skip":
                skipped.append(shot)
                continue
        todo.append(shot)
    storage.check_writable(work_url)
    # An unwritable destination must fail the job now, not after hours of rendering.
    for parent in sorted({_parent(shot.output_url) for shot in todo}):
        storage.check_writable(parent)
    return todo, skipped, work_url


def _parent(url: str) -> str:
    return url.rsplit("/", 1)[0] if "/" in url else "."


def probe_shots(spec: JobSpec, shots: list[ShotRef]) -> list[tuple[ShotRef, VideoInfo, ChunkPlan]]:
    """Probe and plan every shot up front: a bad input fails the job before any rendering."""
    out = []
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="probe") as pool:
        infos = list(pool.map(lambda s: probe(s.url), shots))
    for shot, info in zip(shots, infos, strict=True):
        plan = plan_chunks(
            info,
            spec.chunking.seconds,
            min_seconds=spec.chunking.min_seconds,
            max_seconds=spec.chunking.max_seconds,
            snap_to_keyframes=spec.chunking.snap_to_keyframes,
        )
        out.append((shot, info, plan))
    return out


def shared_storage_warnings(work_url: str, shots: list[ShotRef]) -> list[str]:
    """Local paths only work on a multi-node cluster if they are a shared filesystem: say so."""
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if len(nodes) < 2:
        return []
    warnings = []
    local = [s.url for s in shots if storage.is_local(s.url)]
    if local:
        warnings.append(
            f"{len(nodes)} nodes but {len(local)} shot(s) on local paths (e.g. {local[0]}): "
            "every node must see them (shared filesystem), or use s3:// / gs:// URLs"
        )
    if storage.is_local(work_url):
        warnings.append(
            f"{len(nodes)} nodes but the work area {work_url} is a local path: actors on other nodes "
            "write segments there, so it must be a shared filesystem (or set output.work_url to s3:// / gs://)"
        )
    for warning in warnings:
        logger.warning("%s", warning)
    return warnings


class JobRunner:
    """Runs one job on the current Ray cluster; ``run()`` returns its summary."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.started = time.perf_counter()
        self.actors: list[tuple[str, Any]] = []
        self.pool: PoolPlan | None = None
        self.config: RenderConfig | None = None
        self.embeddings: dict[str, np.ndarray] = {}
        self.runs: dict[str, ShotRun] = {}
        self.summary: JobSummary | None = None
        self._merger = ThreadPoolExecutor(max_workers=2, thread_name_prefix="merge")
        self._next_label = 0

    def _elapsed(self) -> float:
        return time.perf_counter() - self.started

    # -- set-up -------------------------------------------------------------------------------

    def _start_pool(self, work_items: int) -> None:
        res = self.spec.resources
        self.pool = plan_pool(
            ray.cluster_resources(),
            gpus_per_actor=res.gpus_per_actor,
            cpus_per_actor=res.cpus_per_actor,
            max_actors=res.max_actors,
            work_items=work_items,
        )
        self.config = render_config(self.spec, self.pool)
        self.actors = start_actors(self.config, self.pool)
        self._next_label = len(self.actors)

    def _replace_actor(self, dead_label: str) -> tuple[str, Any]:
        assert self.pool is not None and self.config is not None
        label = f"actor-{self._next_label}"
        self._next_label += 1
        handle = RenderActor.options(**self.pool.options()).remote(self.config, label)
        logger.warning("replacing %s with %s", dead_label, label)
        self.actors.append((label, handle))  # so that it is killed at the end too
        return label, handle

    def _warm_actors(self) -> list[dict[str, Any]]:
        """Wait for every actor's set-up; a set-up error (pack, source face) is raised by name."""
        try:
            infos = ray.get([handle.info.remote() for _, handle in self.actors])
        except Exception as exc:
            cause = unwrap(exc)
            if isinstance(cause, RecastError):
                raise cause from None
            raise
        self.embeddings = ray.get(self.actors[0][1].identity_embeddings.remote())
        return infos

    # -- the job ------------------------------------------------------------------------------

    def run(self) -> JobSummary:
        spec = self.spec
        todo, skipped, work_url = prepare_shots(spec)
        planned = probe_shots(spec, todo)
        summary = JobSummary(
            job_id=spec.job_id, work_url=work_url, shots=[], started_at_epoch=time.time() - self._elapsed()
        )
        self.summary = summary
        for shot in skipped:
            summary.shots.append(ShotSummary(shot.name, shot.url, shot.output_url, status="skipped"))
        # Longest work first: by frames x pixels.
        planned.sort(key=lambda p: -(p[1].frame_count * p[1].width * p[1].height))
        for rank, (shot, info, plan) in enumerate(planned):
            shot_summary = ShotSummary(shot.name, shot.url, shot.output_url, chunks=len(plan.chunks))
            summary.shots.append(shot_summary)
            self.runs[shot.name] = ShotRun(shot, info, plan, shot_summary, rank)
        if not planned:
            summary.wall_seconds = self._elapsed()
            self._write_summary(summary)
            return summary

        summary.warnings.extend(shared_storage_warnings(work_url, [p[0] for p in planned]))
        total_chunks = sum(len(p[2].chunks) for p in planned)
        self._start_pool(total_chunks)
        assert self.pool is not None
        try:
            summary.actor_info = self._warm_actors()
            summary.actors = len(self.actors)
            summary.setup_seconds = self._elapsed()
            for info in summary.actor_info:
                summary.warnings.extend(w for w in info.get("warnings", []) if w not in summary.warnings)
            runs = list(self.runs.values())
            encoders = ray.get(
                self.actors[0][1].choose_encoders.remote(
                    spec.output.encode_settings(), [r.info for r in runs]
                )
            )
            for run, encoder in zip(runs, encoders, strict=True):
                run.encoder = encoder
                run.summary.encoder = encoder.name
            logger.info(
                "job %s: %d shot(s), %d chunk(s), %d actor(s) warm after %.1fs",
                spec.job_id,
                len(runs),
                total_chunks,
                len(self.actors),
                summary.setup_seconds,
            )
            self._loop(runs, work_url)
            if all(r.summary.status == "published" for r in runs):
                # Every shot's segments are already gone; drop their empty parent too.
                storage.remove(storage.join(work_url, "segments"), recursive=True)
        finally:
            self._merger.shutdown(wait=True)
            kill_actors(self.actors)
        summary.wall_seconds = self._elapsed()
        self._write_summary(summary)
        return summary

    def _loop(self, runs: list[ShotRun], work_url: str) -> None:
        spec = self.spec
        dispatcher = Dispatcher(
            self.actors,
            max_inflight=spec.resources.max_inflight_per_actor,
            replace_actor=self._replace_actor,
        )
        for run in runs:
            run.started_at = time.perf_counter()
            run.info_ref = ray.put(run.info)
            for chunk in run.plan.chunks:
                dispatcher.submit(
                    WorkItem(
                        priority=(_ANALYZE, run.rank, chunk.index),
                        kind="analyze",
                        shot=run.ref.name,
                        chunk=chunk.index,
                        call=_analyze_call(run, chunk),
                    )
                )
        last_progress = time.perf_counter()
        while not all(r.done for r in runs):
            if dispatcher.idle:
                # Only merges are left: sleep on them instead of spinning (the merge threads need the GIL).
                merges = [r.merging for r in runs if r.merging is not None]
                if not merges:
                    raise RuntimeError("driver stalled: no work in flight and no merge running")
                wait_futures(merges, timeout=0.5, return_when=FIRST_COMPLETED)
            for outcome in dispatcher.wait(timeout=0.5):
                self._handle(outcome, dispatcher, work_url)
            for run in runs:
                if run.merging is not None and run.merging.done():
                    self._finish_merge(run, work_url)
            if time.perf_counter() - last_progress >= PROGRESS_EVERY_SECONDS:
                last_progress = time.perf_counter()
                self._log_progress(runs, dispatcher)
        self.retries = dispatcher.retries

    def _handle(self, outcome: Outcome, dispatcher: Dispatcher, work_url: str) -> None:
        item = outcome.item
        run = self.runs[item.shot]
        end = self._elapsed()
        # The actor's own run time when known (excludes waiting behind its previous call).
        busy = outcome.seconds
        if isinstance(outcome.value, SegmentResult):
            busy = outcome.value.wall_seconds
        elif isinstance(outcome.value, ChunkAnalysis):
            busy = outcome.value.stage_seconds.get("wall", busy)
        run.summary.timeline.append(
            {
                "kind": item.kind,
                "shot": item.shot,
                "chunk": item.chunk,
                "actor": item.actor,
                "attempt": item.attempts,
                "start": round(end - busy, 3),
                "end": round(end, 3),
                "ok": outcome.error is None,
            }
        )
        if run.done:
            return  # the shot already failed; late results are dropped
        if outcome.error is not None:
            self._fail(run, f"{item.kind} of chunk {item.chunk} failed: {outcome.error}")
            dispatcher.drop(item.shot)
            return
        if item.kind == "analyze":
            if self.summary is not None and self.summary.first_analysis_seconds is None:
                self.summary.first_analysis_seconds = self._elapsed()
            analysis: ChunkAnalysis = outcome.value
            run.analyses[analysis.chunk_index] = analysis
            run.summary.add_stages({k: v for k, v in analysis.stage_seconds.items() if k != "wall"})
            self._track_ready(run)
            if run.next_to_track == run.chunks:
                self._plan_and_render(run, dispatcher, work_url)
        else:
            result: SegmentResult = outcome.value
            if self.summary is not None and self.summary.first_chunk_seconds is None:
                self.summary.first_chunk_seconds = self._elapsed()
            run.segments[result.chunk_index] = result
            run.summary.add_stages(result.stage_seconds)
            run.summary.faces_swapped += result.faces_swapped
            for role, providers in result.providers.items():
                run.summary.providers.setdefault(role, list(providers))
            if len(run.segments) == run.chunks:
                self._start_merge(run)

    def _track_ready(self, run: ShotRun) -> None:
        """Track every analysed chunk that follows the last tracked one, in order."""
        started = time.perf_counter()
        while run.next_to_track in run.analyses:
            analysis = run.analyses.pop(run.next_to_track)
            ids, run.tracker_state = track_chunk(
                analysis.faces, analysis.start_frame, self.spec.tracking, run.tracker_state
            )
            run.faces.extend(analysis.faces)
            run.track_ids.extend(ids)
            run.summary.faces_detected += analysis.face_count
            run.next_to_track += 1
        run.summary.add_stages({"track": time.perf_counter() - started})

    def _plan_and_render(self, run: ShotRun, dispatcher: Dispatcher, work_url: str) -> None:
        from pipeline.faceplan import plan_shot

        started = time.perf_counter()
        face_plan = plan_shot(
            run.faces, run.track_ids, self.spec.selection, self.embeddings, self.spec.tracking
        )
        run.summary.tracks = len(face_plan.tracks)
        run.faces, run.track_ids = [], []  # no longer needed: keep the driver small
        run.summary.add_stages({"plan": time.perf_counter() - started})
        assert run.encoder is not None
        for chunk in run.plan.chunks:
            tasks = face_plan.for_range(chunk.start_frame, chunk.end_frame)
            dispatcher.submit(
                WorkItem(
                    priority=(_RENDER, run.rank, chunk.index),
                    kind="render",
                    shot=run.ref.name,
                    chunk=chunk.index,
                    call=_render_call(run, chunk, tasks, run.encoder, run.segment_url(work_url, chunk.index)),
                )
            )

    def _start_merge(self, run: ShotRun) -> None:
        from pipeline.merge import merge_segments

        urls = [run.segments[i].url for i in range(run.chunks)]
        run.summary.chunk_actors = [run.segments[i].actor for i in range(run.chunks)]
        run.merging = self._merger.submit(
            merge_segments, urls, run.info, run.ref.output_url, audio_source_url=run.ref.url
        )

    def _finish_merge(self, run: ShotRun, work_url: str) -> None:
        future, run.merging = run.merging, None
        assert future is not None
        try:
            stats = future.result()
        except Exception as exc:  # noqa: BLE001 - fails this shot only
            self._fail(run, f"merge failed: {exc}")
            return
        if stats.frames != run.info.frame_count:
            self._fail(run, f"merged {stats.frames} frames, source has {run.info.frame_count}")
            return
        run.summary.add_stages({"merge": stats.seconds})
        run.summary.frames = stats.frames
        run.summary.output_bytes = stats.bytes
        run.summary.status = "published"
        run.summary.seconds = time.perf_counter() - (run.started_at or self.started)
        run.done = True
        logger.info(
            "shot %s published: %s (%d frames, %.1f fps)",
            run.ref.name,
            run.ref.output_url,
            stats.frames,
            run.summary.fps,
        )
        try:
            storage.remove(storage.join(work_url, "segments", run.ref.name), recursive=True)
        except RecastError as exc:
            logger.warning("could not clean segments of %s: %s", run.ref.name, exc)

    def _fail(self, run: ShotRun, message: str) -> None:
        logger.error("shot %s failed: %s", run.ref.name, message)
        run.summary.status = "failed"
        run.summary.error = message
        run.summary.seconds = time.perf_counter() - (run.started_at or self.started)
        run.done = True

    def _log_progress(self, runs: list[ShotRun], dispatcher: Dispatcher) -> None:
        total = sum(r.info.frame_count for r in runs)
        analysed = sum(
            r.plan.chunks[i].frame_count for r in runs for i in range(min(r.next_to_track, r.chunks))
        )
        rendered = sum(s.frames for r in runs for s in r.segments.values())
        elapsed = self._elapsed()
        fps = rendered / elapsed if elapsed > 0 else 0.0
        logger.info(
            "progress: analysed %d/%d, rendered %d/%d frames (%.1f fps), %d in flight, %d pending, %d retries",
            analysed,
            total,
            rendered,
            total,
            fps,
            dispatcher.inflight,
            dispatcher.pending,
            dispatcher.retries,
        )

    def _write_summary(self, summary: JobSummary) -> None:
        import json

        url = storage.join(summary.work_url, "summary.json")
        try:
            storage.write_bytes(url, json.dumps(summary.to_dict(), indent=2, default=str).encode())
        except RecastError as exc:
            logger.warning("could not write %s: %s", url, exc)


def _analyze_call(run: ShotRun, chunk: Any):
    url, info = run.ref.url, run.info_ref if run.info_ref is not None else run.info
    return lambda actor: actor.analyze_chunk.remote(url, info, chunk)


def _render_call(run: ShotRun, chunk: Any, tasks: list, encoder: EncoderChoice, segment_url: str):
    url, info = run.ref.url, run.info_ref if run.info_ref is not None else run.info
    return lambda actor: actor.render_chunk.remote(url, info, chunk, tasks, encoder, segment_url)


def run_job(spec: JobSpec) -> JobSummary:
    """Render every shot of ``spec`` on the current Ray cluster and return the summary.

    Raises RecastError for problems found before rendering (spec, inputs,
    outputs, model pack, source faces); render failures are reported per shot
    in the summary (``summary.ok`` is False).
    """
    return JobRunner(spec).run()
