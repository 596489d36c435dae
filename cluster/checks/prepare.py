"""Everything a job checks and plans before Ray starts: nothing here imports Ray.

:func:`prepare_job` turns the clips of an ``edit:`` timeline into shots
(:mod:`cluster.edit`), expands the shots, applies the studio policy, loads and
verifies the model pack and adapters, reads the identities' pictures, probes
every shot, applies ``output.if_exists`` and checks that every destination is
writable.  Any problem raises a :class:`~pipeline.errors.RecastError` naming the
field or file before any actor starts and before anything is written.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cluster.checks.destinations import SpecFiles, check_destinations, pass_urls_of, review_urls_of
from cluster.checks.provenance import audit_url, check_provenance
from cluster.checks.trust import Authorisation, check_patterns, input_guard, pack_manifest_of
from cluster.edit import EditPlan, check_timeline_output, publish_bundled, with_edit_shots
from cluster.spec.fixes import check_fix_frames
from cluster.spec.job import JobSpec
from cluster.spec.review import IfExistsRule
from cluster.spec.shot_refs import ShotRef, ShotSettings, expand_shots, settings_of, work_url_for
from cluster.spec.windows import ShotWindow, render_chunks, shot_window
from cluster.state.fingerprints import input_fingerprint, output_exists
from cluster.state.keys import AnalysisKey, Fingerprint, JobKeys, ShotKey, identities_digest
from cluster.state.manifest import JobManifest
from cluster.state.manifest_sign import manifest_key
from pipeline.errors import RecastError, SpecError
from pipeline.limits import InputLimits
from pipeline.plates.sequence import is_sequence_url, parse_sequence_url
from pipeline.store import storage
from pipeline.video.chunking import Chunk, ChunkPlan, plan_chunks
from pipeline.video.decoders import check_decode_spec
from pipeline.video.probe import VideoInfo, probe

if TYPE_CHECKING:
    from pipeline.models.pack import ManifestFile

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProbedShot:
    """A shot's probe, settings, frame window and chunk plan (the analysed frames)."""

    ref: ShotRef
    info: VideoInfo
    settings: ShotSettings
    window: ShotWindow
    plan: ChunkPlan


@dataclass(frozen=True)
class PlannedShot:
    """A shot to render: its source, probe, chunk plan and cache keys.

    ``plan`` covers the analysed frames; ``renders`` are its chunks cut to the delivered ones.
    """

    ref: ShotRef
    info: VideoInfo
    plan: ChunkPlan
    fingerprint: Fingerprint
    spec_key: ShotKey
    analysis_keys: tuple[AnalysisKey, ...]
    settings: ShotSettings
    window: ShotWindow
    renders: tuple[Chunk, ...]
    pass_urls: dict[str, str] = field(default_factory=dict)
    """Compositing pass -> where it is written (``output.passes``)."""

    @property
    def is_sequence(self) -> bool:
        return self.info.sequence is not None


@dataclass(frozen=True)
class ReusedShot:
    """A shot whose output an earlier run of this job published for the same inputs."""

    ref: ShotRef
    info: VideoInfo
    plan: ChunkPlan
    record: dict[str, Any]
    shot: PlannedShot
    """The shot as it would be planned (its window, passes and settings: its review media are made
    again from its records when they are missing, :mod:`cluster.schedule.reviews`)."""


@dataclass(frozen=True)
class PreparedJob:
    """A job checked and planned without Ray: what to render, what to skip, what an earlier run finished."""

    spec: JobSpec
    work_url: str
    manifest: JobManifest
    planned: list[PlannedShot]
    """Longest work first (frames x pixels)."""
    skipped: list[ShotRef]
    reused: list[ReusedShot]
    keys: JobKeys
    shot_keys: dict[str, ShotKey]
    """Shot name -> its key, for every probed shot (planned and reused), in probe order."""
    resumed: bool
    """A manifest of an earlier run was found (and is used)."""
    consent_refs: dict[str, str]
    """Identity -> consent reference from the studio policy (empty without ``provenance``)."""
    auth: Authorisation = field(default_factory=Authorisation)
    """What the studio policy allowed (:func:`cluster.checks.trust.authorise`)."""
    edit: EditPlan | None = None
    """What the edit's clips became (``edit:``), and where the cut is written back."""
    earlier_fixes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Shot -> the fixes the last run rendered with (:func:`cluster.spec.fixes.fix_records`), to say
    which chunks a changed fix renders again."""

    @property
    def pack_hash(self) -> str:
        return self.keys.pack_hash

    @property
    def later_writes(self) -> IfExistsRule:
        """``output.if_exists`` for the review media, the review playlist and the cut written back."""
        return IfExistsRule(if_exists=self.spec.output.if_exists, resumed=self.resumed)

    @property
    def chunk_count(self) -> int:
        return sum(len(p.plan.chunks) for p in self.planned)


def prepare_job(
    spec: JobSpec,
    *,
    resume: bool | None = None,
    claim: Callable[[str], None] | None = None,
    read_from: SpecFiles | None = None,
) -> PreparedJob:
    """Check everything that can be checked without Ray, then plan the job.

    ``resume``: None = reuse what the job's manifest records, if any; True =
    require a manifest (``--resume``); False = ignore it and start afresh.
    ``claim(work_url)`` is called once every check has passed, before anything is
    removed or written (the driver takes the work area's lease there).
    ``read_from``: the files the spec was read from (its spec file, ``--fixes`` files),
    which no destination may replace.
    """
    from pipeline.models.pack import load_pack

    check_patterns(spec)  # a pattern's folder is authorised before it is listed
    # The cut's clips become shots first; the timeline and each media are authorised before they are read.
    spec, edit = with_edit_shots(spec, allowed=input_guard(spec))
    shots = expand_shots(spec)
    work_url = work_url_for(spec, shots)
    # The studio policy first: a refused identity or path must not cause a single read or write.
    auth = check_provenance(spec, shots, work_url)
    # One read of the pack's manifest for every check and the load (the policy's, when it read it).
    pack_manifest = auth.pack_manifest or pack_manifest_of(spec.models.pack)
    # Collisions, inputs replaced (the model files too), the pack's folder: whatever if_exists says.
    check_destinations(spec, shots, work_url, read_from=read_from, pack_manifest=pack_manifest)
    manifest = JobManifest(work_url, manifest_key())
    resumed = False
    if resume is not False:
        resumed = manifest.exists()
        if resumed:  # a work area a newer Recast wrote is refused, an older one's read as this version
            manifest.check_version()
        if resume and not resumed:
            raise SpecError(
                "--resume", f"no manifest of job {spec.job_id} at {manifest.root}: nothing to resume"
            )
    if edit is not None:
        check_edit_output(spec, edit, shots, resumed=resumed)
    pack_hash = load_pack(spec.models.pack, cache_dir=spec.models.cache_dir, manifest=pack_manifest).hash
    verify_identity_adapters(spec, pack_manifest)
    check_identity_pictures(spec)
    keys = JobKeys(spec, pack_hash, identities_digest(spec))
    skipped = [s for s in shots if spec.output.if_exists == "skip" and output_exists(s.output_url)]
    candidates = [s for s in shots if s not in skipped]
    planned: list[PlannedShot] = []
    reused: list[ReusedShot] = []
    shot_keys: dict[str, ShotKey] = {}
    earlier_job = (manifest.read_job() or {}) if resumed else {}
    earlier_keys = earlier_job.get("shots", {})
    if not resumed:
        # What can be refused without a probe is refused first: a refused job writes nothing, not even
        # an .otioz's media into its work area (a resumed job's files are checked against its records
        # once probed, below).
        refuse_existing(spec, candidates)
        check_review_media(spec, candidates)
    if edit is not None and edit.bundled is not None:
        # An .otioz's media, allowed and placed, go to the work area now, to be probed and rendered
        # (create-only and checked by sha256, so safe before the work area's lease).
        publish_bundled(edit.bundled)
    for probed in probe_shots(spec, candidates):
        shot, info, plan = probed.ref, probed.info, probed.plan
        fingerprint = input_fingerprint(shot.url, info, spec.resume.fingerprint)
        planned_one = planned_shot(keys, probed, fingerprint)
        spec_key = shot_keys[shot.name] = planned_one.spec_key
        if output_exists(shot.output_url):
            # Published by an earlier run of this very job, unchanged since, for the same inputs: keep it.
            record = manifest.published_output(shot.name, spec_key, shot.output_url) if resumed else None
            changed = None if record is None else manifest.passes_changed(record)
            if record is not None and changed is None:
                reused.append(ReusedShot(shot, info, plan, record, planned_one))
                continue
            if changed is not None:
                logger.warning(
                    "%s: published by this job, but its pass %s changed since: its chunks are checked and "
                    "those whose frames are gone rendered again",
                    shot.name,
                    changed,
                )
            # An image sequence an earlier run of this very job was writing (same key), or a published
            # shot of this job whose pass frames changed: resumed in place.
            ours = changed is not None or (
                planned_one.is_sequence and earlier_keys.get(shot.name) == spec_key
            )
            if spec.output.if_exists == "fail" and not ours:
                raise _exists(shot.output_url, "", "skip or overwrite")
        elif spec.output.if_exists != "overwrite":
            # The passes are published with the output and, like it, never replaced.
            for url in planned_one.pass_urls.values():
                if output_exists(url):
                    raise _exists(url, f" (shot {shot.name}'s pass)", "overwrite")
        planned.append(planned_one)
    check_decode_spec(spec.decode, spec.resources.gpus_per_actor, [(p.ref.name, p.info) for p in planned])
    # An unwritable destination must fail the job now, not after hours of rendering.
    for parent in sorted({_parent(p.ref.output_url) for p in planned}):
        storage.check_writable(parent)
    storage.check_writable(work_url)
    if spec.output.timeline_url is not None:
        storage.check_writable(_parent(spec.output.timeline_url))
    for parent in sorted({_parent(url) for p in planned for url in review_urls_of(spec, p.ref) or ()}):
        storage.check_writable(parent)
    if spec.output.review_timeline_url is not None:
        storage.check_writable(_parent(spec.output.review_timeline_url))
    if auth.audited:
        storage.check_writable(storage.join(audit_url(spec), "audit"))
    if claim is not None:
        claim(work_url)
    for p in planned:
        for url in (p.ref.output_url, *p.pass_urls.values()):
            remove_interrupted_publish(url)
    planned.sort(key=lambda p: -(p.plan.frame_count * p.info.width * p.info.height))
    return PreparedJob(
        spec=spec,
        work_url=work_url,
        manifest=manifest,
        planned=planned,
        skipped=skipped,
        reused=reused,
        keys=keys,
        shot_keys=shot_keys,
        resumed=resumed,
        consent_refs=auth.consent_refs,
        auth=auth,
        edit=edit,
        earlier_fixes=earlier_fixes_of(earlier_job),
    )


def earlier_fixes_of(job_record: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The fixes of the last run's job record, per shot (none when it had none or is not well-formed)."""
    fixes = job_record.get("fixes", {})
    if not isinstance(fixes, dict):
        return {}
    return {
        shot: [r for r in records if isinstance(r, dict) and {"digest", "frames", "label"} <= set(r)]
        for shot, records in fixes.items()
        if isinstance(records, list)
    }


def check_edit_output(spec: JobSpec, edit: EditPlan, shots: list[ShotRef], *, resumed: bool) -> None:
    """``output.timeline_url``: written once in memory (its adapter can write this cut), and not
    already there unless ``if_exists`` allows it or an earlier run of this job wrote it."""
    url = edit.timeline_url
    if url is None:
        return
    outputs = {s.name: s.output_url for s in shots}
    check_timeline_output(edit, outputs, include_handles=spec.output.include_handles)
    if spec.output.if_exists == "fail" and not resumed and output_exists(url):
        raise SpecError(
            "output.if_exists",
            f"{url} (output.timeline_url) already exists (set if_exists: skip or overwrite)",
        )


def _exists(url: str, what: str, allowed: str) -> SpecError:
    return SpecError("output.if_exists", f"{url}{what} already exists (set if_exists: {allowed})")


def refuse_existing(spec: JobSpec, shots: list[ShotRef]) -> None:
    """A job that did not run before (no manifest): ``if_exists: fail`` refuses an output already there,
    and anything but ``overwrite`` a pass already there, from their URLs alone (before any probe)."""
    for shot in shots:
        if output_exists(shot.output_url):
            if spec.output.if_exists == "fail":
                raise _exists(shot.output_url, "", "skip or overwrite")
        elif spec.output.if_exists != "overwrite":
            for url in pass_urls_of(spec, shot).values():
                if output_exists(url):
                    raise _exists(url, f" (shot {shot.name}'s pass)", "overwrite")


def check_review_media(spec: JobSpec, shots: list[ShotRef]) -> None:
    """A job that did not run before, ``output.if_exists: fail``: the review movie and contact sheet of
    every shot to render and the review playlist must not be there yet (a resumed job rewrites those
    its earlier run wrote); ``skip`` and ``overwrite`` are applied as they are written
    (:class:`cluster.spec.review.IfExistsRule`)."""
    if spec.output.if_exists != "fail" or spec.output.review is None:
        return
    for shot in shots:
        for url, what in zip(review_urls_of(spec, shot) or (), ("review movie", "contact sheet")):
            if output_exists(url):
                raise _exists(url, f" (shot {shot.name}'s {what}, output.review.url)", "skip or overwrite")
    playlist = spec.output.review_timeline_url
    if playlist is not None and output_exists(playlist):
        raise _exists(playlist, " (output.review_timeline_url)", "skip or overwrite")


def probe_shots(spec: JobSpec, shots: list[ShotRef]) -> list[ProbedShot]:
    """Probe and plan every shot up front: a bad input fails the job before any rendering."""
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="probe") as pool:
        infos = list(pool.map(lambda s: probe_shot(s, settings_of(spec, s), spec.limits), shots))
    return [probed_shot(spec, shot, info) for shot, info in zip(shots, infos, strict=True)]


def probed_shot(spec: JobSpec, shot: ShotRef, info: VideoInfo) -> ProbedShot:
    """A probed shot's settings, frame window and chunk plan."""
    settings = settings_of(spec, shot)
    window = shot_window(info, settings, include_handles=spec.output.include_handles)
    check_fix_frames(settings.fixes, info, window.delivered, settings.field)
    return ProbedShot(shot, info, settings, window, plan_shot_chunks(spec, info, window))


def planned_shot(keys: JobKeys, probed: ProbedShot, fingerprint: Fingerprint) -> PlannedShot:
    """A probed shot with its cache keys and the chunks it renders."""
    plan = probed.plan
    return PlannedShot(
        ref=probed.ref,
        info=probed.info,
        plan=plan,
        fingerprint=fingerprint,
        spec_key=keys.shot(probed.ref, fingerprint, plan, probed.settings, probed.window),
        analysis_keys=tuple(keys.analysis(fingerprint, c, probed.settings.faces) for c in plan.chunks),
        settings=probed.settings,
        window=probed.window,
        renders=render_chunks(probed.info, plan, probed.window),
        pass_urls=pass_urls_of(keys.spec, probed.ref),
    )


def probe_shot(shot: ShotRef, settings: ShotSettings, limits: InputLimits | None = None) -> VideoInfo:
    """A video's demux probe, or an image sequence's listing and headers (with its colour settings);
    frames larger than ``limits`` (the spec's ``limits:``) are refused from their headers."""
    if not shot.is_sequence:
        if settings.fps is not None:
            raise SpecError(f"{settings.field}.fps", "applies to image sequences; a video's rate is its own")
        return probe(shot.url, limits=limits)
    from pipeline.plates.probe import probe_sequence
    from pipeline.video.sequence_types import ColourRequest

    colour = settings.colour
    request = ColourRequest(config=colour.config, plate_space=colour.plate, model_space=colour.model)
    return probe_sequence(shot.url, fps=settings.fps, colour=request, limits=limits)


def plan_shot_chunks(spec: JobSpec, info: VideoInfo, window: ShotWindow | None = None) -> ChunkPlan:
    """The chunk plan of one probed shot's analysed frames under the job's ``chunking`` settings."""
    start, end = window.analysed if window is not None else (0, info.frame_count)
    return plan_chunks(
        info,
        spec.chunking.seconds,
        min_seconds=spec.chunking.min_seconds,
        max_seconds=spec.chunking.max_seconds,
        snap_to_keyframes=spec.chunking.snap_to_keyframes,
        start=start,
        end=end,
    )


def check_identity_pictures(spec: JobSpec) -> None:
    """Read and decode every identity picture (within ``limits``) here, before Ray: a text file
    named ``.jpg``, a FIFO or a 100-megapixel picture is refused naming ``identities.<name>.images[i]``."""
    from pipeline.faces.pictures import load_picture

    for name, ident in spec.identities.items():
        for i, url in enumerate(ident.images):
            try:
                load_picture(url, spec.limits)
            except RecastError as exc:
                raise SpecError(f"identities.{name}.images[{i}]", str(exc)) from exc


def verify_identity_adapters(spec: JobSpec, pack_manifest: ManifestFile | None) -> None:
    """Refuse bad adapters (checksum, other base model, slot shapes) before any actor starts.

    ``pack_manifest``: the pack's manifest as the checks read it (None for the embedded pack)."""
    from pipeline.lora import verify_adapter
    from pipeline.models.loader import pack_lora_slots

    wanted = {n: i.adapter for n, i in spec.identities.items() if i.adapter is not None}
    if not wanted:
        return
    first = f"identities.{next(iter(wanted))}.adapter"
    if spec.models.execution.backend == "torch":
        raise SpecError(first, "adapters need models.execution.backend 'onnxruntime'")
    if pack_manifest is None:
        raise SpecError(first, f"the embedded pack {spec.models.pack} has no LoRA slots")
    slots = pack_lora_slots(pack_manifest.manifest, spec.models.pack)
    if slots is None:
        raise SpecError(first, f"model pack {spec.models.pack} has no LoRA slots (swapper contract.lora)")
    for adapter in wanted.values():
        verify_adapter(adapter.url, adapter.sha256, slots)  # ModelPackError naming the adapter URL


def plate_warnings(prepared: PreparedJob) -> list[str]:
    """What a supervisor should know about the plates before reading the output."""
    from pipeline.plates.frames import LOSSLESS_DEFAULT, is_lossy

    out = []
    for p in prepared.planned:
        seq = p.info.sequence
        if seq is not None and is_lossy(seq.compression) and not prepared.spec.output.compression:
            out.append(
                f"{p.ref.name}: the plates are {seq.compression} (lossy); rendered frames are written "
                f"{LOSSLESS_DEFAULT} so pixels outside the faces stay bit-exact (set output.compression "
                f"to keep {seq.compression}); frames not rendered are the source's files"
            )
    return out


def remove_interrupted_publish(output_url: str) -> None:
    """Delete the temporary copies a killed run may have left beside a local output (or pass).

    ``storage.publish_file`` copies to ``.<name>.recast-tmp-<12 hex>`` and renames; a
    driver killed mid-copy leaves that file.  Only names of exactly that form, for this
    output's own name (or a frame of its sequence), are removed: a user's
    ``.precious.png.tmp-keepme`` beside it is not Recast's.  Object stores need nothing:
    an upload is invisible until it is complete.
    """
    if not storage.is_local(output_url):
        return
    path = storage.local_path(output_url)
    head, tail = os.path.split(path)
    name = re.escape(tail)
    if is_sequence_url(output_url):
        # Frames are written one by one the same way: .<head><frame><tail>.recast-tmp-<hex>
        seq = parse_sequence_url(output_url)
        name = rf"{re.escape(seq.head)}-?\d+{re.escape(seq.tail)}"
    wanted = storage.temporary_of(name)
    try:
        entries = os.listdir(head or ".")
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        if wanted.fullmatch(entry):
            stale = os.path.join(head or ".", entry)
            logger.info("removing %s, left by an interrupted publish", stale)
            with contextlib.suppress(FileNotFoundError):
                os.remove(stale)


def _parent(url: str) -> str:
    return url.rsplit("/", 1)[0] if "/" in url else "."
