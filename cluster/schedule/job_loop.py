"""The driver's event loop: dispatch analyses, hand their faces to the planner actors, dispatch
renders, merge.

Analyses of every chunk are dispatched at once; as each comes back, its faces go (unread) to the
shot's planner actor (:mod:`cluster.schedule.shot_worker`), which chains the shot's tracker through
every analysed chunk that follows the last tracked one and, once the shot is fully tracked, plans
it; the loop dispatches the renders of each plan it gets back.  When all a shot's segments are
committed it is merged and published on the publisher's threads, and its planner actor finishes its
QC.  Renders go before analyses (they finish shots; see :mod:`cluster.schedule.work_queue`).  The
driver's own work per chunk is bookkeeping.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future
from concurrent.futures import wait as wait_futures
from typing import Any

import numpy as np
from ray.exceptions import ObjectLostError, RayActorError

from actors.results import ActorInfo, ChunkAnalysis, SegmentResult
from cluster.checks.prepare import PreparedJob
from cluster.checks.provenance import JobProvenance
from cluster.publish.merge import Published, Publisher
from cluster.publish.review import publish_review
from cluster.publish.sequences import complete_sequence
from cluster.report.summary import ReviewOutputs
from cluster.schedule.calls import (
    analysis_item,
    render_item,
    reused_segment,
    segment_record,
    segment_sha256,
    sequence_frames,
)
from cluster.schedule.dispatch import Dispatcher, Elasticity, Outcome
from cluster.schedule.observer import JobObserver, ShotSource
from cluster.schedule.planner import PlanContext, ShotRenders
from cluster.schedule.pool import IDLE_RELEASE_SECONDS, ActorPool, ClusterRoom, draining_nodes, ready_ref
from cluster.schedule.shot_finish import measures_of, review_job
from cluster.schedule.shot_run import ChunkRender, ShotRun, log_progress
from cluster.schedule.shot_worker import ShotFinish, ShotStep, ShotWorkers
from cluster.schedule.work_queue import WorkItem
from cluster.state.ledger import Ledger
from pipeline.errors import ChecksumError
from pipeline.store import storage
from pipeline.thumbnails import boundary_frames

logger = logging.getLogger(__name__)

PROGRESS_EVERY_SECONDS = 10.0
REPOLL_AFTER_SECONDS = 0.002
TURN_SECONDS = 0.5
"""While results keep coming, finished plans and merges are taken at least this often."""
WORK_ATTEMPTS = 2
"""Tries of a chunk whose work raised (not a lost actor): a deterministic failure then fails its shot.
A full work area is not tried again: it stops the job (:meth:`JobLoop._stop_full`)."""


class JobLoop:
    """One run of a prepared job on a warm actor pool; :meth:`run` returns when every shot is done."""

    def __init__(
        self,
        prepared: PreparedJob,
        *,
        ledger: Ledger,
        observer: JobObserver,
        provenance: JobProvenance,
        publisher: Publisher,
        pool: ActorPool,
        starting: dict[str, Any],
        infos: list[ActorInfo],
        runs: list[ShotRun],
        embeddings: dict[str, np.ndarray],
        workers: ShotWorkers,
    ) -> None:
        self.spec = prepared.spec
        self.prepared = prepared
        self.ledger = ledger
        self.observer = observer
        self.provenance = provenance
        self.publisher = publisher
        self.runs = runs
        self.by_name = {r.name: r for r in runs}
        self.merging: dict[str, Future[Published]] = {}
        self.reviews: dict[str, Future[ReviewOutputs]] = {}
        """Shot -> its review media being written (``output.review``), collected by the driver."""
        workers.embeddings = embeddings  # started before the identities' embeddings were known
        self.workers = workers
        self.steps: dict[Future[ShotStep], tuple[str, int | None]] = {}
        """Calls on the planner actors in flight -> (shot, the chunk whose faces it took or None: the
        shot's first call)."""
        self.stepped: deque[Future[ShotStep]] = deque()
        """Those done, in the order they finished (appended by Ray's thread as each completes, so the
        loop never scans the thousands in flight)."""
        self.faces: dict[tuple[str, int], Any] = {}
        """(shot, chunk) -> the faces of an analysis in flight (a reference the driver never reads)."""
        self.finishing: dict[str, tuple[Published, Future[ShotFinish]]] = {}
        """Shot -> its published output while its planner actor finishes its QC and tracks pass."""
        self.open_shots = len(runs)
        self.unplanned_chunks = sum(r.renders for r in runs)
        """Chunks whose renders are not dispatched yet: actors are kept for them."""
        sized = self.spec.resources.max_actors is not None
        self.dispatcher = Dispatcher(
            pool.actors,
            max_inflight=self.spec.resources.max_inflight_per_actor,
            replace_actor=pool.start,
            on_retry=observer.retried,
            starting=starting,
            elastic=Elasticity(
                start_actor=lambda: pool.start(""),
                ready_call=ready_ref,
                # Sized by the spec: that many.  Unsized: the pool grows with the cluster, never past
                # the chunks there are (ClusterRoom).
                max_actors=pool.plan.actors if sized else max(pool.plan.actors, prepared.chunk_count),
                idle_release_seconds=IDLE_RELEASE_SECONDS,
                upcoming=lambda: self.unplanned_chunks,
                room=None if sized else ClusterRoom(pool.plan),
                draining=draining_nodes,
            ),
            order=self.spec.resources.dispatch_order,
            infos={info.label: info for info in infos},
        )

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> None:
        initial = set(self.dispatcher.infos)  # the warm pool's, already in the summary
        for run in self.runs:
            run.started_at = time.perf_counter()
            self._step(run.name, None, self.workers.open(run.shot, run.encoder))
            if not self.prepared.resumed:  # nothing to reuse: analyse every chunk now
                self._submit_analyses(run, reused=())
        try:
            self._loop()
        finally:
            self.workers.close()
        # Actors that joined later (e.g. on new nodes) too.
        self.observer.actors_joined([i for label, i in self.dispatcher.infos.items() if label not in initial])
        self.observer.pool_losses(self.dispatcher.lost, len(self.dispatcher.drained))
        self.observer.dispatch_delays = self.dispatcher.dispatch_delays

    def _loop(self) -> None:
        """Handle results one by one; between them, hand freed actors their next work and, every
        ``TURN_SECONDS``, take finished plans and merges, so no backlog holds an actor idle."""
        outcomes: deque[Outcome] = deque()
        last_turn = last_progress = time.perf_counter()
        while self.open_shots:
            if not outcomes:
                if self.dispatcher.idle:
                    # Only planner calls and merges are left: sleep on them.
                    waiting: list[Future[Any]] = [
                        *self.steps,
                        *self.merging.values(),
                        *(f for _, f in self.finishing.values()),
                    ]
                    if not waiting:
                        raise RuntimeError("driver stalled: no work in flight, no plan or merge running")
                    wait_futures(waiting, timeout=0.5, return_when=FIRST_COMPLETED)
                self._take_finished_threads()
                last_turn = time.perf_counter()
                busy = self.steps or self.merging or self.finishing
                outcomes.extend(self.dispatcher.wait(timeout=0.05 if busy else 0.5))
            else:
                started = time.perf_counter()
                self._handle(outcomes.popleft())
                now = time.perf_counter()
                if now - started > REPOLL_AFTER_SECONDS:
                    # Handling took a while: actors that finished meanwhile get their next work now.
                    outcomes.extend(self.dispatcher.wait(timeout=0))
                if now - last_turn > TURN_SECONDS:
                    self._take_finished_threads()
                    last_turn = now
            if time.perf_counter() - last_progress >= PROGRESS_EVERY_SECONDS:
                last_progress = time.perf_counter()
                log_progress(self.runs, self.dispatcher, self.observer.elapsed())
                self.observer.write_report(finished=False)

    def _take_finished_threads(self) -> None:
        """Take what the planner actors did (dispatching the renders of planned shots); finish the shots
        whose merge finished; record the shots whose QC finished."""
        while self.stepped:
            future = self.stepped.popleft()
            name, index = self.steps.pop(future)
            self._take_step(self.by_name[name], index, future)
        for name in [n for n, f in self.merging.items() if f.done()]:
            self._finish_merge(self.by_name[name], self.merging.pop(name))
        for name in [n for n, (_, f) in self.finishing.items() if f.done()]:
            published, finishing = self.finishing.pop(name)
            finished = finishing.result()  # an error (e.g. the tracks pass not written) ends the job
            self.observer.planner_answered(cpu_seconds=finished.cpu_seconds, retries=finished.storage_retries)
            self._published(self.by_name[name], published, finished)

    def _handle(self, outcome: Outcome) -> None:
        item = outcome.item
        run = self.by_name[item.shot]
        # The actor's own run time when known (excludes waiting behind its previous call).
        busy = outcome.seconds
        if isinstance(outcome.value, SegmentResult):
            busy = outcome.value.wall_seconds
        elif isinstance(outcome.value, ChunkAnalysis):
            busy = outcome.value.stage_seconds.get("wall", busy)
        self.observer.work_finished(item, busy, ok=outcome.error is None)
        if run.done:
            return  # the shot already failed; late results are dropped
        error = outcome.error
        if error is None and item.kind == "render":
            error = self._commit_segment(run, outcome.value)
        if error is not None:
            if item.kind == "analyze":
                self.faces.pop((run.name, item.chunk), None)  # a retry makes them again
            if self._work_area_full(error):
                self._stop_full(run, item, error)
                return
            if item.attempts < WORK_ATTEMPTS and not isinstance(error, RayActorError):
                # Maybe transient (a storage hiccup); a deterministic failure fails again, and then the shot.
                logger.warning(
                    "%s of %s chunk %d failed (attempt %d): %s; trying again",
                    item.kind,
                    item.shot,
                    item.chunk,
                    item.attempts,
                    error,
                )
                self.dispatcher.submit(item)
                self.observer.retried(item)
                return
            tries = f" after {item.attempts} tries" if item.attempts > 1 else ""
            self._fail(run, f"{item.kind} of chunk {item.chunk} failed{tries}: {error}")
            self.dispatcher.drop(item.shot)
            return
        if item.kind == "analyze":
            analysis: ChunkAnalysis = outcome.value  # without its faces: they go to the planner actor
            index = analysis.chunk_index
            faces = self.faces.pop((run.name, index), None)
            if faces is None:  # a second result for a chunk already handed on (never expected)
                logger.warning("%s chunk %d: analysed twice; the second result is dropped", run.name, index)
                return
            run.analysed_by[index] = analysis.actor
            self.observer.analysis_done(run.name, analysis)
            self._step(run.name, index, self.workers.add_analysis(run.name, index, faces, analysis.actor))
        else:
            result: SegmentResult = outcome.value
            run.segments[result.chunk_index] = result
            frames = result.frames
            self.observer.segment_done(run.name, result, outcome.seconds, frames)
            if len(run.segments) == run.renders:
                self._start_merge(run)

    # -- steps --------------------------------------------------------------------------------

    def _submit_analyses(self, run: ShotRun, *, reused: tuple[int, ...]) -> None:
        """Analyse every chunk of ``run`` but those whose analyses an earlier run committed."""
        for chunk in run.shot.plan.chunks:
            if chunk.index not in reused:
                self.dispatcher.submit(analysis_item(run, chunk, self.faces))

    def _step(self, shot: str, index: int | None, future: Future[ShotStep]) -> None:
        """A call on ``shot``'s planner actor, taken by :meth:`_take_finished_threads` once done."""
        self.steps[future] = (shot, index)
        future.add_done_callback(self.stepped.append)

    def _take_step(self, run: ShotRun, index: int | None, future: Future[ShotStep]) -> None:
        """What the shot's planner actor did: chunks tracked, and the plan once the shot is tracked.

        Faces lost before the planner actor read them (the node holding them died) are analysed
        again; any other error of the planner actor fails the shot."""
        try:
            step = future.result()
        except ObjectLostError as exc:
            if index is None or run.done:
                raise
            logger.warning("%s chunk %d: its faces were lost (%s); analysed again", run.name, index, exc)
            self.dispatcher.submit(analysis_item(run, run.shot.plan.chunks[index], self.faces))
            return
        except Exception as exc:  # noqa: BLE001 - fails this shot only
            self._fail(run, f"tracking failed: {exc}")
            return
        self.ledger.records_written += step.records
        self.observer.planner_answered(cpu_seconds=step.cpu_seconds, retries=step.storage_retries)
        self.prepared.manifest.add_notes(*step.notes)
        if run.done:
            return  # the shot already failed
        if index is None:
            for _ in step.reused:
                self.observer.analysis_reused(run.name)
            if self.prepared.resumed:
                self._submit_analyses(run, reused=step.reused)
        if step.tracked:
            run.next_to_track += step.tracked
            self.observer.tracked(run.name, step.faces)
            self.observer.stage(run.name, "track", step.seconds)
        if step.error is not None:
            self._fail(run, f"planning failed: {step.error}")
        elif step.renders is not None:
            self._dispatch_renders(run, step.renders)

    def _commit_segment(self, run: ShotRun, result: SegmentResult) -> BaseException | None:
        """Check the uploaded segment, then record it (the commit); returns the error if it is not right."""
        return self.ledger.commit_segment(
            run.name, segment_record(result, run.render_keys[result.chunk_index])
        )

    def _dispatch_renders(self, run: ShotRun, renders: ShotRenders) -> None:
        """Submit the renders of a planned shot; segments an earlier run committed are taken as they are."""
        self.observer.faces_planned(run.name, renders.tracks)
        self.observer.stage(run.name, "plan", renders.seconds)
        self.unplanned_chunks -= run.renders
        for render in renders.chunks:
            chunk, key = render.chunk, render.key
            run.render_keys[chunk.index] = key
            run.planned_renders[chunk.index] = render
            if render.committed is not None:
                run.segments[chunk.index] = reused_segment(render.committed, run.encoder)
                run.reused.add(chunk.index)
                self.observer.segment_reused(
                    run.name, render.committed, chunk.frame_count, recut=render.recut
                )
                continue
            if chunk.index in renders.rerendered:
                self.observer.fixes_rerendered(run.name, renders.rerendered[chunk.index])
            self._submit_render(run, render)
        if len(run.segments) == run.renders:
            self._start_merge(run)

    def _submit_render(self, run: ShotRun, render: ChunkRender) -> None:
        url = run.segment_url(self.prepared.work_url, render.chunk.index, render.key)
        review_url = run.review_segment_url(self.prepared.work_url, render.chunk.index, render.key)
        self.dispatcher.submit(render_item(run, render, url, self.spec, review_url=review_url))

    def _render_again(self, run: ShotRun, url: str) -> bool:
        """A segment changed since it was committed (found at the merge): render its chunk again and merge
        once more.  False when the URL is no segment of the shot, or the merge was retried already."""
        index = next((i for i, s in run.segments.items() if url in segment_sha256([s])), None)
        if index is None or run.merge_retried:
            return False
        run.merge_retried = True
        warning = (
            f"{run.name} chunk {index}: segment {url} does not match its recorded sha256; rendered again"
        )
        logger.warning("%s", warning)
        self.observer.segment_rejected(run.name, run.segments.pop(index), index in run.reused, warning)
        run.reused.discard(index)
        self._submit_render(run, run.planned_renders[index])
        return True

    def _start_merge(self, run: ShotRun) -> None:
        segments = [run.segments[c.index] for c in run.shot.renders]
        self.observer.set_chunk_actors(run.name, [s.actor for s in segments])
        ref, pass_urls = run.shot.ref, run.shot.pass_urls
        layers = [name for name in pass_urls if name != "tracks"]
        if run.shot.is_sequence:
            written = sequence_frames(segments)
            passes = {name: (pass_urls[name], sequence_frames(segments, name)) for name in layers}
            self.merging[run.name] = self.publisher.submit_call(
                complete_sequence,
                run.shot.info,
                ref.output_url,
                written,
                passes,
                signing=self.provenance.signing(ref.output_url),
                replaced=[r for s in segments for r in s.replaced_frames],
            )
            return
        window = None if run.shot.window.whole else run.shot.window.delivered
        self.merging[run.name] = self.publisher.submit(
            [s.url for s in segments],
            run.shot.info,
            ref.output_url,
            ref.url,
            self.provenance.signing(ref.output_url),
            window=window,
            passes={name: (pass_urls[name], sequence_frames(segments, name)) for name in layers},
            sha256=segment_sha256(segments),
        )

    def _finish_merge(self, run: ShotRun, future: Future[Published]) -> None:
        try:
            published = future.result()
        except ChecksumError as exc:
            if not self._render_again(run, exc.url):
                self._fail(run, f"merge failed: {exc}")
            return
        except Exception as exc:  # noqa: BLE001 - fails this shot only
            self._fail(run, f"merge failed: {exc}")
            return
        # Its planner actor finishes QC with the actors' measures (and writes the tracks pass).
        self.finishing[run.name] = (published, self.workers.finish(run.name, measures_of(run)))

    def _published(self, run: ShotRun, published: Published, finished: ShotFinish) -> None:
        """Record a published shot, its QC and its review media to write."""
        run.done = True
        self.open_shots -= 1
        ref = run.shot.ref
        pass_files = {name: p.sha256 for name, p in published.passes.items()}
        pass_files.update(finished.pass_files)
        qc = finished.qc
        self.observer.shot_qc(run.name, qc, self.spec.qc)
        flags = qc.flags if qc is not None else ()
        # Recorded first: a driver killed after this point finds the output as its own on resume.
        self.ledger.shot_published(
            run.name,
            spec_key=run.shot.spec_key,
            output_url=ref.output_url,
            sha256=published.sha256,
            content_sha256=published.content_sha256,
            credentials_url=published.credentials_url,
            fingerprint=published.fingerprint,
            frames=published.stats.frames,
            render_keys=[run.render_keys[c.index] for c in run.shot.renders],
            frame_sha256=published.frame_sha256,
            passes=pass_files,
            pass_fingerprints={run.shot.pass_urls[n]: p.fingerprint for n, p in published.passes.items()},
            review_flags=None if self.spec.output.review is None else [f.to_dict() for f in flags],
        )
        self.observer.shot_published(
            ShotSource(
                ref.name,
                ref.url,
                ref.output_url,
                run.shot.info,
                boundary_frames(run.shot.renders),
                offset=0 if run.shot.is_sequence else run.shot.window.delivered[0],
            ),
            frames=published.stats.frames,
            output_bytes=published.stats.bytes,
            sha256=published.sha256,
            merge_seconds=published.stats.seconds,
            wall=time.perf_counter() - run.started_at,
            content_sha256=published.content_sha256,
            credentials_url=published.credentials_url,
            sign_seconds=published.sign_seconds,
        )
        # The output is published and recorded: its segments are no longer needed (the records stay).
        segments_url = storage.join(self.prepared.work_url, "segments", run.name)
        # output.keep_segments: they stay for a resubmission with changed fixes to reuse.
        keep = self.spec.output.keep_segments
        review = review_job(run, self.spec, flags, signing=self.provenance.signing(ref.output_url))
        if review is not None:  # it reads the (review) segments, and removes them when done
            self.reviews[run.name] = self.publisher.submit_call(
                publish_review, review, None if keep else segments_url, writes=self.prepared.later_writes
            )
        elif not run.shot.is_sequence and not keep:
            self.publisher.remove_later(segments_url)

    def _work_area_full(self, error: BaseException) -> bool:
        """A write into the work area (a segment, its record) found the filesystem full."""
        work = self.prepared.work_url.rstrip("/")
        return storage.no_space(error) and str(getattr(error, "url", "")).startswith(work + "/")

    def _stop_full(self, run: ShotRun, item: WorkItem, error: BaseException) -> None:
        """The work area is full: every chunk left needs room there, so the job stops (a job failure
        naming the full path) rather than render each chunk to fail it twice.  Shots being merged need
        no room there and are finished; a resubmission once there is space reuses what was committed."""
        message = (
            f"the work area is full ({error}): free space in {self.prepared.work_url} "
            "(output.work_url) and resubmit; committed work is reused"
        )
        self.observer.job_failed(message)
        self._fail(run, f"{item.kind} of chunk {item.chunk} failed: {error}")
        for other in self.runs:
            self.dispatcher.drop(other.name)
            if not other.done and other.name not in self.merging:
                self._fail(other, f"not finished: {message}")

    def _fail(self, run: ShotRun, message: str) -> None:
        self.workers.drop(run.name)
        if not run.done:
            run.done = True
            self.open_shots -= 1
            if not run.render_keys:  # its renders were never dispatched
                self.unplanned_chunks -= run.renders
        self.observer.shot_failed(run.name, message, time.perf_counter() - run.started_at)
        self.ledger.shot_failed(run.name, spec_key=run.shot.spec_key, error=message)


def planner_actors(prepared: PreparedJob) -> ShotWorkers:
    """The job's planner actors (``resources.planner_actors``, at most one per planned shot), started
    before the identities' embeddings are known (the loop gives them to each shot's first call)."""
    return ShotWorkers(
        PlanContext.of(prepared, {}),
        manifest_key=prepared.manifest.signing_key,
        count=prepared.spec.resources.planner_actors,
        shots=[p.ref.name for p in prepared.planned],
    )
