"""Provenance settings shared by the job spec, the actors and the provenance tools.

Kept apart from the modules that use them so that reading a job spec does not
load the C2PA library or the watermark's signal processing.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pipeline.configbase import Frozen

EMBEDDED_SUFFIXES = (".mp4", ".mov", ".m4v")
"""Outputs whose Content Credentials are embedded (C2PA in the BMFF container); every other output
(MKV, image sequences) gets a signed sidecar manifest (:mod:`pipeline.provenance.sidecar`)."""


class SignerConfig(Frozen):
    """Where the studio's signing key and certificate chain live (URLs or paths)."""

    certificate_chain_url: str
    """PEM: the signing certificate first, then intermediates (not the root)."""
    private_key_url: str
    """PEM private key (PKCS#8) matching the signing certificate."""
    algorithm: Literal["es256", "es384", "es512", "ps256", "ps384", "ps512", "ed25519"] = "es256"
    """The signature algorithm; it must match the private key (``es256`` for a P-256 EC key)."""
    timestamp_url: str | None = None
    """RFC 3161 time-stamp authority; None signs without a time stamp (no network)."""


class WatermarkConfig(Frozen):
    """Strength and key of the mark; the detector must use the same values."""

    key: str = "recast"
    """Secret that scrambles bit positions and dither; studios should set their own."""
    step: float = Field(default=32.0, gt=0.0, le=255.0, allow_inf_nan=False)
    """QIM step in 8-bit luma DCT units: larger survives stronger compression but shows
    more (32: about 38.5 dB PSNR in the face region; 40: 36.6 dB)."""
    min_z: float = Field(default=1.5, ge=0.0, allow_inf_nan=False)
    """Detection threshold on the mean |z| of the 56 bit votes (about 0.8 on unmarked content)."""
    min_strength: float = Field(default=0.0, ge=0.0, le=1.0, allow_inf_nan=False)
    """Optional threshold on the mean vote strength (0 = random, 1 = perfect)."""
