"""Typed options of the face stages: which faces to replace, and how to render them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from pipeline.configbase import Frozen

AUTO_DETECT_VERSION = 2
"""How ``faces.detect_size: auto`` detects, in the analysis key: analyses made another way
are never reused (1: tiles for small faces; 2: also a smaller input for large ones)."""
REFINE_VERSION = 1
"""How ``faces.refine: auto`` refines, in the analysis key (1: frames letterboxed to 0.4 or less, a crop
of 1.8 face sides enlarged at most 2x, faces shown 2x larger than by the letterbox)."""


class SelectionConfig(Frozen):
    """Which target faces are replaced, and by whom.

    - ``all``: every detected face becomes ``source``.
    - ``largest``: only the largest face of each frame becomes ``source``.
    - ``reference``: each target face is compared (cosine similarity of recognizer
      embeddings) to the reference identities; a face that reaches ``threshold`` for
      its best reference becomes ``references[reference]``.  Within one frame each
      reference is given to at most one face (optimal assignment), so several people
      in one shot each get their own source.

    ``threshold`` lives in the recognizer's space.  Defaults that separate same-person
    from different-person pairs: ArcFace w600k_r50 0.35 (insightface's usual 0.3-0.4);
    SFace 0.363 (OpenCV's published threshold; measured same person across frames
    >= 0.7, different people <= 0.36), so 0.35-0.5 is safe for SFace too.
    """

    mode: Literal["all", "largest", "reference"] = "all"
    """``all``, ``largest`` or ``reference``: which target faces are replaced (see above)."""
    source: str | None = None
    """The identity every selected face becomes in modes ``all`` and ``largest``."""
    references: dict[str, str] = Field(default_factory=dict)
    """Mode ``reference``: reference identity -> the source identity its matching faces become."""
    threshold: float = Field(default=0.35, ge=-1.0, le=1.0)
    """Mode ``reference``: the least cosine similarity to a reference that counts as a match."""

    @model_validator(mode="after")
    def _check(self) -> SelectionConfig:
        # a missing ``source`` in mode all/largest is allowed here (a job spec with one
        # identity fills it in); check_selection rejects it before any frame is processed
        if self.mode == "reference" and not self.references:
            raise ValueError(
                "selection mode 'reference' needs 'references' (reference identity -> source identity)"
            )
        return self

    def identity_names(self) -> set[str]:
        """Every identity name this selection refers to (references and sources)."""
        names = set(self.references) | set(self.references.values())
        if self.source:
            names.add(self.source)
        return names


class FaceConfig(Frozen):
    """How selected faces are rendered.

    ``mask_erode`` and ``mask_blur`` are fractions of the swapper crop size: the paste
    mask's border is pulled in by ``mask_erode`` and feathered with a Gaussian of sigma
    ``mask_blur``.  ``batch_size`` bounds how many faces go through a model call (and frames
    per batch between an actor's stages, so at most 256: 256 UHD frames are already 6 GB).

    ``embed`` (analysis pass): ``track`` embeds a face at its track's start, on every
    ``embed_stride``-th frame of the shot, when its box or landmarks jump and where
    the tracker is unsure (faces near each other), see :mod:`pipeline.faces.embedplan`;
    ``every_frame`` embeds every face of every frame.
    """

    enhance: bool = False
    """Run the pack's face enhancer (e.g. GFPGAN) on each swapped face."""
    enhance_blend: float = Field(default=0.8, ge=0.0, le=1.0)
    """How much of the enhanced face is blended over the swapped one (1 = all of it)."""
    occlusion: bool = False
    """Keep what covers a face (hands, hair) with the pack's occlusion matte (e.g. XSeg)."""
    color_match: bool = True
    """Match the swapped face's colour statistics to the plate's face before pasting (the built-in
    swapper matches the inner face it pastes itself, whatever this says)."""
    mask_erode: float = Field(default=0.05, ge=0.0, le=0.4)
    """How far the paste mask's border is pulled in, as a fraction of the crop size."""
    mask_blur: float = Field(default=0.08, ge=0.0, le=0.5)
    """The Gaussian sigma that feathers the paste mask, as a fraction of the crop size."""
    batch_size: int = Field(default=8, ge=1, le=256)
    """Faces per model call (and frames per batch between an actor's stages)."""
    embed: Literal["track", "every_frame"] = "track"
    """Analysis pass: ``track`` embeds faces where it matters, ``every_frame`` embeds every face."""
    embed_stride: int = Field(default=8, ge=1, le=10_000)
    """With ``embed: track``: embed each tracked face at least every this many frames."""
    refine: Literal["auto", "off"] = "auto"
    """``auto``: on frames of 1080p and larger, each face the detector's letterbox shows at under half
    the size a crop at the plate's own resolution shows it is detected again on that crop, for
    landmarks at the plate's precision (:mod:`pipeline.faces.refine`); ``off``: the letterbox's."""
    detect_size: Literal["fixed", "auto"] = "fixed"
    """``auto``: full-resolution tiles too where the first frame of a chunk has faces the
    letterboxed frame misses, a smaller detector input where its faces are all large
    (:mod:`pipeline.faces.detectsize`); ``fixed``: the detector's own input, always."""


class AdapterSource(Frozen):
    """A per-identity adapter (e.g. LoRA) file with its checksum."""

    url: str
    """The adapter file (e.g. a LoRA made by ``jobs.prepare_lora``): local, ``s3://`` or ``gs://``."""
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    """The adapter file's sha256 (64 lower-case hex digits); a file that differs is refused."""


class IdentitySource(Frozen):
    """Source pictures of one identity; ``face_index`` picks a face in group pictures."""

    images: tuple[str, ...] = Field(min_length=1)
    """Pictures of the identity (JPEG, PNG...): local, ``s3://`` or ``gs://``."""
    face_index: int | None = Field(default=None, ge=0)
    """Which face of a group picture, numbered left to right from 0; None: each picture must hold one face."""
    adapter: AdapterSource | None = None
    """A per-identity adapter (e.g. LoRA) with its checksum; None: the base models alone."""
