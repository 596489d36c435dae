"""The job's review media once every shot is published: each shot's record in the summary and the
playlist of every review movie (``output.review_timeline_url``), in shot order."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from concurrent.futures import Future

from actors.review import REVIEW_PASS
from cluster.checks.prepare import PreparedJob, ReusedShot
from cluster.checks.provenance import JobProvenance
from cluster.publish.merge import Signing
from cluster.publish.review import publish_review
from cluster.report.summary import ReviewOutputs
from cluster.schedule.observer import JobObserver
from cluster.schedule.shot_finish import shot_review
from cluster.schedule.shot_run import segment_home
from pipeline.errors import RecastError
from pipeline.qc.records import Flag
from pipeline.review.playlist import ReviewClip, playlist_bytes
from pipeline.store import storage
from pipeline.video.probe import VideoInfo

logger = logging.getLogger(__name__)


def write_reviews(
    prepared: PreparedJob,
    observer: JobObserver,
    reviews: Mapping[str, Future[ReviewOutputs]],
    provenance: JobProvenance | None = None,
) -> None:
    """Record each shot's review media (a failure, or one left as it was by ``output.if_exists``, is a
    warning: the output stays published), then write the playlist of every review movie there is,
    atomically, as ``output.if_exists`` allows (:class:`cluster.spec.review.IfExistsRule`)."""
    spec = prepared.spec
    review = spec.output.review
    if review is None:
        return
    for name, future in reviews.items():
        try:
            observer.shots[name].review = future.result()
        except Exception as exc:  # noqa: BLE001 - the shot's output is published; its dailies are not
            observer.warn([f"shot {name}: review media not written: {exc}"])
    missing = [r for r in prepared.reused if not storage.exists(review.movie_url(r.ref.name, spec.job_id))]
    summaries = {s.name: s for s in observer.summary.shots}
    not_made = []
    for reused in missing:
        try:
            signing = provenance.signing(reused.ref.output_url) if provenance is not None else None
            made = _made_again(prepared, reused, signing)
        except Exception as exc:  # noqa: BLE001 - the shot's output is published; its dailies are not
            observer.warn([f"shot {reused.ref.name}: review media not made again from its records: {exc}"])
            made = None
        if made is None:
            not_made.append(reused.ref.name)
        else:
            summaries[reused.ref.name].review = made
    if not_made:
        names = ", ".join(not_made)
        observer.warn(
            [f"output.review: no review movie for {names}, published by an earlier run (rerun them)"]
        )
    url = spec.output.review_timeline_url
    if url is None:
        return
    writes = prepared.later_writes
    if writes.skips and storage.exists(url):
        observer.warn([writes.left(url, "output.review_timeline_url")])
        return
    infos: dict[str, VideoInfo] = {p.ref.name: p.info for p in prepared.planned}
    infos.update({r.ref.name: r.info for r in prepared.reused})
    clips = []
    for name in prepared.shot_keys:  # the job's shot order
        shot = observer.shots.get(name)
        movie = review.movie_url(name, spec.job_id)
        if shot is not None and shot.review is not None:
            frames = shot.review.frames
        elif prepared.resumed and name in infos and storage.exists(movie):  # kept from an earlier run
            from pipeline.video.probe import probe

            frames = probe(movie).frame_count
        else:
            continue
        clips.append(ReviewClip(shot=name, url=movie, frames=frames, rate=infos[name].frame_rate))
    try:
        storage.write_bytes(url, playlist_bytes(spec.job_id, clips), overwrite=writes.overwrite)
    except RecastError as exc:
        message, warning = writes.failed_write(exc, url, "output.review_timeline_url")
        if warning:
            observer.warn([message])
        else:
            observer.summary.failures.append(message)
        return
    observer.summary.review_timeline_url = url
    logger.info("job %s: review playlist of %d shot(s) written to %s", spec.job_id, len(clips), url)


def _made_again(prepared: PreparedJob, reused: ReusedShot, signing: Signing | None) -> ReviewOutputs | None:
    """The review media of a shot an earlier run published but whose review it never wrote (its driver
    stopped in between), made from the review segments the publish keeps and the flags its record
    holds; None when the records do not have them (a run from before either was kept)."""
    flags, keys = reused.record.get("review_flags"), reused.record.get("render_keys")
    if not isinstance(flags, list) or not isinstance(keys, list) or len(keys) != len(reused.shot.renders):
        return None
    name, home = reused.ref.name, segment_home(reused.shot, prepared.work_url)
    segments = []
    for index, key in enumerate(keys):
        record = prepared.manifest.render_record(name, index, str(key), home)
        segments.append(None if record is None else record.passes.get(REVIEW_PASS))
    job = shot_review(reused.shot, prepared.spec, segments, [Flag(**f) for f in flags], signing=signing)
    if job is None:
        return None
    logger.info("shot %s: review media made again from the records of the run that published it", name)
    # The segments a stopped driver left are removed now, all but the review segments.
    return publish_review(
        job, None if prepared.spec.output.keep_segments else home.folder, writes=prepared.later_writes
    )
