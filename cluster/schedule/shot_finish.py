"""What is done for a shot once its output is published: the tracks pass, QC's conclusions and
what its review media need (:mod:`cluster.publish.review`)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from actors.results import ChunkPass, VideoPass
from actors.review import REVIEW_PASS
from cluster.checks.prepare import PlannedShot
from cluster.publish.merge import Signing
from cluster.publish.review import ReviewJob
from cluster.schedule.calls import review_look
from cluster.schedule.shot_run import ShotRun
from cluster.spec.job import JobSpec
from cluster.spec.review import contact_url
from pipeline.qc.config import QcConfig
from pipeline.qc.records import FaceMeasure, Flag
from pipeline.store import storage

if TYPE_CHECKING:
    from pipeline.passes.tracks import TrackFrame
    from pipeline.qc.analyze import ShotQC

logger = logging.getLogger(__name__)


def measures_of(run: ShotRun) -> list[FaceMeasure]:
    """Every QC measure the actors took of the shot's faces (chunk by chunk, as recorded)."""
    return [m for c in run.shot.renders for m in run.segments[c.index].qc]


def finish_qc(qc_plan: Any, measures: list[FaceMeasure], config: QcConfig) -> ShotQC | None:
    """The shot's :class:`~pipeline.qc.analyze.ShotQC` from QC's plan-time part (None when QC is off)."""
    if qc_plan is None:
        return None
    from pipeline.qc.staged import finish_checks

    return finish_checks(qc_plan, measures, config)


def write_tracks(
    shot: PlannedShot, track_frames: Sequence[TrackFrame], url: str, measures: list[FaceMeasure]
) -> dict[str, str]:
    """Write the ``tracks`` pass (JSON lines and a ``.chan`` per track); pass file -> URL."""
    from pipeline.passes.naming import chan_url
    from pipeline.passes.tracks import chan, jsonl

    info = shot.info
    similarity = {
        (m.track, info.frame_number(m.frame)): m.similarity_after
        for m in measures
        if m.similarity_after is not None
    }
    records = [
        dataclasses.replace(r, similarity=similarity.get((r.track, r.frame), r.similarity))
        for r in track_frames
    ]
    storage.write_bytes(url, jsonl(records))
    written = {"tracks": url}
    for track in sorted({r.track for r in records}):
        target = chan_url(url, track)
        storage.write_bytes(target, chan([r for r in records if r.track == track], info.height))
        written[f"track{track}"] = target
    return written


def review_job(
    run: ShotRun, spec: JobSpec, flags: Sequence[Flag], *, signing: Signing | None = None
) -> ReviewJob | None:
    """The shot's review media to write (None: no ``output.review``, or not made for this shot),
    signed with ``signing`` (the job's Content Credentials)."""
    segments = [run.segments[c.index].passes.get(REVIEW_PASS) for c in run.shot.renders]
    return shot_review(run.shot, spec, segments, flags, signing=signing)


def shot_review(
    shot: PlannedShot,
    spec: JobSpec,
    segments: Sequence[ChunkPass | None],
    flags: Sequence[Flag],
    *,
    signing: Signing | None = None,
) -> ReviewJob | None:
    """The review media of ``shot`` from its chunks' review segments (in chunk order) and its flags
    (None: no ``output.review``, or a chunk has no review segment)."""
    look = review_look(shot.ref.name, shot.info, spec)
    if look is None or spec.output.review is None:
        return None
    videos = [s for s in segments if isinstance(s, VideoPass)]
    if len(videos) != len(segments):  # a record from before (the key changed)
        logger.warning("shot %s: a chunk has no review segment; no review movie", shot.ref.name)
        return None
    movie = spec.output.review.movie_url(shot.ref.name, spec.job_id)
    window = shot.window
    return ReviewJob(
        shot=shot.ref.name,
        look=look,
        segment_urls=[s.url for s in videos],
        segment_sha256=[s.sha256 for s in videos],
        info=shot.info,
        source_url=shot.ref.url,
        output_url=shot.ref.output_url,
        window=None if window.whole else window.delivered,
        flags=tuple(flags),
        movie_url=movie,
        contact_url=contact_url(movie),
        signing=signing,
    )
