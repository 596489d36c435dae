"""The ``edit:`` block of a job spec: the shots of an editorial timeline (OTIO, EDL, FCP XML, AAF)::

    edit:
      url: s3://editorial/ep101/ep101_v3.otio     # .otio, .otioz, .edl, .xml (.aaf with the aaf extra)
      tracks: [V1]                                # video tracks to render; default: every one
      handles: 8                                  # analysed (and delivered) on each side of every clip
      offline: fail                               # fail | skip: clips without usable media
      media: {pattern: "s3://plates/ep101/{reel}/{reel}.####.exr"}   # EDL reel names -> media

Only the block is validated here; :mod:`cluster.edit` reads the timeline and turns its clips
into shots before anything else looks at them.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from cluster.spec.output import FieldError, extension_of
from cluster.spec.shot import check_media_url
from pipeline.configbase import Frozen

READ_ADAPTERS = {
    ".otio": "otio_json",
    ".otioz": "otioz",
    ".edl": "cmx_3600",
    ".xml": "fcp_xml",
    ".aaf": "AAF",
}
"""The OpenTimelineIO adapter that reads a timeline, by the file's extension."""


class EditMediaSpec(Frozen):
    """Where the media of a clip named only by its reel (an EDL event) is found."""

    pattern: str
    """A URL with ``{reel}``: the reel name of each EDL event gives its plate or movie
    (``s3://plates/ep101/{reel}/{reel}.####.exr``); the event's source timecode is placed with the
    media's own timecode (EXR/DPX ``smpte:TimeCode``, a movie's ``timecode``)."""

    @field_validator("pattern")
    @classmethod
    def _reel_template(cls, value: str) -> str:
        placeholders = set(re.findall(r"{([^}]*)}", value))
        if placeholders != {"reel"}:
            raise ValueError(f"needs a {{reel}} placeholder and no other, got {sorted(placeholders)}")
        check_media_url(value.replace("{reel}", "reel"))
        return value


class EditSpec(Frozen):
    """An editorial timeline whose clips become shots (beside any ``shots:`` of the job).

    Every clip with media on the chosen video tracks becomes one shot named after the clip;
    a ``shots:`` entry with only a ``name`` (and settings) overrides that clip's settings.
    Offline clips, speed effects and nested stacks are refused (``offline: fail``) or left
    out and listed in the summary (``offline: skip``).
    """

    url: str
    """The timeline: ``.otio``, ``.otioz``, ``.edl`` (CMX 3600), ``.xml`` (Final Cut Pro 7 XML) or
    ``.aaf`` (with the ``aaf`` extra); local, ``s3://`` or ``gs://``.  Relative media paths in it
    are taken against its folder; an ``.otioz``'s own media are extracted to the work area
    (:mod:`cluster.edit.bundle`)."""
    tracks: tuple[str, ...] | None = Field(default=None, min_length=1)
    """Names of the video tracks to render (an unnamed track is ``V1``, ``V2``... by position);
    None: every video track."""
    handles: int = Field(default=0, ge=0, le=10_000)
    """Frames analysed on each side of every clip (delivered too with ``output.include_handles``),
    clamped to the media's own frames; the summary says which clips' handles were clamped."""
    offline: Literal["fail", "skip"] = "fail"
    """``fail``: refuse the job, naming every clip that cannot be rendered (offline media, speed
    effects, nested stacks); ``skip``: render the rest and list those clips in the summary."""
    media: EditMediaSpec | None = None
    """Where the media of clips named only by a reel (EDL events without a file) is found."""
    adapter: str | None = None
    """The OpenTimelineIO adapter that reads ``url`` (``otio_json``, ``cmx_3600``, ``fcp_xml``,
    ``AAF``...); None: chosen by the file's extension."""
    rate: float | None = Field(default=None, gt=0.0, le=1000.0)
    """EDL only: the timeline's frame rate, which an EDL does not state; None: 24."""

    @model_validator(mode="after")
    def _known_format(self) -> EditSpec:
        if self.adapter is None and extension_of(self.url) not in READ_ADAPTERS:
            raise FieldError(
                "edit.url",
                f"{self.url!r} is no timeline Recast reads ({', '.join(READ_ADAPTERS)}); "
                "name the adapter with edit.adapter for another extension",
            )
        return self

    def adapter_name(self) -> str:
        """The adapter that reads ``url``."""
        return self.adapter or READ_ADAPTERS[extension_of(self.url)]

    def edl_rate(self) -> float:
        """The rate an EDL is read at."""
        return self.rate or 24.0
