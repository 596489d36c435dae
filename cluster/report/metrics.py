"""Job metrics exported through Ray to Prometheus.

``JobMetrics`` is created by the driver (one per job) and owns its
``ray.util.metrics`` objects; every value carries the ``job`` tag, and the
per-shot ones the ``shot`` tag.  Ray exports them on each node's metrics port
(``ray start --metrics-export-port`` / ``ray.init(_metrics_export_port=...)``)
with its ``ray_`` prefix, e.g. ``ray_recast_frames_rendered_total``.

Metric names (as declared here):

* ``recast_frames_rendered_total`` (counter; job, shot)
* ``recast_faces_swapped_total`` (counter; job, shot)
* ``recast_chunk_seconds`` (histogram; job, shot) wall seconds per rendered chunk
* ``recast_stage_seconds_total`` (counter; job, shot, stage) actor-seconds per stage
* ``recast_retries_total`` (counter; job, shot)
* ``recast_actor_busy_ratio`` (gauge; job, actor) share of wall time an actor spent working
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping

from ray.util import metrics

logger = logging.getLogger(__name__)

# Chunks are planned at 10-30 s of footage; rendering one takes from about a second on a
# GPU to minutes on CPU, so the buckets span 1-600 s roughly logarithmically.
CHUNK_SECONDS_BOUNDARIES: tuple[float, ...] = (1, 2, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 450, 600)


class JobMetrics:
    """The metrics of one job.  Create it in the driver after ``ray.init``."""

    def __init__(self, job_id: str) -> None:
        if not job_id:
            raise ValueError("job_id must be a non-empty string")
        self.job_id = job_id
        shot_tags = ("job", "shot")
        self.frames = metrics.Counter(
            "recast_frames_rendered_total", "Frames rendered and uploaded.", tag_keys=shot_tags
        )
        self.faces = metrics.Counter("recast_faces_swapped_total", "Faces swapped.", tag_keys=shot_tags)
        self.chunk_seconds = metrics.Histogram(
            "recast_chunk_seconds",
            "Wall seconds to render one chunk.",
            boundaries=list(CHUNK_SECONDS_BOUNDARIES),
            tag_keys=shot_tags,
        )
        self.stage_seconds = metrics.Counter(
            "recast_stage_seconds_total",
            "Actor-seconds spent in each pipeline stage.",
            tag_keys=("job", "shot", "stage"),
        )
        self.retries = metrics.Counter(
            "recast_retries_total", "Work items retried on another actor.", tag_keys=shot_tags
        )
        self.qc_flags = metrics.Counter(
            "recast_qc_flagged_frames_total",
            "Frames QC flagged for review, by reason.",
            tag_keys=("job", "shot", "reason"),
        )
        self.busy = metrics.Gauge(
            "recast_actor_busy_ratio",
            "Share of wall time the actor spent working (0-1).",
            tag_keys=("job", "actor"),
        )

    def _tags(self, shot: str) -> dict[str, str]:
        return {"job": self.job_id, "shot": shot}

    def chunk_done(
        self,
        shot: str,
        seconds: float,
        frames: int,
        faces: int,
        stage_seconds: Mapping[str, float] | None = None,
    ) -> None:
        """Record one rendered chunk: its wall ``seconds``, ``frames``, ``faces`` swapped, stage times."""
        if frames < 0 or faces < 0 or not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"chunk of {shot!r}: seconds={seconds!r}, frames={frames!r}, faces={faces!r}")
        tags = self._tags(shot)
        if frames:
            self.frames.inc(frames, tags)
        if faces:
            self.faces.inc(faces, tags)
        self.chunk_seconds.observe(seconds, tags)
        for stage, value in (stage_seconds or {}).items():
            # Counters only go up; a zero or a sub-stage of a clock that went backwards is skipped.
            if value > 0 and math.isfinite(value):
                self.stage_seconds.inc(float(value), {**tags, "stage": stage})

    def qc_flagged(self, shot: str, frames_by_reason: Mapping[str, int]) -> None:
        """Count the frames QC flagged in ``shot``, by reason."""
        for reason, frames in frames_by_reason.items():
            if frames > 0:
                self.qc_flags.inc(frames, {**self._tags(shot), "reason": reason})

    def retry(self, shot: str) -> None:
        """Count one retried work item of ``shot``."""
        self.retries.inc(1, self._tags(shot))

    def actor_busy(self, actor: str, ratio: float) -> None:
        """Set ``actor``'s busy share (clamped to 0-1)."""
        if not math.isfinite(ratio):
            raise ValueError(f"busy ratio of {actor!r} is {ratio!r}")
        self.busy.set(min(1.0, max(0.0, float(ratio))), {"job": self.job_id, "actor": actor})
