"""The per-shot part of a job spec: the source, its frames and handles, and the settings it overrides.

A shot is a video file (``.mov``, ``.mp4``, ``.mkv``, ``.mxf``) or an image sequence
named with frame padding (``sc010_plate.####.exr``, ``%04d``, ``@@@@``)::

    shots:
      - url: s3://plates/ep101/sc010/sc010_plate.####.exr
        frames: 1009-1092        # render these; the others are copied (sequences)
        handles: 8               # analysed for tracking on each side of frames
        colour: {plate: ACEScg}  # overrides the job's colour block
        selection: {mode: reference, references: {lead: hero}}
        faces: {enhance: true}

Job-level ``selection``, ``faces`` and ``colour`` are the defaults: a shot's block
overrides only the keys it sets.
"""

from __future__ import annotations

import re
from fractions import Fraction

from pydantic import Field, field_validator, model_validator

from cluster.spec.fixes import ShotFix
from cluster.spec.frames import FrameRange
from pipeline.configbase import Frozen
from pipeline.faces.config import FaceConfig, SelectionConfig
from pipeline.plates.sequence import is_sequence_url

VIDEO_EXTENSIONS = (".mp4", ".mov", ".mkv", ".mxf")
IMAGE_EXTENSIONS = (".exr", ".dpx", ".tif", ".tiff", ".png", ".cin")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def check_media_url(url: str) -> str:
    """``url`` if it names a video file or an image sequence with frame padding, else ValueError.

    A query string (a presigned URL's ``?X-Amz-...``) is not part of the name."""
    lower = url.split("?", 1)[0].lower()
    if lower.endswith(VIDEO_EXTENSIONS):
        return url
    if lower.endswith(IMAGE_EXTENSIONS):
        if not is_sequence_url(url):
            raise ValueError(
                f"{url!r} names a single image; an image sequence needs frame padding "
                "such as name.####.exr, name.%04d.exr or name.@@@@.exr"
            )
        return url
    raise ValueError(
        f"must end with one of {', '.join(VIDEO_EXTENSIONS)} (video) or be an image sequence "
        f"({', '.join(IMAGE_EXTENSIONS)} with frame padding), got {url!r}"
    )


class ColourSpec(Frozen):
    """OpenColorIO colour management of image-sequence plates (video keeps its own tags).

    ``config``: an OCIO config (``ocio://default``, the built-in ACES CG config, or
    ``ocio://studio-config-latest``, or a studio config's path or URL).  ``plate``: the
    plates' colour space when their headers do not name it (required then for EXR and
    DPX).  ``model``: the space the face models see.
    """

    config: str = "ocio://default"
    """The OCIO config: ``ocio://default`` (ACES CG), ``ocio://studio-config-latest``, or a studio
    config's path or URL."""
    plate: str | None = None
    """The plates' colour space when their headers do not name it (required then for EXR and DPX)."""
    model: str = "sRGB Encoded Rec.709 (sRGB)"
    """The colour space the face models see; rendered pixels are converted back to the plate's."""


class ShotSpec(Frozen):
    """One shot (``url``) or a glob ``pattern`` that expands to many shots, with its own settings.

    ``output`` overrides ``output.url`` for a single shot (a full URL, no placeholders
    needed).  ``fps`` is the frame rate of an image sequence whose headers carry none.
    """

    name: str | None = None
    """The shot's name in outputs (``{shot}``) and reports; None: the file name without its extension.
    With ``edit:``, an entry with a ``name`` and no ``url`` or ``pattern`` overrides the settings of
    the edit's clip of that name."""
    url: str | None = None
    """One shot's source: a video file (``.mp4``, ``.mov``, ``.mxf``...) or an image sequence with
    frame padding (``plate.####.exr``, ``plate.%04d.dpx``, ``plate.1001-1100#.exr``); local, ``s3://`` or ``gs://``."""
    pattern: str | None = None
    """A glob that expands to many shots (one per matching video or sequence), each named after its file."""
    output: str | None = None
    """This shot's output URL, overriding ``output.url`` (a full URL, no placeholders needed)."""
    frames: FrameRange | None = None
    """The frames to render (a sequence's own numbers; a video's from 0); None: every frame."""
    handles: int = Field(default=0, ge=0, le=10_000)
    """Frames rendered on each side of ``frames`` for the comp's handles (delivered when
    ``output.include_handles``)."""
    fps: float | None = Field(default=None, gt=0.0, le=1000.0)
    """The frame rate of an image sequence whose headers carry none (23.976 is read as 24000/1001)."""
    colour: ColourSpec | None = None
    """This shot's colour management, overriding the job's ``colour`` block field by field."""
    selection: SelectionConfig | None = None
    """This shot's face selection, overriding the job's ``selection`` field by field."""
    faces: FaceConfig | None = None
    """This shot's face rendering, overriding the job's ``faces`` block field by field."""
    fixes: tuple[ShotFix, ...] = ()
    """Notes acted on, each on a range of frames: a track keeps the plate's face or becomes another
    identity, a face the detector missed is boxed, or render settings change (see the editorial
    guide).  A changed fix renders again only the chunks whose frames it touches."""

    @field_validator("url", "output")
    @classmethod
    def _media(cls, url: str | None) -> str | None:
        return None if url is None else check_media_url(url)

    @model_validator(mode="after")
    def _one_source(self) -> ShotSpec:
        # Neither is an override of an edit clip's settings: the job checks it names one.
        if self.url is not None and self.pattern is not None:
            raise ValueError("give exactly one of 'url' or 'pattern'")
        if self.pattern is not None and (self.name is not None or self.output is not None):
            raise ValueError(
                "'name' and 'output' apply to a single 'url'; pattern shots are named after their files"
            )
        if self.pattern is not None and self.fixes:
            raise ValueError("'fixes' apply to a single 'url' (or an edit clip): their tracks are one shot's")
        if self.name is not None and not NAME_RE.match(self.name):
            raise ValueError(f"name {self.name!r} must be letters, digits, '.', '_' or '-'")
        return self

    @property
    def is_override(self) -> bool:
        """An override of an edit clip's settings: a name, no source of its own."""
        return self.url is None and self.pattern is None

    def frame_rate(self) -> Fraction | None:
        """``fps`` as an exact rate (23.976 -> 24000/1001)."""
        if self.fps is None:
            return None
        for ntsc in (24, 30, 48, 60, 120):
            if abs(self.fps - ntsc * 1000 / 1001) < 0.005:
                return Fraction(ntsc * 1000, 1001)
        return Fraction(self.fps).limit_denominator(1001)


def overridden[M: Frozen](default: M, override: M | None) -> M:
    """``default`` with the fields ``override`` sets explicitly (None: ``default`` as is)."""
    if override is None:
        return default
    return default.model_copy(update={k: getattr(override, k) for k in override.model_fields_set})
