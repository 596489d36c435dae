"""The job spec: one YAML file describing every shot, identity and setting of a render job.

Validated once, up front, into frozen models; any problem is a ``SpecError``
whose field is the dotted path of the offending value (``shots[1].url``,
``output.codec``...), and unknown keys are rejected.  Example::

    job_id: ep101-faces
    shots:
      - {name: sc01, url: s3://plates/ep101/sc01.mov}
      - {pattern: "s3://plates/ep101/sc02_*.mov"}      # expanded with the store's glob
      - {url: "s3://plates/ep101/sc03/sc03_plate.####.exr", frames: 1009-1092, handles: 8}
    identities:
      hero: {images: [s3://refs/hero_a.jpg, s3://refs/hero_b.jpg]}
    selection: {mode: all, source: hero}
    faces: {enhance: false}
    tracking: {max_gap_frames: 5}
    models: {pack: "builtin:default"}                    # or s3://packs/studio-v3/
    colour: {config: "ocio://default", plate: ACEScg}  # image-sequence plates (per shot too)
    output:
      url: "s3://deliveries/ep101/{shot}.mov"            # sequences: "{shot}/{shot}_recast.####.exr"
      codec: prores
      colour: {primaries: bt709, transfer: bt709, matrix: bt709, range: tv}  # default: the source's
      if_exists: fail                                   # fail | skip | overwrite
    chunking: {seconds: 20}
    resources: {gpus_per_actor: 1, max_actors: 8}

Relative local paths are resolved against the folder of the spec file.  On a
cluster (``ray job submit --working-dir``) the job runs in a copy of that
folder: give outputs as absolute paths or object-store URLs there.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from cluster.shot_spec import NAME_RE, ColourSpec, ShotSpec, check_media_url, overridden
from pipeline import storage
from pipeline.colour import OutputColour
from pipeline.configbase import Frozen
from pipeline.encode import EncodeSettings
from pipeline.errors import SpecError
from pipeline.faces.config import FaceConfig, IdentitySource, SelectionConfig
from pipeline.models.runtime.settings import ExecutionConfig
from pipeline.plates.sequence import is_sequence_url
from pipeline.provenance.config import SignerConfig, WatermarkConfig
from pipeline.qc.config import QcConfig
from pipeline.tracking import TrackingConfig


class ModelsSpec(Frozen):
    """Model pack URL (``builtin:default`` = the embedded default pack) and how to run it."""

    pack: str = "builtin:default"
    execution: ExecutionConfig = ExecutionConfig()
    cache_dir: str | None = None


class OutputSpec(Frozen):
    """Where and how each shot is written.

    ``url`` is a template with ``{shot}`` (and optionally ``{job_id}``); its
    extension picks the container.  ``work_url`` holds segments and the job
    summary; by default ``.recast-work/<job_id>/`` beside the first output.
    """

    url: str
    codec: Literal["h264", "hevc", "prores", "prores_4444", "prores_4444xq", "dnxhr_hqx"] = "h264"
    quality: int | None = None
    preset: str | None = None
    hardware: bool = True
    if_exists: Literal["fail", "skip", "overwrite"] = "fail"
    work_url: str | None = None
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
        problem = self.colour.range_problem(self.codec) if self.colour is not None else None
        if problem:
            raise _FieldError("output.colour.range", problem)
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


class ChunkingSpec(Frozen):
    """Chunk length in seconds.  ``min_seconds`` is an advanced knob (tests use tiny chunks)."""

    seconds: float = 20.0
    min_seconds: float = Field(default=10.0, ge=1.0)
    max_seconds: float = 30.0
    snap_to_keyframes: bool = True

    @model_validator(mode="after")
    def _in_range(self) -> ChunkingSpec:
        if not self.min_seconds <= self.seconds <= self.max_seconds:
            raise ValueError(
                f"seconds must be between {self.min_seconds:g} and {self.max_seconds:g}, got {self.seconds:g}"
            )
        return self


class ResourcesSpec(Frozen):
    """Actor sizing.  ``gpus_per_actor`` None: 1 when the cluster has GPUs, else CPU actors."""

    gpus_per_actor: float | None = Field(default=None, ge=0.0)
    cpus_per_actor: float = Field(default=1.0, gt=0.0)
    max_actors: int | None = Field(default=None, ge=1)
    max_inflight_per_actor: int = Field(default=2, ge=1)
    custom: dict[str, float] = Field(default_factory=dict)
    """Advanced: custom Ray resources each actor asks for, e.g. ``{accelerator_type_L4: 0.01}``."""

    @field_validator("custom")
    @classmethod
    def _positive(cls, custom: dict[str, float]) -> dict[str, float]:
        bad = sorted(name for name, amount in custom.items() if amount <= 0)
        if bad:
            raise ValueError(f"amounts must be > 0, got {bad}")
        return custom


class WatermarkSpec(WatermarkConfig):
    """Invisible watermark of the job id in the replaced faces (see ``pipeline.provenance.watermark``)."""

    enabled: bool = False
    step: float = Field(default=32.0, gt=0.0)


class ProvenanceSpec(Frozen):
    """Consent policy, Content Credentials, watermark, review label and audit log of a job.

    ``policy_url`` points at the studio policy (nothing here can relax it) and
    needs ``project``; ``signer`` signs every output (MP4/MOV only); ``audit``
    appends one record per job run under ``<output prefix>/audit/``.
    """

    policy_url: str | None = None
    project: str | None = None
    signer: SignerConfig | None = None
    watermark: WatermarkSpec = WatermarkSpec()
    review_label: bool = False
    audit: bool = True

    @model_validator(mode="after")
    def _project_with_policy(self) -> ProvenanceSpec:
        if self.policy_url is not None and not self.project:
            raise _FieldError("provenance.project", "required when provenance.policy_url is set")
        return self


class JobSpec(Frozen):
    """A whole render job, as validated from YAML."""

    job_id: str
    shots: tuple[ShotSpec, ...] = Field(min_length=1)
    identities: dict[str, IdentitySource] = Field(min_length=1)
    selection: SelectionConfig
    """Optional in YAML when there is one identity: every face becomes it (mode all)."""
    faces: FaceConfig = FaceConfig()
    tracking: TrackingConfig = TrackingConfig()
    models: ModelsSpec = ModelsSpec()
    output: OutputSpec
    chunking: ChunkingSpec = ChunkingSpec()
    resources: ResourcesSpec = ResourcesSpec()
    provenance: ProvenanceSpec | None = None
    """None (no block): no policy, signing, watermark or audit."""
    colour: ColourSpec = ColourSpec()
    """Colour management of image-sequence plates (each shot may override it)."""
    qc: QcConfig = QcConfig()
    """What is flagged for review and which flags fail a shot."""

    @model_validator(mode="before")
    @classmethod
    def _implicit_source(cls, data: Any) -> Any:
        # With a single identity, "replace every face with it" needs no selection block.
        if (
            isinstance(data, Mapping)
            and isinstance(data.get("identities"), Mapping)
            and len(data["identities"]) == 1
        ):
            only = next(iter(data["identities"]))
            selection = data.get("selection", {})
            if (
                isinstance(selection, Mapping)
                and selection.get("mode", "all") in ("all", "largest")
                and "source" not in selection
            ):
                data = {**data, "selection": {**selection, "source": only}}
        return data

    @field_validator("job_id")
    @classmethod
    def _job_id(cls, value: str) -> str:
        if not NAME_RE.match(value):
            raise ValueError(f"{value!r} must be letters, digits, '.', '_' or '-'")
        return value

    @model_validator(mode="after")
    def _selection_names_identities(self) -> JobSpec:
        _check_selection(self.selection, set(self.identities), "selection")
        for i, shot in enumerate(self.shots):
            if shot.selection is not None:
                _check_selection(
                    overridden(self.selection, shot.selection), set(self.identities), f"shots[{i}].selection"
                )
        return self


def _check_selection(selection: SelectionConfig, known: set[str], field: str) -> None:
    if selection.mode in ("all", "largest"):
        if selection.source not in known:
            raise _FieldError(f"{field}.source", f"{selection.source!r} is not in identities")
        return
    if not selection.references:
        raise _FieldError(f"{field}.references", "mode reference needs at least one mapping")
    for ref, src in selection.references.items():
        for name in (ref, src):
            if name not in known:
                raise _FieldError(f"{field}.references.{ref}", f"{name!r} is not in identities")


class _FieldError(ValueError):
    """A cross-field problem that knows its own dotted field path."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field = field
        self.reason = reason


def dotted(loc: tuple[int | str, ...]) -> str:
    """``('shots', 1, 'url')`` -> ``shots[1].url``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "spec"


def parse_spec(data: Any, *, base_dir: str | None = None) -> JobSpec:
    """Validate a mapping (parsed YAML) into a JobSpec; relative paths resolve against ``base_dir``."""
    if not isinstance(data, Mapping):
        raise SpecError("spec", f"must be a mapping of fields, got {type(data).__name__}")
    if base_dir is not None:
        from cluster.spec_paths import resolve_paths

        data = resolve_paths(dict(data), base_dir)
    try:
        return JobSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        ctx_error = (err.get("ctx") or {}).get("error")
        if isinstance(ctx_error, _FieldError):
            raise SpecError(ctx_error.field, ctx_error.reason) from None
        loc = tuple(p for p in err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown key"
        elif err["type"] == "missing":
            message = "required"
        more = len(exc.errors()) - 1
        if more:
            message += f" (and {more} more problem{'s' if more > 1 else ''})"
        raise SpecError(dotted(loc), message) from None


def load_spec(path_or_url: str) -> JobSpec:
    """Read and validate a YAML job spec from a local path or URL."""
    raw = storage.read_bytes(path_or_url)
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise SpecError("spec", f"{path_or_url} is not valid YAML: {exc}") from None
    base_dir = (
        os.path.dirname(os.path.abspath(storage.local_path(path_or_url)))
        if storage.is_local(path_or_url)
        else None
    )
    return parse_spec(data, base_dir=base_dir)
