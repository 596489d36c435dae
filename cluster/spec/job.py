"""The job spec: one YAML file describing every shot, identity and setting of a render job.

Validated once, up front, into frozen models; any problem is a ``SpecError`` whose field is the
dotted path of the offending value (``shots[1].url``...); unknown keys are rejected.  Example::

    job_id: ep101-faces
    shots:
      - {name: sc01, url: s3://plates/ep101/sc01.mov}
      - {pattern: "s3://plates/ep101/sc02_*.mov"}      # expanded with the store's glob
      - {url: "s3://plates/ep101/sc03/sc03_plate.####.exr", frames: 1009-1092, handles: 8}
    edit: {url: s3://editorial/ep101/ep101_v3.otio, handles: 8}   # and every clip of a cut (cluster.edit)
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
    lease: {expiry_seconds: 60}                          # one driver per work area
    storage: {retries: 8, mode: standard, read_timeout_s: 20, total_seconds: 600}  # object-store retries

Relative local paths are resolved against the spec file's folder.  On a cluster (``ray job
submit --working-dir``) the job runs in a copy of it: give outputs as absolute paths or URLs.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from cluster.lease.acquire import LeaseConfig
from cluster.spec.edit import EditSpec
from cluster.spec.fixes import MAX_FIXES_PER_JOB, MAX_FIXES_PER_SHOT, contradicting_fixes, fix_action
from cluster.spec.output import FieldError, OutputSpec
from cluster.spec.shot import NAME_RE, ColourSpec, ShotSpec, overridden
from pipeline.configbase import Frozen
from pipeline.errors import InputRefused, SpecError
from pipeline.faces.config import FaceConfig, IdentitySource, SelectionConfig
from pipeline.limits import CHUNK_MAX_SECONDS, SPEC_MAX_BYTES, InputLimits, min_chunk_seconds
from pipeline.models.runtime.settings import ExecutionConfig, recast_cache_root
from pipeline.provenance.config import SignerConfig, WatermarkConfig
from pipeline.qc.config import QcConfig
from pipeline.store import storage, yamlload
from pipeline.store.redact import CREDENTIALS_IN_URL, find_url_credentials, redact_text
from pipeline.store.retries import StorageConfig
from pipeline.tracking.tracker import TrackingConfig
from pipeline.video.decoders import DecodeConfig


class ModelsSpec(Frozen):
    """Model pack URL (``builtin:default`` = the embedded default pack) and how to run it."""

    pack: str = "builtin:default"
    """The model pack: ``builtin:default`` (the embedded default pack) or the URL of a pack folder
    whose ``manifest.json`` names each model file with its sha256 (local, ``s3://``, ``gs://``)."""
    execution: ExecutionConfig = ExecutionConfig()
    """How the pack's models run (backend, providers, device); the same block the CLI and actors use."""
    cache_dir: str | None = None
    """A local folder under the cache root (``$RECAST_CACHE_DIR`` or ``~/.cache/recast``)."""

    @field_validator("cache_dir")
    @classmethod
    def _under_cache_root(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not storage.is_local(value):
            raise ValueError(f"must be a local folder, got {value!r}")
        root = os.path.realpath(recast_cache_root())
        real = os.path.realpath(os.path.expanduser(storage.local_path(value)))
        if os.path.commonpath([root, real]) != root:
            raise ValueError(
                f"{value!r} is outside the cache root {root} (set RECAST_CACHE_DIR on the cluster to move it)"
            )
        return value


class ChunkingSpec(Frozen):
    """Chunk length in seconds, 10-30.  ``min_seconds``/``max_seconds`` may narrow that range, never
    widen it; a cluster (or a test suite, for tiny chunks) lowers the floor with ``RECAST_MIN_CHUNK_SECONDS``."""

    seconds: float = 20.0
    """Target chunk length in seconds; each actor call renders one chunk."""
    min_seconds: float = Field(default=10.0, ge=1.0)
    """Least value ``seconds`` may take (a shot shorter than this is one chunk)."""
    max_seconds: float = Field(default=CHUNK_MAX_SECONDS, le=CHUNK_MAX_SECONDS)
    """Greatest value ``seconds`` may take (30 at most: a lost chunk costs at most this much work again)."""
    snap_to_keyframes: bool = True
    """Cut chunks on the source's keyframes, so each chunk decodes without reading the one before."""

    @field_validator("min_seconds")
    @classmethod
    def _floor(cls, value: float) -> float:
        floor = min_chunk_seconds()
        if value < floor:
            raise ValueError(f"must be at least {floor:g} s (the cluster's floor), got {value:g}")
        return value

    @model_validator(mode="after")
    def _in_range(self) -> ChunkingSpec:
        if not self.min_seconds <= self.seconds <= self.max_seconds:
            raise ValueError(
                f"seconds must be between {self.min_seconds:g} and {self.max_seconds:g}, got {self.seconds:g}"
            )
        return self


class ResumeSpec(Frozen):
    """How a resubmitted job recognises an unchanged source (:mod:`cluster.state.fingerprints`).

    ``sampled``: a local file's size, mtime and a hash of at most 16 MiB of it (first, last and
    every Nth MiB; each frame's first and last 64 KiB for a local image sequence); object stores by
    ETag/VersionId.  ``full``: every byte of every source is hashed (slow on large plates)."""

    fingerprint: Literal["sampled", "full"] = "sampled"
    """``sampled`` (fast, the default) or ``full`` (every byte hashed): how a source is fingerprinted."""


MAX_CPUS_PER_ACTOR = 1024.0
"""``resources.cpus_per_actor`` at most (no node has more; Ray could never place the actor)."""
MAX_GPUS_PER_ACTOR = 64.0
"""``resources.gpus_per_actor`` at most."""
MAX_ACTORS = 100_000
"""``resources.max_actors`` at most."""
MAX_INFLIGHT_PER_ACTOR = 64
"""``resources.max_inflight_per_actor`` at most."""

# ``resources.dispatch_order``: the queue policy of :mod:`cluster.schedule.work_queue`.
DispatchOrder = Literal["render_first", "analysis_first"]


class ResourcesSpec(Frozen):
    """Actor sizing.  ``gpus_per_actor`` None: 1 when the cluster has GPUs, else CPU actors.  Every
    amount is a finite number (``.inf`` and ``.nan`` are refused)."""

    gpus_per_actor: float | None = Field(default=None, ge=0.0, le=MAX_GPUS_PER_ACTOR, allow_inf_nan=False)
    """GPUs (or a share of one) each render actor asks Ray for; None: 1 on a GPU cluster, else 0."""
    cpus_per_actor: float = Field(default=1.0, gt=0.0, le=MAX_CPUS_PER_ACTOR, allow_inf_nan=False)
    """CPUs each render actor asks Ray for (and the threads its model sessions use on CPU)."""
    max_actors: int | None = Field(default=None, ge=1, le=MAX_ACTORS)
    """Render actors to run (at most one per chunk); those the cluster cannot place yet are the autoscaler's
    demand.  None: as many as the cluster holds now."""
    max_inflight_per_actor: int = Field(default=2, ge=1, le=MAX_INFLIGHT_PER_ACTOR)
    """Calls queued on one actor at a time (one running, the rest waiting), so its next
    chunk is ready when the current one ends."""
    decode_cache_mb: int = Field(default=2048, ge=0, le=1024 * 1024, strict=True)
    """MiB of decoded pictures each actor keeps from its analyses for its renders (one decode per frame);
    2048 holds a 20 s 1080p 8-bit chunk at 24 fps (480 x 3 MB); 0: every render decodes again."""
    dispatch_order: DispatchOrder = "render_first"
    """``render_first``: a shot tracked while later shots are analysed gets its renders before their
    analyses (analyses go to idle actors only); ``analysis_first``: analyses also queue on busy
    actors, ahead of renders that become ready later (see :mod:`cluster.schedule.work_queue`)."""
    planner_actors: int = Field(default=2, ge=1, le=64)
    """Actors that track and plan the shots beside the driver (a shot's chunks are tracked in order on
    one of them), so the driver itself only schedules and records.  They ask Ray for no CPU and run on
    the driver's node; more of them for many crowd shots on a large cluster."""
    custom: dict[str, float] = Field(default_factory=dict)
    """Advanced: custom Ray resources each actor asks for, e.g. ``{accelerator_type_L4: 0.01}``
    (finite amounts above 0)."""

    @field_validator("custom")
    @classmethod
    def _positive(cls, custom: dict[str, float]) -> dict[str, float]:
        bad = sorted(name for name, amount in custom.items() if not (math.isfinite(amount) and amount > 0))
        if bad:
            raise ValueError(f"amounts must be finite numbers above 0, not those of {bad}")
        return custom


class WatermarkSpec(WatermarkConfig):
    """Invisible watermark of the job id in the replaced faces (see ``pipeline.provenance.watermark``)."""

    enabled: bool = True
    """Embed the job id as an invisible watermark in every replaced face.  On by default; ``false``
    is refused unless the cluster's studio policy (``RECAST_POLICY_URL``) sets
    ``allow_unmarked_outputs: true``."""
    step: float = Field(default=32.0, gt=0.0)


class ProvenanceSpec(Frozen):
    """Consent policy, Content Credentials, watermark, review label and audit log of a job.

    ``policy_url`` points at the studio policy (nothing here can relax it) and
    needs ``project``; on a cluster with ``RECAST_POLICY_URL`` it must be that
    policy or absent, and ``audit`` cannot be false (see :mod:`cluster.checks.trust`).
    Every output is marked as AI-made unless the cluster's studio policy allows otherwise:
    the watermark in the replaced faces and Content Credentials (C2PA in MP4/MOV, a signed
    sidecar manifest beside MKV files and image sequences), signed with ``signer``, else the
    policy's ``signer``, else the installation's own key
    (:mod:`pipeline.provenance.install_key`), with the time-stamp authority of the policy or
    the cluster, never one from here; ``audit`` appends a record when the job starts and one
    when it ends under ``<output prefix>/audit/``.
    """

    policy_url: str | None = None
    """The studio's consent and provenance policy (YAML), which a spec cannot relax."""
    project: str | None = None
    """The project this job belongs to in the policy (required with ``policy_url``)."""
    signer: SignerConfig | None = None
    """The studio's key and certificate chain for the Content Credentials (None: the cluster
    policy's ``signer``, else the installation's own, untrusted key)."""
    content_credentials: bool = True
    """Content Credentials on every output, stating that faces were replaced by AI.  ``false`` is
    refused unless the cluster's studio policy sets ``allow_unmarked_outputs: true``."""
    watermark: WatermarkSpec = WatermarkSpec()
    """The invisible watermark of the job id in the replaced faces."""
    review_label: bool = False
    """Burn a visible review label into the top-left corner of every frame (review copies only)."""
    audit: bool = True
    """Append a record under ``<output prefix>/audit/`` when the job starts and when it ends."""

    @model_validator(mode="after")
    def _project_with_policy(self) -> ProvenanceSpec:
        if self.policy_url is not None and not self.project:
            raise FieldError("provenance.project", "required when provenance.policy_url is set")
        if self.signer is not None and self.signer.timestamp_url is not None:
            raise FieldError(
                "provenance.signer.timestamp_url",
                "a job spec cannot choose the time-stamp authority: set timestamp_url in the studio "
                "policy or RECAST_TIMESTAMP_URL on the cluster",
            )
        return self


class JobSpec(Frozen):
    """A whole render job, as validated from YAML."""

    job_id: str
    """The job's name: letters, digits, ``.``, ``_`` or ``-``.  It names the work area and the
    resume state, so resubmitting the same ``job_id`` resumes the job instead of starting over."""
    shots: tuple[ShotSpec, ...] = ()
    """The shots to render, in order: each a ``url`` or a glob ``pattern``, with its own settings
    (with ``edit:``, also name-only entries that override an edit clip's settings); at least one
    unless ``edit`` names a timeline."""
    edit: EditSpec | None = None
    """An editorial timeline whose clips become shots (see :mod:`cluster.edit`)."""
    identities: dict[str, IdentitySource] = Field(min_length=1)
    """Source identities by name: their pictures (and optional per-identity adapter)."""
    selection: SelectionConfig
    """Optional in YAML when there is one identity: every face becomes it (mode all)."""
    faces: FaceConfig = FaceConfig()
    """How selected faces are rendered (each shot may override it)."""
    tracking: TrackingConfig = TrackingConfig()
    """How faces are tracked through a shot and how their landmarks are smoothed."""
    models: ModelsSpec = ModelsSpec()
    """The model pack and how its models run."""
    output: OutputSpec
    """Where and how each shot is written."""
    chunking: ChunkingSpec = Field(default_factory=ChunkingSpec)
    """Built per spec, not at import: its floor comes from the cluster's ``RECAST_MIN_CHUNK_SECONDS``."""
    resources: ResourcesSpec = ResourcesSpec()
    """What each render actor asks Ray for, and how many actors run at once."""
    resume: ResumeSpec = ResumeSpec()
    """How a resubmitted job recognises an unchanged source."""
    provenance: ProvenanceSpec | None = None
    """None (no block): no policy and no audit log; outputs are marked all the same (the watermark
    and Content Credentials signed with the installation's key)."""
    colour: ColourSpec = ColourSpec()
    """Colour management of image-sequence plates (each shot may override it)."""
    qc: QcConfig = QcConfig()
    """What is flagged for review and which flags fail a shot."""
    limits: InputLimits = InputLimits()
    """Largest source frames, identity pictures and shot count (:mod:`pipeline.limits`)."""
    lease: LeaseConfig = LeaseConfig()
    """The work area's lease: one driver at a time (see :mod:`cluster.lease.acquire`)."""
    decode: DecodeConfig = DecodeConfig()
    """Which decoder reads video sources: ``backend`` auto (NVDEC where available), pyav or nvdec."""
    storage: StorageConfig = StorageConfig()
    """How object-store requests are retried, timed out and bounded (the driver's and every actor's;
    :mod:`pipeline.store.retries`); local paths ignore it."""

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
    def _shots_or_edit(self) -> JobSpec:
        if not self.shots and self.edit is None:
            raise FieldError("shots", "required: at least one shot, or an edit: timeline")
        for i, shot in enumerate(self.shots):
            if shot.is_override and self.edit is None:
                raise FieldError(f"shots[{i}]", "give exactly one of 'url' or 'pattern'")
            if shot.is_override and shot.name is None:
                raise FieldError(
                    f"shots[{i}].name", "required: an entry without 'url' or 'pattern' names an edit clip"
                )
        if self.output.timeline_url is not None and self.edit is None:
            raise FieldError("output.timeline_url", "needs an edit: block, the timeline it writes back")
        return self

    @model_validator(mode="after")
    def _selection_names_identities(self) -> JobSpec:
        _check_selection(self.selection, set(self.identities), "selection")
        for i, shot in enumerate(self.shots):
            if shot.selection is not None:
                _check_selection(
                    overridden(self.selection, shot.selection), set(self.identities), f"shots[{i}].selection"
                )
            for j, fix in enumerate(shot.fixes):
                name = getattr(fix, "identity", None)
                if name is not None and name not in self.identities:
                    raise FieldError(f"shots[{i}].fixes[{j}]", f"identity {name!r} is not in identities")
        return self

    @property
    def marking(self) -> ProvenanceSpec:
        """The job's provenance settings as they take effect: ``provenance``, or its defaults (every
        output marked: the watermark on, Content Credentials with the installation's key)."""
        return self.provenance if self.provenance is not None else ProvenanceSpec()

    def unmarked_fields(self) -> tuple[str, ...]:
        """The spec fields that switch AI marking off (each needs the cluster policy's leave)."""
        prov = self.marking
        fields = []
        if not prov.watermark.enabled:
            fields.append("provenance.watermark.enabled")
        if not prov.content_credentials:
            fields.append("provenance.content_credentials")
        return tuple(fields)

    @model_validator(mode="after")
    def _fixes_agree(self) -> JobSpec:
        for i, shot in enumerate(self.shots):
            found = contradicting_fixes(shot.fixes)
            if found is not None:
                j, k = found
                first, second = shot.fixes[j], shot.fixes[k]
                raise FieldError(
                    f"shots[{i}].fixes[{k}]",
                    f"frames {second.frames}, track {getattr(second, 'track', '?')}: {fix_action(second)}, "
                    f"but shots[{i}].fixes[{j}] says {fix_action(first)} on frames {first.frames} of that "
                    "track; two fixes of one track on overlapping frames must agree (narrow their frames "
                    "or remove one)",
                )
        return self


def _check_selection(selection: SelectionConfig, known: set[str], field: str) -> None:
    if selection.mode in ("all", "largest"):
        if selection.source not in known:
            raise FieldError(f"{field}.source", f"{selection.source!r} is not in identities")
        return
    if not selection.references:
        raise FieldError(f"{field}.references", "mode reference needs at least one mapping")
    for ref, src in selection.references.items():
        for name in (ref, src):
            if name not in known:
                raise FieldError(f"{field}.references.{ref}", f"{name!r} is not in identities")


def _check_fix_counts(data: Mapping[str, Any]) -> None:
    """SpecError naming ``shots[i].fixes`` (or ``shots``) past :data:`MAX_FIXES_PER_SHOT` fixes in a
    shot or :data:`MAX_FIXES_PER_JOB` in the job: counted in the parsed YAML, before any is validated."""
    shots = data.get("shots")
    if not isinstance(shots, list):
        return
    total = 0
    for i, shot in enumerate(shots):
        fixes = shot.get("fixes") if isinstance(shot, Mapping) else None
        if not isinstance(fixes, list):
            continue
        if len(fixes) > MAX_FIXES_PER_SHOT:
            raise SpecError(
                f"shots[{i}].fixes", f"{len(fixes):,} fixes; a shot takes at most {MAX_FIXES_PER_SHOT:,}"
            )
        total += len(fixes)
        if total > MAX_FIXES_PER_JOB:
            raise SpecError(
                "shots", f"more than {MAX_FIXES_PER_JOB:,} fixes in the job (by shots[{i}]); split the job"
            )


_FIX_TAGS = frozenset({"keep_plate", "identity", "box", "faces"})


def _field_loc(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """A pydantic error's location as the spec writes it: without the kind of fix pydantic adds after a
    fix's index (``fixes[1].box.box[70]`` is ``fixes[1].box[70]``) nor the ``[key]`` after a mapping key."""
    out: list[int | str] = []
    for i, part in enumerate(loc):
        after_fix = i >= 2 and loc[i - 2] == "fixes" and isinstance(loc[i - 1], int)
        if (after_fix and part in _FIX_TAGS) or part == "[key]":
            continue
        out.append(part)
    return tuple(out)


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
    """Validate a mapping (parsed YAML) into a JobSpec; every URL field is made canonical first
    (:mod:`cluster.spec.paths`): relative paths resolve against ``base_dir``, else the current folder."""
    if not isinstance(data, Mapping):
        raise SpecError("spec", f"must be a mapping of fields, got {type(data).__name__}")
    if (credentials := find_url_credentials(data)) is not None:
        # Refused before any library sees it: their errors echo pieces of the URL (a bucket
        # name "KEY:p@ss" out of s3://KEY:p@ss@word@bucket) that no pattern can recognise.
        raise SpecError(
            dotted(credentials[0]),
            f"{redact_text(credentials[1])}: {CREDENTIALS_IN_URL}",
        )
    _check_fix_counts(data)
    from cluster.spec.paths import canonical_paths

    data = canonical_paths(dict(data), base_dir)  # every URL in one spelling, before any check reads it
    try:
        return JobSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        ctx_error = (err.get("ctx") or {}).get("error")
        if isinstance(ctx_error, FieldError):
            raise SpecError(ctx_error.field, ctx_error.reason) from None
        loc = _field_loc(tuple(err["loc"]))
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
    """Read and validate a YAML job spec (at most 1 MiB, a regular file) from a local path or URL."""
    from cluster.spec.paths import spec_folder

    return parse_spec(read_yaml(path_or_url), base_dir=spec_folder(path_or_url))


def read_yaml(path_or_url: str, what: str = "job spec", field: str = "spec") -> Any:
    """A YAML document (at most 1 MiB, a regular file) from a local path or URL, parsed; a SpecError
    naming the file (``field``: what an error that is not about one key names)."""
    try:
        raw = storage.read_bytes(path_or_url, max_bytes=SPEC_MAX_BYTES)
    except InputRefused as exc:
        raise SpecError(path_or_url, f"not a usable {what}: {exc.reason}") from None
    try:
        return yamlload.load(raw)
    except yamlload.ImpossibleDateError as exc:
        raise SpecError(dotted(exc.loc), f"{exc} in {path_or_url}") from None
    except yamlload.LoadError as exc:  # line, column, problem: never the line's text (a secret?)
        if exc.loc:  # a value refused (a tag it does not fit, a 5,000-digit integer): its field
            raise SpecError(dotted(exc.loc), f"{exc} in {path_or_url}") from None
        raise SpecError(field, f"{path_or_url} is not valid YAML: {exc}") from None
