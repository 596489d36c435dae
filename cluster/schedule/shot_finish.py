"""What is done for a shot once its output is published: the tracks pass and QC's conclusions."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from cluster.schedule.shot_run import ShotRun
from pipeline.qc.config import QcConfig
from pipeline.qc.records import FaceMeasure
from pipeline.store import storage

if TYPE_CHECKING:
    from pipeline.qc.analyze import ShotQC


def measures_of(run: ShotRun) -> list[FaceMeasure]:
    """Every QC measure the actors took of the shot's faces (chunk by chunk, as recorded)."""
    return [m for c in run.shot.renders for m in run.segments[c.index].qc]


def finish_qc(run: ShotRun, measures: list[FaceMeasure], config: QcConfig) -> ShotQC | None:
    """The shot's :class:`~pipeline.qc.analyze.ShotQC` (None when QC is off)."""
    if run.qc_plan is None:
        return None
    from pipeline.qc.staged import finish_checks

    return finish_checks(run.qc_plan, measures, config)


def write_tracks(run: ShotRun, url: str, measures: list[FaceMeasure]) -> dict[str, str]:
    """Write the ``tracks`` pass (JSON lines and a ``.chan`` per track); pass file -> URL."""
    from pipeline.passes.naming import chan_url
    from pipeline.passes.tracks import chan, jsonl

    info = run.shot.info
    similarity = {
        (m.track, info.frame_number(m.frame)): m.similarity_after
        for m in measures
        if m.similarity_after is not None
    }
    records = [
        dataclasses.replace(r, similarity=similarity.get((r.track, r.frame), r.similarity))
        for r in run.track_frames
    ]
    storage.write_bytes(url, jsonl(records))
    written = {"tracks": url}
    for track in sorted({r.track for r in records}):
        target = chan_url(url, track)
        storage.write_bytes(target, chan([r for r in records if r.track == track], info.height))
        written[f"track{track}"] = target
    return written
