"""The job driver: the event loop that takes a checked job through analysis, tracking, render and merge.

Flow of one job (every shot at once, longest shots first)::

    checks and plan, no Ray (cluster.checks.prepare) -> PreparedJob
    analysis of every chunk on the actor pool ............ parallel
    tracking per shot, chunk after chunk, on the driver ... sequential, cheap (TrackerState chained)
    plan the shot's faces (identity per track, smoothing)
    render of every chunk on the actor pool ............... parallel, stateless -> seam-free
    merge the shot's segments (stream copy) as soon as they are all done, publish atomically
    with edit:, write the cut back relinked to the outputs (output.timeline_url, cluster.edit)

One driver per work area: the driver takes the work area's lease
(:mod:`cluster.lease.acquire`) once its checks pass, before it writes anything, and
gives it back when it ends; a driver whose lease was taken over stops writing.

The loop is built complete from its parts, each in its own module: the keys
(:mod:`cluster.state.keys`), the ledger of manifest records (:mod:`cluster.state.ledger`),
provenance (:mod:`cluster.checks.provenance`), the publisher (:mod:`cluster.publish.merge`),
the observer that owns summary, progress, metrics and report
(:mod:`cluster.schedule.observer`), the actor pool and the dispatcher.  A chunk whose
actor dies is retried on another (the dead one is replaced); a chunk whose work
raises is tried ``WORK_ATTEMPTS`` times, then fails its shot, and the other
shots go on.

Ray must already be initialised (``jobs/render.py`` does it).
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass
from typing import Any, TextIO

import ray

from actors.render import RenderActor
from cluster.checks.destinations import SpecFiles
from cluster.checks.prepare import PlannedShot, PreparedJob, plate_warnings, prepare_job
from cluster.checks.provenance import JobProvenance
from cluster.edit import write_timeline
from cluster.lease.acquire import Lease, acquire_lease
from cluster.publish.merge import MergeFn, Publisher, merge_and_publish
from cluster.report.metrics import JobMetrics
from cluster.report.progress import Progress
from cluster.report.summary import JobSummary
from cluster.schedule.actor_config import render_config
from cluster.schedule.job_loop import JobLoop, planner_actors
from cluster.schedule.observer import JobObserver
from cluster.schedule.pool import ActorPool, plan_pool, shared_storage_warnings
from cluster.schedule.reviews import write_reviews
from cluster.schedule.shot_run import ShotRun
from cluster.spec.fixes import fix_records
from cluster.spec.job import JobSpec
from cluster.state.fingerprints import output_exists
from cluster.state.ledger import Ledger
from pipeline.errors import RecastError
from pipeline.store import storage
from pipeline.video.decoders import source_warnings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DriverParts:
    """What the driver runs on besides the spec; the defaults render for real.

    The driver's scale benchmark swaps in actors that only sleep for a chunk's
    modelled time and a merge that writes a stand-in output.
    """

    actor_class: Any = RenderActor
    merge: MergeFn = merge_and_publish
    thumbnails: bool = True
    progress_stream: TextIO | None = None


class JobRunner:
    """Runs one job on the current Ray cluster: ``prepare()`` (no Ray), then ``run()`` -> summary."""

    def __init__(
        self,
        spec: JobSpec,
        *,
        resume: bool | None = None,
        parts: DriverParts | None = None,
        prepared: PreparedJob | None = None,
        force_takeover: bool = False,
        read_from: SpecFiles | None = None,
    ) -> None:
        self.spec = spec
        self.resume = resume
        self.read_from = read_from
        """The files the spec was read from (its file, ``--fixes`` files): no destination may replace them."""
        self.force_takeover = force_takeover
        self.lease: Lease | None = None
        self.parts = parts or DriverParts()
        self.started = time.perf_counter()
        self.store = storage.configure(spec.storage)  # this process's store client, before anything is read
        self._store_retries = self.store.retries
        self._prepared = prepared
        self._observer: JobObserver | None = None
        self._pool: ActorPool | None = None
        self.ledger: Ledger | None = None

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    # What a caller watching a running job may read (None / empty before ``run()`` starts).
    @property
    def summary(self) -> JobSummary | None:
        return self._observer.summary if self._observer is not None else None

    @property
    def timeline(self) -> list[dict[str, Any]]:
        return self._observer.timeline if self._observer is not None else []

    @property
    def shot_retries(self) -> dict[str, int]:
        return self._observer.shot_retries if self._observer is not None else {}

    @property
    def observer(self) -> JobObserver | None:
        return self._observer

    @property
    def actors(self) -> list[tuple[str, Any]]:
        return self._pool.actors if self._pool is not None else []

    def prepare(self) -> PreparedJob:
        """Every check that needs no Ray (:func:`cluster.checks.prepare.prepare_job`), then the work area's lease;
        ``run()`` calls it if not done.  Raises LeaseHeld when another driver holds the work area."""
        if self._prepared is None:
            try:
                self._prepared = prepare_job(
                    self.spec, resume=self.resume, claim=self._claim, read_from=self.read_from
                )
            except BaseException:
                self.release()
                raise
        return self._prepared

    def _claim(self, work_url: str) -> None:
        if self.lease is None:
            self.lease = acquire_lease(
                work_url, self.spec.lease, job_id=self.spec.job_id, force=self.force_takeover
            )

    def release(self) -> None:
        """Give the work area's lease back (``run()`` does it when it ends); safe to call twice."""
        if self.lease is not None:
            self.lease.release()

    def run(self) -> JobSummary:
        """Run the job on the current Ray cluster; the lease is released at the end, whatever happens."""
        try:
            prepared = self.prepare()
            self._claim(prepared.work_url)  # when handed a prepared job
            return self._run(prepared)
        finally:
            self.release()

    def _run(self, prepared: PreparedJob) -> JobSummary:
        spec, lease = self.spec, self.lease
        assert lease is not None
        observer = self._observer = JobObserver(
            prepared,
            started=self.started,
            progress=Progress(
                {p.ref.name: p.window.delivered_count for p in prepared.planned},
                stream=self.parts.progress_stream or sys.stderr,
                job=spec.job_id,
            ),
            metrics=JobMetrics(spec.job_id),
            thumbnails=self.parts.thumbnails,
        )
        observer.summary.lease = lease.record()
        if prepared.edit is not None:
            observer.summary.edit = prepared.edit.summary()
            observer.warn(prepared.edit.warnings())
        takeover = lease.takeover_message()
        if takeover is not None:
            observer.warn([takeover])
        ledger = self.ledger = Ledger(prepared.manifest, resumed=prepared.resumed, guard=lease.guard)
        provenance = JobProvenance(spec, prepared.consent_refs, prepared.pack_hash, prepared.auth)
        observer.summary.marking = provenance.marking()
        fixes = {
            ref.name: fix_records(ref.settings.fixes)
            for ref in [p.ref for p in prepared.planned] + [r.ref for r in prepared.reused]
            if ref.settings is not None and ref.settings.fixes
        }
        ledger.write_job(spec, prepared.pack_hash, prepared.keys.identities, prepared.shot_keys, fixes=fixes)
        shot_urls = [p.ref.url for p in prepared.planned] + [r.ref.url for r in prepared.reused]
        for p in prepared.planned:
            logger.info("job %s: shot %s from %s to %s", spec.job_id, p.ref.name, p.ref.url, p.ref.output_url)
        if not prepared.planned:
            write_reviews(prepared, observer, {}, provenance)  # review media an earlier run never wrote
            observer.warn(prepared.manifest.take_warnings())
            self._write_timeline(prepared, observer)
            provenance.write_audit(observer.summary, shot_urls)
            return observer.finish(finished=True, storage_retries=self._driver_retries())
        observer.warn(shared_storage_warnings(prepared.work_url, [p.ref.url for p in prepared.planned]))
        observer.warn(plate_warnings(prepared))
        res = spec.resources
        plan = plan_pool(
            ray.cluster_resources(),
            gpus_per_actor=res.gpus_per_actor,
            cpus_per_actor=res.cpus_per_actor,
            max_actors=res.max_actors,
            work_items=prepared.chunk_count,
            custom=res.custom,
        )
        pool = self._pool = ActorPool(render_config(spec, plan), plan, self.parts.actor_class)
        publisher = Publisher(self.parts.merge, if_exists=spec.output.if_exists, guard=lease.confirm)
        finished = False
        # The planner actors first (beside the driver, on its node): up before the render actors and
        # the nodes a scaling cluster adds for them.
        workers = planner_actors(prepared)
        try:
            workers.wait_ready()
            infos, starting = pool.warm()
            observer.actors_ready(infos, len(pool.actors))
            nvdec = any(i.nvdec for i in infos)  # auto: shots the actors' NVDEC cannot decode
            observer.warn(
                source_warnings(spec.decode, nvdec, [(p.ref.name, p.info) for p in prepared.planned])
            )
            provenance.check_faces(pool.first)  # consent bound to faces, before any chunk is read
            provenance.write_intent([p.ref for p in prepared.planned])
            embeddings = ray.get(pool.first.identity_embeddings.remote())
            runs = self._shot_runs(prepared.planned, pool)
            logger.info(
                "job %s: %d shot(s), %d chunk(s), %d actor(s) warm after %.1fs",
                spec.job_id,
                len(runs),
                prepared.chunk_count,
                len(pool.actors),
                observer.summary.setup_seconds,
            )
            loop = JobLoop(
                prepared,
                ledger=ledger,
                observer=observer,
                provenance=provenance,
                publisher=publisher,
                pool=pool,
                starting=starting,
                infos=infos,
                runs=runs,
                embeddings=embeddings,
                workers=workers,
            )
            loop.run()
            finished = True
        finally:
            publisher.close()  # waits for the segment removals and review media it still has queued
            workers.close()
            pool.kill_all()
            observer.progress.close()
        write_reviews(prepared, observer, loop.reviews, provenance)
        if all(observer.shots[r.name].status == "published" for r in runs):
            lease.confirm()
            if not spec.output.keep_segments and spec.output.review is None:
                # Every shot's segments are gone now (review segments are kept); drop their empty parent.
                storage.remove(storage.join(prepared.work_url, "segments"), recursive=True)
        observer.warn(prepared.manifest.take_warnings())  # records set aside, segments rendered again
        self._write_timeline(prepared, observer)
        provenance.write_audit(observer.summary, shot_urls)
        return observer.finish(finished=finished, storage_retries=self._driver_retries())

    def _driver_retries(self) -> int:
        """The driver's object-store retries since the job started (the actors' come with their results)."""
        return self.store.retries - self._store_retries

    def _write_timeline(self, prepared: PreparedJob, observer: JobObserver) -> None:
        """Back to the cut (``output.timeline_url``), once every shot of the edit is published or kept."""
        edit, summary, out = prepared.edit, observer.summary, prepared.spec.output
        if edit is None or edit.timeline_url is None or summary.edit is None:
            return
        shots = {s.name: s for s in summary.shots}
        waiting = sorted(
            {
                c.shot
                for c in edit.clips
                if c.shot not in shots or shots[c.shot].status not in ("published", "skipped")
            }
        )
        if waiting:
            observer.warn(
                [f"{edit.timeline_url} (output.timeline_url) not written: {', '.join(waiting)} not published"]
            )
            return
        writes = prepared.later_writes
        if writes.skips and output_exists(edit.timeline_url):
            observer.warn([writes.left(edit.timeline_url, "output.timeline_url")])
            return
        assert self.lease is not None
        self.lease.confirm()  # a driver whose lease was taken over writes nothing more
        try:
            write_timeline(
                edit,
                {name: s.output_url for name, s in shots.items()},
                include_handles=out.include_handles,
                overwrite=writes.overwrite,
            )
        except RecastError as exc:
            message, warning = writes.failed_write(exc, edit.timeline_url, "output.timeline_url")
            if warning:
                observer.warn([message])
            else:
                summary.failures.append(message)
            return
        summary.edit["timeline_written"] = True
        logger.info("job %s: the cut written back to %s", self.spec.job_id, edit.timeline_url)

    def _shot_runs(self, planned: list[PlannedShot], pool: ActorPool) -> list[ShotRun]:
        """Per-shot state, created complete: the encoder is chosen once per job by an actor."""
        assert self._observer is not None
        encoders = ray.get(
            pool.first.choose_encoders.remote(self.spec.output.encode_settings(), [p.info for p in planned])
        )
        runs = []
        for rank, (shot, encoder) in enumerate(zip(planned, encoders, strict=True)):
            self._observer.encoder_chosen(shot.ref.name, encoder.name, encoder.colour)
            runs.append(ShotRun(shot=shot, rank=rank, encoder=encoder, info_ref=ray.put(shot.info)))
        return runs


def run_job(spec: JobSpec, *, resume: bool | None = None, force_takeover: bool = False) -> JobSummary:
    """Render every shot of ``spec`` on the current Ray cluster and return the summary.

    Raises RecastError for problems found before rendering (spec, inputs,
    outputs, model pack, source faces); render failures are reported per shot
    in the summary (``summary.ok`` is False).  ``resume``: None = reuse what an
    earlier run of the job committed (its manifest), True = require that
    manifest, False = ignore it.  Raises LeaseHeld when another driver holds
    the job's work area (``force_takeover``: take it anyway).
    """
    return JobRunner(spec, resume=resume, force_takeover=force_takeover).run()
