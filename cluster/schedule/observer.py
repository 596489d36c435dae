"""What the job shows while it runs: the summary, progress, metrics, timeline and report, fed by events.

The driver's event loop tells the observer what happened (a chunk analysed, a
segment rendered, a shot published, a retry) and never touches the summary,
the progress line, the Prometheus metrics or the report itself.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from actors.results import ActorInfo, ChunkAnalysis, SegmentResult
from cluster.checks.prepare import PreparedJob
from cluster.report.build import json_text, write_report
from cluster.report.cache import ReportCache, cached_report, file_qc
from cluster.report.data import NoteChoices, busy_ratios
from cluster.report.metrics import JobMetrics
from cluster.report.progress import Progress
from cluster.report.qcfile import FiledQC, qc_file_url
from cluster.report.summary import JobSummary, RedactedCopies, RerenderedChunk, ShotSummary, fix_marks
from cluster.schedule.dispatch import WorkItem
from cluster.state.manifest import RenderRecord
from pipeline.colour import ColourTags
from pipeline.errors import RecastError
from pipeline.qc.config import QcConfig
from pipeline.store import storage
from pipeline.video.probe import VideoInfo

if TYPE_CHECKING:
    from pipeline.qc.analyze import ShotQC

QC_THUMBNAILS = 12
"""Flagged frames (the most severe first) that get before/after thumbnails in the report."""

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShotSource:
    """What the observer needs of a shot to show it: name, source, output, probe, chunk boundaries."""

    name: str
    url: str
    output_url: str
    info: VideoInfo
    boundary_frames: list[int]
    offset: int = 0
    """The output's frame ``f - offset`` is the source's frame ``f`` (a delivered frame range)."""


class JobObserver:
    """Owns the job's summary, timeline, thumbnails and report; feeds progress and metrics."""

    def __init__(
        self,
        prepared: PreparedJob,
        *,
        started: float,
        progress: Progress,
        metrics: JobMetrics,
        thumbnails: bool = True,
    ) -> None:
        self.started = started
        self.progress = progress
        self.metrics = metrics
        self.thumbnails = thumbnails
        self.timeline: list[dict[str, Any]] = []
        self.thumbs: dict[str, Any] = {}
        self.qc_frames: dict[str, list[int]] = {}
        """Shot -> source positions of the frames QC flagged worst (they get thumbnails too)."""
        self.shot_retries: dict[str, int] = {}
        self.note_choices = NoteChoices(
            identities=tuple(prepared.spec.identities),
            frame_sizes={p.ref.name: (p.info.width, p.info.height) for p in prepared.planned},
            rotations={p.ref.name: p.info.rotation for p in prepared.planned},
        )
        """What the report's notes offer: the job's identities, each shot's frame size (a drawn box's scale)."""
        self.report_seconds: list[float] = []
        """Wall seconds of every report rewrite (interim and final), from the copy of the state on."""
        self.dispatch_delays: list[float] = []
        """Seconds each idle actor waited for the driver to hand it queued work (from the dispatcher)."""
        self.planner_cpu_seconds = 0.0
        """CPU seconds the planner actors spent on this job's shots (:mod:`cluster.schedule.shot_worker`)."""
        self.report_cpu_seconds: list[float] = []
        """CPU seconds of the thread that built and wrote each report (without waits for the GIL)."""
        self._reporter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="report")
        self._reporting: Future[None] | None = None
        self._redacted = RedactedCopies()
        """Redacted copies of the summary (each report's, the summary.json's), each for what changed since."""
        self._report_cache = ReportCache()
        """Each shot's QC (of those copies) as JSON text and strip chart, made once for every rewrite."""
        self.summary = JobSummary(
            job_id=prepared.spec.job_id,
            work_url=prepared.work_url,
            shots=[],
            started_at_epoch=time.time() - self.elapsed(),
        )
        for ref in prepared.skipped:
            self.summary.shots.append(ShotSummary(ref.name, ref.url, ref.output_url, status="skipped"))
        for reused in prepared.reused:
            ref = reused.ref
            self.summary.shots.append(
                ShotSummary(
                    ref.name,
                    ref.url,
                    ref.output_url,
                    status="published",
                    frames=reused.info.frame_count,
                    chunks=len(reused.plan.chunks),
                    chunks_reused=len(reused.plan.chunks),
                    output_bytes=int(reused.record.get("output_fingerprint", {}).get("size", 0)),
                    output_sha256=reused.record.get("output_sha256"),
                    content_sha256=reused.record.get("content_sha256", reused.record.get("output_sha256")),
                    credentials_url=reused.record.get("credentials_url"),
                    reused=True,
                    fixes=fix_marks(ref.settings.fixes) if ref.settings is not None else [],
                )
            )
            logger.info("shot %s: %s was published by an earlier run; kept", ref.name, ref.output_url)
        self.shots: dict[str, ShotSummary] = {}
        for planned in prepared.planned:
            ref = planned.ref
            shot = ShotSummary(
                ref.name,
                ref.url,
                ref.output_url,
                chunks=len(planned.plan.chunks),
                fixes=fix_marks(planned.settings.fixes),
            )
            self.summary.shots.append(shot)
            self.shots[ref.name] = shot

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    # -- set-up
    def actors_ready(self, infos: list[ActorInfo], actors: int) -> None:
        summary = self.summary
        summary.actor_info = infos
        summary.actors = actors
        summary.setup_seconds = self.elapsed()
        for info in infos:
            summary.warnings.extend(w for w in info.warnings if w not in summary.warnings)

    def warn(self, warnings: list[str]) -> None:
        self.summary.warnings.extend(warnings)

    def encoder_chosen(self, shot: str, encoder: str, colour: ColourTags | None = None) -> None:
        """The shot's encoder and the colour tags its output carries (None: an image sequence)."""
        self.shots[shot].encoder = encoder
        self.shots[shot].colour = colour.as_dict() if colour is not None else None

    def actors_joined(self, infos: list[ActorInfo]) -> None:
        """Actors that became ready after the warm-up (e.g. on new nodes)."""
        self.summary.actor_info.extend(infos)

    def pool_losses(self, preempted_calls: int, drained_actors: int) -> None:
        """Calls handed on because their actor was lost, and actors retired from drained nodes."""
        self.summary.preempted_calls = preempted_calls
        self.summary.drained_actors = drained_actors

    # -- work
    def work_finished(self, item: WorkItem, busy_seconds: float, ok: bool) -> None:
        """One call came back; ``busy_seconds``: the actor's own run time (not its queueing)."""
        end = self.elapsed()
        entry = {
            "kind": item.kind,
            "shot": item.shot,
            "chunk": item.chunk,
            "actor": item.actor,
            "attempt": item.attempts,
            "queued": round(item.queued_at - self.started, 3),
            "start": round(end - busy_seconds, 3),
            "end": round(end, 3),
            "ok": ok,
        }
        self.shots[item.shot].timeline.append(entry)
        self.timeline.append(dict(entry))

    def retried(self, item: WorkItem) -> None:
        """A work item is tried again (its actor died, or it failed once)."""
        self.shot_retries[item.shot] = self.shot_retries.get(item.shot, 0) + 1
        self.metrics.retry(item.shot)
        self.progress.retry(item.shot)
        self.timeline.append(
            {
                "actor": item.actor,
                "shot": item.shot,
                "chunk": item.chunk,
                "kind": item.kind,
                "start": round(max(0.0, item.submitted_at - self.started), 3),
                "end": round(self.elapsed(), 3),
                "ok": False,
                "attempt": item.attempts,
            }
        )

    def planner_answered(self, *, cpu_seconds: float, retries: int) -> None:
        """A planner actor's call done: its CPU time and the object-store retries it made since its last."""
        self.planner_cpu_seconds += cpu_seconds
        self.summary.storage_retries += retries

    def analysis_reused(self, shot: str) -> None:
        self.shots[shot].analyses_reused += 1

    def analysis_done(self, shot: str, analysis: ChunkAnalysis) -> None:
        if self.summary.first_analysis_seconds is None:
            self.summary.first_analysis_seconds = self.elapsed()
        summary = self.shots[shot]
        summary.analyses_run += 1
        summary.faces_analysed += analysis.face_count
        summary.faces_embedded += max(0, analysis.faces_embedded)
        summary.frames_decoded += analysis.frame_count  # one decode per analysed frame
        self.summary.storage_retries += analysis.storage_retries
        summary.add_stages({k: v for k, v in analysis.stage_seconds.items() if k != "wall"})
        self.summary.warnings.extend(w for w in analysis.warnings if w not in self.summary.warnings)

    def tracked(self, shot: str, faces_detected: int) -> None:
        self.shots[shot].faces_detected += faces_detected

    def stage(self, shot: str, name: str, seconds: float) -> None:
        """Driver-side time spent on ``shot`` (tracking, planning)."""
        self.shots[shot].add_stages({name: seconds})

    def faces_planned(self, shot: str, tracks: int) -> None:
        self.shots[shot].tracks = tracks

    def segment_reused(self, shot: str, record: RenderRecord, frames: int, *, recut: bool = False) -> None:
        """A segment an earlier run committed (``recut``: cut back out of the published output)."""
        summary = self.shots[shot]
        summary.chunks_reused += 1
        summary.chunks_recut += recut
        summary.faces_swapped += record.faces_swapped
        summary.add_watermark(record.watermark)
        self.progress.update(shot, frames)

    def fixes_rerendered(self, shot: str, chunk: RerenderedChunk) -> None:
        """A chunk rendered again because changed fixes touch it (the summary says which and why)."""
        self.shots[shot].fixes_rerendered.append(chunk)
        logger.info("shot %s chunk %d rendered again: %s", shot, chunk.chunk, "; ".join(chunk.reasons))

    def segment_rejected(self, shot: str, result: SegmentResult, reused: bool, warning: str) -> None:
        """A segment counted before was found changed at the merge: it is rendered again (counted then)."""
        summary = self.shots[shot]
        if reused:
            summary.chunks_reused -= 1
        else:
            summary.chunks_rendered -= 1
        summary.faces_swapped -= result.faces_swapped
        self.summary.warnings.append(warning)

    def segment_done(self, shot: str, result: SegmentResult, call_seconds: float, frames: int) -> None:
        if self.summary.first_chunk_seconds is None:
            self.summary.first_chunk_seconds = self.elapsed()
        summary = self.shots[shot]
        summary.chunks_rendered += 1
        summary.add_stages(result.stage_seconds)
        summary.faces_swapped += result.faces_swapped
        summary.frames_rendered += result.frames
        summary.frames_decoded += result.frames_decoded
        summary.frames_reused += result.frames_reused
        self.summary.storage_retries += result.storage_retries
        summary.add_watermark(result.watermark)
        for role, providers in result.providers.items():
            summary.providers.setdefault(role, list(providers))
        self.metrics.chunk_done(shot, call_seconds, frames, result.faces_swapped, result.stage_seconds)
        self.progress.update(shot, frames)

    # -- shots
    def shot_published(
        self,
        source: ShotSource,
        *,
        frames: int,
        output_bytes: int,
        sha256: str,
        merge_seconds: float,
        wall: float,
        content_sha256: str | None = None,
        credentials_url: str | None = None,
        sign_seconds: float = 0.0,
    ) -> None:
        if self.summary.first_shot_seconds is None:
            self.summary.first_shot_seconds = self.elapsed()
        summary = self.shots[source.name]
        summary.add_stages({"merge": merge_seconds, **({"sign": sign_seconds} if sign_seconds else {})})
        summary.frames = frames
        summary.output_bytes = output_bytes
        summary.output_sha256 = sha256
        summary.content_sha256 = content_sha256
        summary.credentials_url = credentials_url
        summary.status = "published"
        summary.seconds = wall
        logger.info(
            "shot %s published: %s (%d frames, %.1f fps)", source.name, source.output_url, frames, summary.fps
        )
        if self.thumbnails:
            from pipeline.thumbnails import thumbnails

            try:
                flagged = {f for f in self.qc_frames.get(source.name, []) if f >= source.offset}
                wanted = sorted(set(source.boundary_frames) | flagged)
                self.thumbs[source.name] = thumbnails(
                    source.url, source.output_url, source.info, wanted, offset=source.offset
                )
            except RecastError as exc:
                self.summary.warnings.append(f"thumbnails of {source.name}: {exc}")
        self.progress.shot_done(source.name)

    def shot_qc(self, shot: str, qc: ShotQC | FiledQC | None, config: QcConfig) -> None:
        """Record the shot's QC: numbers and review list in the summary, flagged frames in the metrics,
        the flagged frames among the thumbnails, and the reasons that fail the shot (``qc.fail_on``).

        The QC is written whole to the shot's QC file (``qc/<shot>.json`` in the work area) and its strip
        chart drawn, once; the summary keeps the rest (:class:`~cluster.report.qcfile.FiledQC`), not the
        numbers per frame, so the driver's memory and the report's rewrites do not grow with them (the
        shot's planner actor files it: ``qc`` is a FiledQC then).  A file that cannot be written leaves
        the QC whole in the summary (a warning says so)."""
        if qc is None:
            return
        summary = self.shots[shot]
        if isinstance(qc, FiledQC):
            summary.qc = qc
        else:
            try:
                url = qc_file_url(self.summary.work_url, shot)
                summary.qc = file_qc(qc, url=url, name=shot, fixes=summary.fixes)
            except RecastError as exc:
                summary.qc = qc
                self.summary.warnings.append(f"QC file of {shot}: {exc}")
        summary.qc_failed = qc.failed(config)
        frames: dict[str, int] = {}
        for flag in qc.flags:
            frames[flag.reason] = frames.get(flag.reason, 0) + flag.last - flag.first + 1
        self.metrics.qc_flagged(shot, frames)
        self.qc_frames[shot] = qc.review_positions(QC_THUMBNAILS)
        if summary.qc_failed:
            logger.error("shot %s: QC failed on %s (qc.fail_on)", shot, ", ".join(summary.qc_failed))

    def job_failed(self, message: str) -> None:
        """A failure of the whole job, besides its shots' (the summary's ``failures``)."""
        logger.error("job %s: %s", self.summary.job_id, message)
        self.summary.failures.append(message)

    def shot_failed(self, shot: str, message: str, wall: float) -> None:
        logger.error("shot %s failed: %s", shot, message)
        summary = self.shots[shot]
        summary.status = "failed"
        summary.error = message
        summary.seconds = wall
        self.progress.shot_done(shot)

    def set_chunk_actors(self, shot: str, actors: list[str]) -> None:
        self.shots[shot].chunk_actors = actors

    # -- output
    def write_report(self, *, finished: bool) -> None:
        """``report.html`` / ``report.json`` in the work area.

        While the job runs, the state is copied here and the page is built and
        written on a background thread (skipped while the previous one is still
        being written), so the event loop is not held up; the final report is
        written before this returns.
        """
        if self._reporting is not None:
            if not self._reporting.done() and not finished:
                return
            self._reporting.result()
            self._reporting = None
        snapshot = (
            self._redacted.copy(self.summary),  # the report is built on a thread while the job goes on
            list(self.timeline),
            dict(self.thumbs),
            dict(self.shot_retries),
            self.elapsed(),
            time.perf_counter(),
        )
        if finished:
            self._write_report(snapshot, finished=True)
        else:
            self._reporting = self._reporter.submit(self._write_report, snapshot, finished=False)

    def _write_report(self, snapshot: tuple[Any, ...], *, finished: bool) -> None:
        summary, timeline, thumbs, retries, until, started = snapshot
        cpu_started = time.thread_time()
        try:
            report, data, page = cached_report(
                self._report_cache,
                summary,
                thumbs=thumbs,
                timeline=timeline,
                retries=retries,
                running=not finished,
                notes=self.note_choices,
            )
            for actor, ratio in busy_ratios(report.timeline, until=until).items():
                self.metrics.actor_busy(actor, ratio)
            write_report(self.summary.work_url, data, page)
        except RecastError as exc:
            logger.warning("could not write the job report: %s", exc)
        self.report_seconds.append(time.perf_counter() - started)
        self.report_cpu_seconds.append(time.thread_time() - cpu_started)

    def write_summary(self) -> None:
        url = storage.join(self.summary.work_url, "summary.json")
        try:
            # A credential passed by mistake in the spec (e.g. a signed URL) must not be echoed.
            data = self._redacted.copy(self.summary).to_dict(qc_json=self._report_cache.qc_json)
            storage.write_bytes(url, json_text(data).encode())
        except RecastError as exc:
            logger.warning("could not write %s: %s", url, exc)

    def finish(self, *, finished: bool, storage_retries: int = 0) -> JobSummary:
        """End of the job: close the progress line, write the summary and the final report
        (``storage_retries``: the driver's own, added to the actors')."""
        self.progress.close()
        self.summary.storage_retries += storage_retries
        self.summary.wall_seconds = self.elapsed()
        self.write_summary()
        self.write_report(finished=finished)
        self._reporter.shutdown(wait=True)
        return self.summary
