"""The job's review media once every shot is published: each shot's record in the summary and the
playlist of every review movie (``output.review_timeline_url``), in shot order."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from concurrent.futures import Future

from cluster.checks.prepare import PreparedJob
from cluster.report.summary import ReviewOutputs
from cluster.schedule.observer import JobObserver
from pipeline.errors import RecastError
from pipeline.review.playlist import ReviewClip, playlist_bytes
from pipeline.store import storage
from pipeline.video.probe import VideoInfo

logger = logging.getLogger(__name__)


def write_reviews(
    prepared: PreparedJob, observer: JobObserver, reviews: Mapping[str, Future[ReviewOutputs]]
) -> None:
    """Record each shot's review media (a failure is a warning: the output stays published), then
    write the playlist of every review movie there is, atomically."""
    spec = prepared.spec
    review = spec.output.review
    if review is None:
        return
    for name, future in reviews.items():
        try:
            observer.shots[name].review = future.result()
        except Exception as exc:  # noqa: BLE001 - the shot's output is published; its dailies are not
            observer.warn([f"shot {name}: review media not written: {exc}"])
    missing = [
        r.ref.name for r in prepared.reused if not storage.exists(review.movie_url(r.ref.name, spec.job_id))
    ]
    if missing:
        names = ", ".join(missing)
        observer.warn(
            [f"output.review: no review movie for {names}, published by an earlier run (rerun them)"]
        )
    url = spec.output.review_timeline_url
    if url is None:
        return
    infos: dict[str, VideoInfo] = {p.ref.name: p.info for p in prepared.planned}
    infos.update({r.ref.name: r.info for r in prepared.reused})
    clips = []
    for name in prepared.shot_keys:  # the job's shot order
        shot = observer.shots.get(name)
        movie = review.movie_url(name, spec.job_id)
        if shot is not None and shot.review is not None:
            frames = shot.review.frames
        elif name in infos and storage.exists(movie):  # kept from an earlier run of the job
            from pipeline.video.probe import probe

            frames = probe(movie).frame_count
        else:
            continue
        clips.append(ReviewClip(shot=name, url=movie, frames=frames, rate=infos[name].frame_rate))
    try:
        storage.write_bytes(url, playlist_bytes(spec.job_id, clips))
    except RecastError as exc:
        observer.summary.failures.append(f"output.review_timeline_url: {exc}")
        return
    observer.summary.review_timeline_url = url
    logger.info("job %s: review playlist of %d shot(s) written to %s", spec.job_id, len(clips), url)
