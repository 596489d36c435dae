"""What one benchmark run measures: a frozen record built once from the command line."""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class Settings:
    """What to run; defaults fit a 2-core machine in about 15-20 minutes.

    Every field is recorded under ``settings`` in ``bench.json``.  A scenario adds
    its switch (and any sizes it needs) here, a flag in ``jobs.benchmark`` and an
    entry in :data:`bench.scenarios.SCENARIOS`.
    """

    out: str
    sizes: tuple[str, ...] = ("720p", "1080p")
    fps: int = 24
    default_seconds: float = 6.0
    production_seconds: float = 4.0
    """Long enough that start-up transients (a second actor still loading its models
    while the first one works: about 2 s with the Winograd rewrite) stay a few per cent."""
    default_chunk_seconds: float = 1.5
    production_chunk_seconds: float = 2.0
    enhance_row: bool = True
    ceiling_frames: int = 3
    analysis_frames: int = 48
    """Frames of the analysis-pass figures (``analysis.py``), per model set and size."""
    memory: bool = False
    memory_fps: int = 4
    demo: bool = False
    demo_seconds: float = 20.0
    compare: bool = True
    """The naive-vs-Recast comparisons and ceilings (off: only the optional scenarios)."""
    scaling: bool = True
    """The 4-chunk scaling figure: a 4-chunk shot on 1 actor and on one actor per core, 1 CPU each."""
    scaling_chunk_seconds: float = 2.0
    """Default-pack chunk length of the scaling shot (4 chunks)."""
    scaling_production_fps: int = 6
    """Frame rate of the production-set scaling shot (4 chunks of 1 s; keeps it to minutes)."""
    scale: bool = False
    """The driver at feature-film scale against simulated actors (``bench.driver_scale.scale``)."""
    scale_shots: int = 300
    scale_chunks_per_shot: int = 30
    scale_actors: int = 1024
    scale_time_scale: float = 1.0
    """Modelled chunk times are multiplied by this (below 1: completions arrive faster)."""
    scale_crowd_shots: int = 40
    """Shots of the crowd case run after the main one (0: none), with ``scale_crowd_faces`` faces per frame."""
    scale_crowd_faces: int = 12
    multishot: bool = False
    """Time to first published shot of a multi-shot job, in each dispatch order (``bench.multishot``)."""
    multishot_shots: int = 4
    multishot_seconds: float = 3.0
    """Length of the shortest shot; each further shot is 0.5 s longer."""
    plates: bool = False
    """Film plates: frame I/O per actor, the colour round trip, a job beside ProRes
    (``bench.film_plates.plate_figures``)."""
    plates_sizes: tuple[str, ...] = ("2K", "4K")
    plates_frames: int | None = None
    """Frames per I/O case; None: 16 at 2K, 8 at 4K."""
    plates_job_frames: int = 24
    plates_job_size: str = "4K"
    steady: bool = False
    """Steadiness of the paste on 1080p and 4K plates, letterboxed and refined (``bench.steady``)."""
    tiny: bool = False
    """Test scale: small frames, tiny stand-ins for the production set (figures meaningless)."""

    @property
    def cores(self) -> int:
        return os.cpu_count() or 1

    def record(self) -> dict[str, Any]:
        """The fields as ``bench.json`` stores them."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


QUICK = MappingProxyType(
    {
        "sizes": ("720p",),
        "default_seconds": 4.0,
        "production_seconds": 2.0,
        "production_chunk_seconds": 1.0,
        "default_chunk_seconds": 1.0,
        "enhance_row": False,
        "ceiling_frames": 2,
        "analysis_frames": 24,
    }
)
"""``--quick``: 720p only, shorter clips, no enhance row (a few minutes)."""

TINY = MappingProxyType(
    {
        "sizes": ("320x180",),
        "default_seconds": 2.0,
        "production_seconds": 2.0,
        "default_chunk_seconds": 1.0,
        "production_chunk_seconds": 1.0,
        "enhance_row": False,
        "ceiling_frames": 1,
        "analysis_frames": 4,
        "scaling_chunk_seconds": 1.0,
        "plates_sizes": ("320x180",),
        "plates_frames": 2,
        "plates_job_frames": 4,
        "plates_job_size": "320x180",
        "multishot_shots": 2,
        "multishot_seconds": 2.0,
        "tiny": True,
    }
)
"""``--tiny``: test scale, small frames and tiny stand-in models."""
