"""QC thresholds and gates (the spec's ``qc:`` block)."""

from __future__ import annotations

from pydantic import Field, field_validator

from pipeline.configbase import Frozen
from pipeline.qc.records import REASONS


class QcConfig(Frozen):
    """When a frame is flagged for review, and which flags fail a shot.

    ``identity_every``: measure the output face's identity on every N-th frame of each
    track (the recognizer costs about as much as a swap; 1 = every frame).
    ``fail_on``: reasons that make the job exit 1 for the shot (its outputs are still
    published), e.g. ``[unreplaced]`` to gate delivery on faces flashing back.
    """

    enabled: bool = True
    """Measure each shot for the QC list (flagged frames in the report); false: no QC measures."""
    identity_every: int = Field(default=48, ge=1)
    """Measure a replaced face's identity on every N-th frame of its track (1 = every frame)."""
    min_identity: float = Field(default=0.30, ge=-1.0, le=1.0)
    """Flag a replaced face whose cosine to its identity is below this (pack recognizer space)."""
    min_unreplaced_run: int = Field(default=1, ge=1)
    """Flag runs of at least this many unreplaced frames inside a replaced track."""
    join_gap_frames: int = Field(default=24, ge=0)
    """Coverage follows one face across tracks the plan kept apart: a track that starts at most
    this many frames after another ended, near where it ended, is the same face, and the frames
    between them count as unreplaced (the tracker lost the face; the plate's face shows there)."""
    join_distance: float = Field(default=1.0, gt=0.0)
    """...near: box centres at most this many face sizes (square root of the mean box area) apart."""
    hidden_overlap: float = Field(default=0.5, ge=0.0, le=1.0)
    """A lost face whose interpolated box is covered at least this much by another detected face
    is behind it (nothing of it shows), not unreplaced; keep it at tracking.occluded_overlap."""
    switch_margin: float = Field(default=0.10, ge=0.0, le=2.0)
    """Flag a track whose faces are closer to another reference than to its own by this much..."""
    switch_frames: int = Field(default=3, ge=1)
    """...for at least this many frames in a row."""
    max_jitter: float = Field(default=0.02, gt=0.0)
    """Landmark acceleration after smoothing, as a fraction of the eye distance."""
    max_flicker: float = Field(default=3.0, gt=0.0)
    """Frame-to-frame change of the replaced region divided by the plate's own change there."""
    flicker_floor: float = Field(default=0.01, gt=0.0)
    """Changes below this (0-1 scale) are never flicker, however still the plate is."""
    max_seam: float = Field(default=2.5, gt=0.0)
    """Gradient across the matte edge in the output / in the plate."""
    fail_on: tuple[str, ...] = ()
    """QC reasons that make the job exit 1 for the shot (its outputs are still published)."""

    @field_validator("fail_on")
    @classmethod
    def _known(cls, reasons: tuple[str, ...]) -> tuple[str, ...]:
        unknown = sorted(set(reasons) - set(REASONS))
        if unknown:
            raise ValueError(f"unknown reason(s) {unknown}; choose from {', '.join(REASONS)}")
        return reasons
