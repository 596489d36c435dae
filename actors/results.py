"""What render actors return to the driver: who they are, and small, picklable results of one chunk."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from pipeline.geometry.packing import PackedFaces, packed_faces
from pipeline.geometry.types import Face
from pipeline.qc.records import FaceMeasure

if TYPE_CHECKING:
    from pipeline.stages import StageTimes

ANALYSIS_PARTS = ("letterbox", "detector", "postprocess", "align", "recognizer")


def analysis_stages(times: StageTimes, before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """An analysis chunk's stage seconds: ``decode``, ``analyze`` (the models' stage) and
    ``wall`` as before, plus its parts ``analysis.<part>`` (decode, letterbox, detector,
    postprocess, align, recognizer, and ``bookkeeping``: the rest of the ``analyze`` stage).

    ``before``/``after``: the analyzer's cumulative ``stage_seconds`` around the chunk."""
    parts = {f"analysis.{k}": after.get(k, 0.0) - before.get(k, 0.0) for k in ANALYSIS_PARTS}
    bookkeeping = max(0.0, times.process_seconds - sum(parts.values()))
    return {
        "decode": times.read_seconds,
        "analyze": times.process_seconds,
        "wall": times.wall_seconds,
        "analysis.decode": times.read_seconds,
        **parts,
        "analysis.bookkeeping": bookkeeping,
    }


@dataclass(frozen=True)
class PackInfo:
    """The model pack an actor loaded."""

    url: str
    name: str
    hash: str


@dataclass(frozen=True)
class ActorInfo:
    """Who a render actor is and what it actually runs on (``RenderWorker.info()``).

    In the job summary as :meth:`to_dict` (``actor_info``)."""

    label: str
    host: str
    pid: int
    providers: dict[str, list[str]]
    """Model role -> the execution providers its session runs on, in order."""
    warnings: tuple[str, ...]
    nvdec: bool
    """True when the actor decodes with NVDEC."""
    pack: PackInfo
    identities: tuple[str, ...]
    encoders_built_in: tuple[str, ...]
    """The encoders of interest its PyAV has (NVENC, x264, x265, ProRes)."""
    setup_seconds: float
    models_id: int
    """``id()`` of its model sessions: the same for the actor's whole life."""
    chunks_done: int
    node_id: str | None = None
    """The Ray node it was placed on (set by the driver's set-up probe; None: not asked)."""

    def to_dict(self) -> dict[str, Any]:
        """The summary's record of the actor (``node_id`` only when known)."""
        out = dataclasses.asdict(self)
        for key in ("warnings", "identities", "encoders_built_in"):
            out[key] = list(out[key])
        if self.node_id is None:
            del out["node_id"]
        return out


@dataclass(frozen=True)
class ChunkAnalysis:
    """Faces (with embeddings) of every frame of one chunk, in frame order."""

    chunk_index: int
    start_frame: int
    faces: list[list[Face]]
    stage_seconds: dict[str, float]
    actor: str
    faces_embedded: int = -1
    """Faces the recognizer embedded (-1: not counted, an analysis from before schedules)."""
    warnings: tuple[str, ...] = ()
    """What the analysis could not do as configured (e.g. a detector that keeps its input size)."""
    storage_retries: int = 0
    """Object-store retries the actor made since its previous result (:mod:`pipeline.store.retries`)."""
    counts: tuple[int, int] | None = None
    """(frames, faces) of an analysis whose faces travel apart (:meth:`apart`); None: they are here."""

    @property
    def face_count(self) -> int:
        return self.counts[1] if self.counts is not None else sum(len(f) for f in self.faces)

    @property
    def frame_count(self) -> int:
        return self.counts[0] if self.counts is not None else len(self.faces)

    def apart(self) -> tuple[ChunkAnalysis, PackedFaces]:
        """This analysis without its faces (counted), and the faces, packed to pickle as arrays (they
        unpickle as the list): the driver reads the first, the shot's planner actor the second
        (:mod:`cluster.schedule.shot_worker`)."""
        counts = (self.frame_count, self.face_count)
        return dataclasses.replace(self, faces=[], counts=counts), packed_faces(self.faces)


class FrameFile(NamedTuple):
    """One frame of an image sequence an actor wrote (in the manifest: ``[number, sha256, bytes]``)."""

    number: int
    sha256: str
    bytes: int


@dataclass(frozen=True)
class VideoPass:
    """A compositing pass of a video chunk: its own segment (in the manifest: ``[url, bytes, sha256]``)."""

    url: str
    bytes: int
    sha256: str


@dataclass(frozen=True)
class SequencePass:
    """A compositing pass of an image-sequence chunk: its frame pattern and the frames written there
    (in the manifest: ``[url, [[number, sha256, bytes], ...]]``)."""

    url: str
    frames: tuple[FrameFile, ...]


@dataclass(frozen=True)
class VideoLayersPlan:
    """What a video chunk's matte and face pass frames are (``output.passes``): each pass's frame
    pattern, the shot's OCIO config (the face pass's scene-linear space) and the source frames
    ``[first, end)`` the shot delivers (a chunk writes pass frames only for those)."""

    urls: dict[str, str]
    config: str
    delivered: tuple[int, int]


ChunkPass = VideoPass | SequencePass
"""A chunk's pass: a segment (video) or frames (image sequence)."""


def pass_sha256(passes: Mapping[str, ChunkPass]) -> dict[str, str]:
    """URL -> recorded sha256 of each video pass segment (a sequence pass's frames have their own)."""
    return {p.url: p.sha256 for p in passes.values() if isinstance(p, VideoPass)}


@dataclass(frozen=True)
class ChunkWatermark:
    """The watermark a chunk got: the payload (8 hex digits), the step (strength) and the source frame
    numbers marked, as inclusive ``(first, last)`` runs."""

    payload: str
    step: float
    frames: tuple[tuple[int, int], ...]


@dataclass(frozen=True, kw_only=True)
class SegmentResult:
    """One rendered, uploaded segment: what the driver needs to merge and to report."""

    chunk_index: int
    url: str
    """The segment (video), or the output's frame pattern (image sequence)."""
    sha256: str
    """The segment's (video), or the frame listing's (image sequence: ``"<number> <sha256>\\n"`` lines)."""
    bytes: int
    frames: int
    faces_swapped: int
    stage_seconds: dict[str, float]
    providers: dict[str, list[str]]
    encoder: str
    actor: str
    wall_seconds: float
    model_busy_share: float = 0.0
    frames_reused: int = 0
    """Frames converted from the analysis' decoded pictures (:mod:`actors.chunkframes`)."""
    frames_decoded: int = 0
    """Frames the render decoded (or read, for image sequences)."""
    frame_files: tuple[FrameFile, ...] = ()
    """Image sequences: every frame written to the output's pattern."""
    passes: dict[str, ChunkPass] = field(default_factory=dict)
    """Compositing passes written with the chunk (``output.passes``), by name."""
    qc: tuple[FaceMeasure, ...] = ()
    """QC measures of the chunk's replaced faces (QC on)."""
    watermark: ChunkWatermark | None = None
    """The frames that got the watermark (``provenance.watermark`` on)."""
    replaced_frames: tuple[tuple[int, int], ...] = ()
    """Runs ``(first, last)`` of the source frame numbers whose faces were replaced (AI-modified)."""
    storage_retries: int = 0
    """Object-store retries the actor made since its previous result (:mod:`pipeline.store.retries`)."""
