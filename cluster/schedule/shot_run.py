"""Driver-side state of one shot while its job runs."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from actors.results import SegmentResult
from cluster.checks.prepare import PlannedShot
from cluster.state.keys import RenderKey
from cluster.state.manifest import RenderRecord
from cluster.state.segment_record import SegmentHome
from pipeline.geometry.types import FaceTask
from pipeline.store import storage
from pipeline.video.chunking import Chunk
from pipeline.video.encode import EncoderChoice

if TYPE_CHECKING:
    from cluster.schedule.dispatch import Dispatcher

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChunkRender:
    """One chunk's render: its face tasks, its key, and the segment an earlier run committed, if any."""

    chunk: Chunk
    tasks: list[list[FaceTask]] | Any
    """The face tasks of each frame; on the driver, a reference to them in Ray's object store (the
    planner actor put them there; the render actor reads them, the driver never does)."""
    key: RenderKey
    committed: RenderRecord | None
    recut: bool = False
    """``committed`` was cut back out of the published output (:mod:`cluster.state.recover`)."""
    affinity: tuple[str, ...] = ()
    """Identities with an adapter that the chunk renders: actors that hold them are preferred."""


@dataclass
class ShotRun:
    """Driver-side state of one shot while the job runs."""

    shot: PlannedShot
    rank: int
    """0 = the most work."""
    encoder: EncoderChoice
    info_ref: Any
    """The VideoInfo put in the object store once, not pickled per call."""
    started_at: float = field(default_factory=time.perf_counter)
    next_to_track: int = 0
    """Chunks tracked so far (by the shot's planner actor, :mod:`cluster.schedule.shot_worker`)."""
    render_keys: dict[int, RenderKey] = field(default_factory=dict)
    segments: dict[int, SegmentResult] = field(default_factory=dict)
    done: bool = False
    planned_renders: dict[int, ChunkRender] = field(default_factory=dict)
    """Every chunk's planned render (a segment found changed at the merge is rendered again from it)."""
    reused: set[int] = field(default_factory=set)
    """Chunks whose segment an earlier run committed."""
    merge_retried: bool = False
    analysed_by: dict[int, str] = field(default_factory=dict)
    """Chunk -> label of the actor that analysed it ("manifest": reused); its render prefers that actor."""

    @property
    def name(self) -> str:
        return self.shot.ref.name

    @property
    def chunks(self) -> int:
        """Chunks analysed."""
        return len(self.shot.plan.chunks)

    @property
    def renders(self) -> int:
        """Chunks rendered (those holding delivered frames)."""
        return len(self.shot.renders)

    def segment_url(self, work_url: str, index: int, key: str) -> str:
        """Where chunk ``index``'s segment goes; the render key in the name keeps stale segments apart.

        An image sequence's frames go straight to the output's frame names (each written whole)."""
        if self.shot.is_sequence:
            return self.shot.ref.output_url
        name = f"{index:05d}-{key[:12]}.{self.encoder.container}"
        return storage.join(work_url, "segments", self.name, name)

    def review_segment_url(self, work_url: str, index: int, key: str) -> str | None:
        """Where an image sequence's chunk ``index`` writes its review segment (None: a video, whose
        review segment goes beside its segment)."""
        if not self.shot.is_sequence:
            return None
        return storage.join(work_url, "segments", self.name, f"{index:05d}-{key[:12]}.review.mp4")

    def segment_home(self, work_url: str) -> SegmentHome:
        """Where this shot's segments (and pass segments) are written: a record pointing elsewhere is ignored."""
        return segment_home(self.shot, work_url)


def segment_home(shot: PlannedShot, work_url: str) -> SegmentHome:
    """Where ``shot``'s segments (and pass and review segments) are written in the work area ``work_url``."""
    folder = storage.join(work_url, "segments", shot.ref.name)
    if shot.is_sequence:
        return SegmentHome(frames_url=shot.ref.output_url, pass_urls=shot.pass_urls, folder=folder)
    return SegmentHome(pass_urls=shot.pass_urls, folder=folder)  # a video's pass frames: where published


def log_progress(runs: Sequence[ShotRun], dispatcher: Dispatcher, elapsed: float) -> None:
    """One log line: frames analysed and rendered of every shot, the rate, the work in flight."""
    total = sum(r.shot.plan.frame_count for r in runs)
    delivered = sum(r.shot.window.delivered_count for r in runs)
    analysed = sum(
        r.shot.plan.chunks[i].frame_count for r in runs for i in range(min(r.next_to_track, r.chunks))
    )
    rendered = sum(s.frames for r in runs for s in r.segments.values())
    d = dispatcher
    logger.info(
        "progress: analysed %d/%d, rendered %d/%d frames (%.1f fps), %d in flight, %d pending, %d retries",
        analysed,
        total,
        rendered,
        delivered,
        rendered / elapsed if elapsed > 0 else 0.0,
        d.inflight,
        d.pending,
        d.retries,
    )
