"""Bounds on what a job reads, so that no input can make a read, a decode or a plan unbounded.

Fixed caps (no spec can raise them): a job spec and a studio policy are at most
:data:`SPEC_MAX_BYTES`, a model pack manifest at most :data:`MANIFEST_MAX_BYTES`; files Recast
wrote itself are read within caps too (:data:`LEASE_MAX_BYTES`, :data:`WORK_RECORD_MAX_BYTES`,
:data:`ANALYSIS_MAX_BYTES`), as are consent reference embeddings (:data:`EMBEDDING_MAX_BYTES`).

Caps a job may change in its ``limits:`` block (:class:`InputLimits`, validated;
each has a ceiling of its own): source frame size, identity picture size, shots
per job.  A model file is capped by its manifest entry's ``size`` when the pack
gives one, else by :data:`MODEL_FILE_MAX_BYTES`.

The chunk-length floor (``chunking.min_seconds`` may not go below it) is 10 s; a
cluster or a test suite may lower it with ``RECAST_MIN_CHUNK_SECONDS`` (never a job spec).
"""

from __future__ import annotations

import os

from pydantic import Field

from pipeline.configbase import Frozen
from pipeline.errors import SpecError

MIB = 1 << 20
SPEC_MAX_BYTES = MIB
"""A job spec or a studio policy file."""
MANIFEST_MAX_BYTES = MIB
"""A model pack's ``manifest.json``."""
MODEL_FILE_MAX_BYTES = 8 << 30
"""A model file whose manifest entry gives no ``size``."""
ONNX_MAX_BYTES = 2 << 30
"""An ONNX model read whole into memory (protobuf's own 2 GiB ceiling)."""
PEM_MAX_BYTES = MIB
"""A key, a certificate chain or a trust-anchor file."""
EMBEDDING_MAX_BYTES = 4 * MIB
"""A consent reference embedding ``.npy`` named by the studio policy (thousands of 512-float rows)."""
LEASE_MAX_BYTES = 64 << 10
"""A work area's ``lease.json`` (a few hundred bytes as Recast writes it); a larger one is read as a
corrupt lease: the driver refuses (exit 2, naming the file) unless ``--force-takeover``."""
WORK_RECORD_MAX_BYTES = 256 * MIB
"""A JSON record Recast wrote in a work area or an audit folder.  The largest, ``manifest/job.json``,
holds about 100 bytes per shot, so a job of a million shots fits.  A larger manifest record is treated
as absent (with a warning: its work is redone); a larger audit record is an invalid one."""
ANALYSIS_MAX_BYTES = 1 << 30
"""A chunk's analysis ``.npz`` in the manifest (the faces of at most 30 s of frames); a larger one is
treated as absent and the chunk analysed again."""
COMPACT_MAX_BYTES = 4 << 30
"""A shot's ``manifest/<shot>/compact.bin``: copies of its chunk records and analysis npz files (a few
MiB for a shot of 30 chunks); a larger one is set aside and the files themselves are read."""

CHUNK_MIN_SECONDS, CHUNK_MAX_SECONDS = 10.0, 30.0
MIN_CHUNK_ENV = "RECAST_MIN_CHUNK_SECONDS"


class InputLimits(Frozen):
    """The ``limits:`` block of a job spec: what a source, a picture or a job may be at most."""

    max_width: int = Field(default=16_384, ge=1, le=65_536)
    """Source frame width in pixels (videos and image sequences)."""
    max_height: int = Field(default=16_384, ge=1, le=65_536)
    """Source frame height in pixels (videos and image sequences)."""
    max_pixels: int = Field(default=8192 * 8192, ge=1, le=32_768 * 32_768)
    """Source frame area (width x height); the default is 8K x 8K."""
    max_image_bytes: int = Field(default=50 * MIB, ge=1, le=1 << 30)
    """An identity picture's file size."""
    max_image_pixels: int = Field(default=50_000_000, ge=1, le=150_000_000)
    """An identity picture's decoded size (width x height), read from its header before decoding."""
    max_shots: int = Field(default=10_000, ge=1, le=1_000_000)
    """Shots per job, after patterns are expanded."""

    def frame_problem(self, width: int, height: int) -> str | None:
        """Why a source of ``width`` x ``height`` is refused (None: it is not)."""
        if width > self.max_width:
            return f"frames are {width}x{height}, wider than limits.max_width {self.max_width} px"
        if height > self.max_height:
            return f"frames are {width}x{height}, taller than limits.max_height {self.max_height} px"
        if width * height > self.max_pixels:
            return (
                f"frames are {width}x{height} ({width * height:,} pixels), more than "
                f"limits.max_pixels {self.max_pixels:,}"
            )
        return None


def min_chunk_seconds() -> float:
    """The floor of ``chunking.min_seconds``: 10 s, or ``$RECAST_MIN_CHUNK_SECONDS`` (1-10) when set.

    Read when a spec is parsed, never at import.  A bad value raises SpecError naming the variable
    (not ValueError: pydantic passes it through the validator that asks, so it is not blamed on a field)."""
    raw = os.environ.get(MIN_CHUNK_ENV, "")
    if not raw:
        return CHUNK_MIN_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 1.0 <= value <= CHUNK_MIN_SECONDS:  # also refuses nan
        raise SpecError(
            MIN_CHUNK_ENV,
            f"the cluster's environment variable must be a number of seconds from 1 to 10, got {raw!r}",
        )
    return value
