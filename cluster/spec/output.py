"""The ``output:`` section of a job spec: where and how each shot is written."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import field_validator, model_validator

from cluster.spec.review import ReviewSpec
from cluster.spec.shot import check_media_url
from pipeline.colour import OutputColour
from pipeline.configbase import Frozen
from pipeline.plates.sequence import is_sequence_url
from pipeline.video.encode import EncodeSettings, check_preset, check_quality

TIMELINE_WRITERS = {".otio": "otio_json", ".edl": "cmx_3600", ".xml": "fcp_xml"}
"""The OpenTimelineIO adapter that writes ``output.timeline_url``, by its extension (not ``.otioz``:
it would copy every output into the bundle)."""


def extension_of(url: str) -> str:
    """``url``'s extension, lower case, with its dot (a query string is not part of the name)."""
    name = url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1].lower()
    return "." + name.rsplit(".", 1)[-1] if "." in name else ""


class FieldError(ValueError):
    """A cross-field problem that knows its own dotted field path."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field = field
        self.reason = reason


class OutputSpec(Frozen):
    """Where and how each shot is written.

    ``url`` is a template with ``{shot}`` (and optionally ``{job_id}``); its
    extension picks the container.  ``work_url`` holds segments and the job
    summary; by default ``.recast-work/<job_id>/`` beside the first output.
    """

    url: str
    """The output of each shot: a template with ``{shot}`` (and optionally ``{job_id}``) whose
    extension picks the container (``.mp4``, ``.mov``, ``.mkv``, or a padded image sequence)."""
    codec: Literal["h264", "hevc", "prores", "prores_4444", "prores_4444xq", "dnxhr_hqx"] = "h264"
    """Video outputs: ``h264`` or ``hevc`` (NVENC where the GPU has it, else x264/x265), ``prores``
    (422 HQ; 4444 for a 4:4:4 source), ``prores_4444``, ``prores_4444xq`` or ``dnxhr_hqx`` (MOV/MXF)."""
    quality: int | None = None
    """CRF-like quality of H.264/HEVC, 0-51, lower is better; None: 18.  ProRes and DNxHR ignore it."""
    preset: str | None = None
    """The x264/x265 preset (``ultrafast`` ... ``placebo``; NVENC maps it to p1-p7); None: ``medium``."""
    hardware: bool = True
    """Use NVENC where the GPU has it (A100, H100 and H200 have none); false: always software."""
    if_exists: Literal["fail", "skip", "overwrite"] = "fail"
    """When a file the job writes already exists (an output, a pass, a review movie or contact sheet, the
    review playlist, the cut written back): ``fail`` the job before anything renders, ``skip`` it (a
    shot whose output exists is not rendered; other files are left as they are, with a warning), or
    ``overwrite`` it (replaced in one step when the new one is complete).  A resumed job rewrites what
    its earlier run wrote.  Whatever it says, nothing the job writes may replace a file it reads."""
    work_url: str | None = None
    """Where segments, the manifest and the job summary go; None: ``.recast-work/<job_id>/`` beside
    the first output."""
    keep_segments: bool = False
    """Keep a video shot's rendered segments in the work area once its output is published.  Not needed
    for notes: with false (the default) they are removed, and a later run of the job (notes acted on
    with ``fixes:``) cuts the chunks no change touches back out of the published output by stream copy,
    byte for byte, and renders only the others.  True spares that download and cut, at the cost of a
    second copy of every output in the work area.  Image sequences are written in place and always
    reused; review segments are always kept (they are small)."""
    include_handles: bool = True
    """Deliver the handles (rendered) too; false: video outputs hold only ``frames``, and image
    sequences keep their handle frames as the source's."""
    compression: str | None = None
    """Image sequences: the EXR/TIFF compression of rendered frames (``piz``, ``zip``,
    ``dwaa``...); None: each frame's own."""
    passes: tuple[Literal["matte", "face", "tracks"], ...] = ()
    """Compositing passes written beside each output (see :mod:`pipeline.passes`)."""
    pass_url: str | None = None
    """Where passes go, a template with ``{pass}`` (and ``{shot}``, ``{job_id}``) and no extension;
    None: beside the output, named ``<output>_<pass>``."""
    colour: OutputColour | None = None
    """Video outputs: colour tags to write instead of each source's (see :mod:`pipeline.colour`)."""
    timeline_url: str | None = None
    """With ``edit:``, the cut written back once every shot is published: the same tracks, clips,
    gaps, transitions and markers, each rendered clip pointing at its delivered output
    (``.otio``, ``.edl`` or ``.xml``, by extension); offline and skipped clips keep their media."""
    review: ReviewSpec | None = None
    """A review movie per shot, with burn-ins, and its contact sheet (see :mod:`pipeline.review`)."""
    review_timeline_url: str | None = None
    """With ``review``, an OpenTimelineIO playlist (``.otio``) of every shot's review movie in shot
    order, written once the shots are published."""

    @field_validator("quality")
    @classmethod
    def _quality(cls, value: int | None) -> int | None:
        return None if value is None else check_quality(value)  # here, not when the first segment is encoded

    @field_validator("preset")
    @classmethod
    def _preset(cls, value: str | None) -> str | None:
        return None if value is None else check_preset(value)

    @field_validator("pass_url")
    @classmethod
    def _pass_template(cls, url: str | None) -> str | None:
        if url is None:
            return None
        if "{pass}" not in url:
            raise ValueError("needs a {pass} placeholder")
        unknown = set(re.findall(r"{([^}]*)}", url)) - {"shot", "job_id", "pass"}
        if unknown:
            raise ValueError(
                f"unknown placeholder(s) {sorted(unknown)}; use {{shot}}, {{job_id}} and {{pass}}"
            )
        return url

    @field_validator("timeline_url")
    @classmethod
    def _timeline(cls, url: str | None) -> str | None:
        if url is None:
            return None
        if extension_of(url) not in TIMELINE_WRITERS:
            raise ValueError(f"must end with one of {', '.join(TIMELINE_WRITERS)}, got {url!r}")
        if "{" in url:
            raise ValueError(f"{url!r}: the timeline's URL is written as given (no placeholders)")
        return url

    @field_validator("review_timeline_url")
    @classmethod
    def _review_timeline(cls, url: str | None) -> str | None:
        if url is not None and (extension_of(url) != ".otio" or "{" in url):
            raise ValueError(f"must be an .otio file, written as given (no placeholders), got {url!r}")
        return url

    @field_validator("url")
    @classmethod
    def _container(cls, url: str) -> str:
        # {ext}: the source's own extension, so one template delivers .exr and .dpx plates alike.
        check_media_url(url.replace(".{ext}", ".exr") if url.endswith(".{ext}") else url)
        unknown = set(re.findall(r"{([^}]*)}", url)) - {"shot", "job_id", "ext"}
        if unknown:
            raise ValueError(
                f"unknown placeholder(s) {sorted(unknown)}; use {{shot}}, {{job_id}} and {{ext}}"
            )
        return url

    @model_validator(mode="after")
    def _codec_in_its_container(self) -> OutputSpec:
        problem = self.container_problem(self.url)
        if problem:
            raise ValueError(problem)
        if self.review_timeline_url is not None and self.review is None:
            raise FieldError("output.review_timeline_url", "needs output.review (the movies it lists)")
        problem = self.colour.range_problem(self.codec) if self.colour is not None else None
        if problem:
            raise FieldError("output.colour.range", problem)
        return self

    def container_problem(self, url: str) -> str | None:
        """Why ``codec`` cannot be written to ``url``'s container (None: it can, or ``url`` is a sequence)."""
        if is_sequence_url(url) or "{ext}" in url:
            return None  # image sequences are written in their own format; {ext} is checked per shot
        url = url.lower()
        if self.codec.startswith("prores") and not url.endswith(".mov"):
            return f"codec {self.codec} needs a .mov output url"
        if self.codec == "dnxhr_hqx" and not url.endswith((".mov", ".mxf")):
            return "codec dnxhr_hqx needs a .mov or .mxf output url"
        if url.endswith(".mxf") and self.codec != "dnxhr_hqx":
            return f"codec {self.codec} cannot be written to .mxf; only dnxhr_hqx can"
        return None

    def encode_settings(self) -> EncodeSettings:
        """The encoder settings for every segment of the job."""
        fields: dict[str, Any] = {"codec": self.codec, "hardware": self.hardware, "colour": self.colour}
        if self.quality is not None:
            fields["quality"] = self.quality
        if self.preset is not None:
            fields["preset"] = self.preset
        return EncodeSettings(**fields)
