"""What render actors return to the driver: small, picklable results of one chunk."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.faces.types import Face


@dataclass(frozen=True)
class ChunkAnalysis:
    """Faces (with embeddings) of every frame of one chunk, in frame order."""

    chunk_index: int
    start_frame: int
    faces: list[list[Face]]
    stage_seconds: dict[str, float]
    actor: str

    @property
    def face_count(self) -> int:
        return sum(len(f) for f in self.faces)


@dataclass(frozen=True)
class SegmentResult:
    """One rendered, uploaded segment: what the driver needs to merge and to report."""

    chunk_index: int
    url: str
    sha256: str
    bytes: int
    frames: int
    faces_swapped: int
    stage_seconds: dict[str, float]
    providers: dict[str, list[str]]
    encoder: str
    actor: str
    wall_seconds: float
    model_busy_share: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
