"""The job driver: probe, plan, analyse, track, render, merge, publish.

Flow of one job (every shot at once, longest shots first)::

    probe every shot (driver)  ->  plan chunks
    analysis of every chunk on the actor pool ............ parallel
    tracking per shot, chunk after chunk, on the driver ... sequential, cheap (TrackerState chained)
    plan the shot's faces (identity per track, smoothing)
    render of every chunk on the actor pool ............... parallel, stateless -> seam-free
    merge the shot's segments (stream copy) as soon as they are all done, publish atomically

The encoder is chosen once per job by an actor (encoding happens there) and
passed to every render call.  Errors in the inputs are found before any
rendering starts (spec, shots, outputs, model pack, source faces) and raised
as :class:`~pipeline.errors.RecastError`; a failure while rendering fails that
shot only, and the summary says which and why.

Everything that can be checked without Ray is checked by :func:`prepare_job`
before any actor starts.  Each step that finishes is committed to the job's
manifest (:mod:`cluster.manifest`) in its work area: a resubmitted job (same
spec, or ``--resume``) takes committed analyses, tracking and segments from
there, redoes only what is missing or whose inputs changed, and keeps outputs
an earlier run published.  Segments are uploaded, checked, then recorded; an
output is merged locally, checksummed and published in one atomic step.  A
chunk whose actor dies is retried on another (the dead one is replaced); a
chunk whose work raises is tried ``WORK_ATTEMPTS`` times, then fails its shot.

Ray must already be initialised (``jobs/render.py`` does it).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import ray
from ray.exceptions import RayActorError

from actors.render import ChunkAnalysis, IdentitySource, RenderActor, RenderConfig, SegmentResult
from cluster.dispatch import Dispatcher, Elasticity, Outcome, WorkItem
from cluster.manifest import (
    JobManifest,
    RenderRecord,
    digest,
    input_fingerprint,
    stat_fingerprint,
    tasks_digest,
)
from cluster.pool import (
    IDLE_RELEASE_SECONDS,
    PoolPlan,
    actor_execution_threads,
    kill_actors,
    plan_pool,
    ready_ref,
    start_actors,
    wait_first_ready,
)
from cluster.spec import JobSpec, ShotRef, expand_shots, output_prefix_for, work_url_for
from cluster.summary import JobSummary, ShotSummary
from pipeline import storage
from pipeline.chunking import ChunkPlan, plan_chunks
from pipeline.encode import EncoderChoice
from pipeline.errors import RecastError, SpecError
from pipeline.faces.types import Face
from pipeline.probe import VideoInfo, probe
from pipeline.provenance.redact import redact
from pipeline.tracking import TrackerState, track_chunk

logger = logging.getLogger(__name__)

PROGRESS_EVERY_SECONDS = 10.0
WORK_ATTEMPTS = 2
"""Tries of a chunk whose work raised (not a lost actor): a deterministic failure then fails its shot."""
_RENDER, _ANALYZE = 0, 1  # render work first: it finishes shots


@dataclass
class ShotRun:
    """Driver-side state of one shot while the job runs."""

    ref: ShotRef
    info: VideoInfo
    plan: ChunkPlan
    summary: ShotSummary
    rank: int  # 0 = the most work
    encoder: EncoderChoice | None = None
    analyses: dict[int, ChunkAnalysis] = field(default_factory=dict)
    next_to_track: int = 0
    tracker_state: TrackerState | None = None
    faces: list[list[Face]] = field(default_factory=list)
    track_ids: list[list[int]] = field(default_factory=list)
    segments: dict[int, SegmentResult] = field(default_factory=dict)
    started_at: float | None = None
    merging: Future | None = None
    done: bool = False
    info_ref: Any = None  # the VideoInfo put in the object store once, not pickled per call
    fingerprint: dict[str, Any] = field(default_factory=dict)  # of the source (manifest keys)
    spec_key: str = ""  # everything of the spec and inputs the shot's output depends on
    analysis_keys: list[str] = field(default_factory=list)
    render_keys: dict[int, str] = field(default_factory=dict)
    track_resumable: bool = True  # False once a chunk had to be tracked again: later records are stale

    @property
    def chunks(self) -> int:
        return len(self.plan.chunks)

    def segment_url(self, work_url: str, index: int, key: str = "") -> str:
        """Where chunk ``index``'s segment goes; the render key in the name keeps stale segments apart."""
        ext = self.encoder.container if self.encoder is not None else "mkv"
        name = f"{index:05d}-{key[:12]}.{ext}" if key else f"{index:05d}.{ext}"
        return storage.join(work_url, "segments", self.ref.name, name)


@dataclass
class PreparedJob:
    """A job checked and planned without Ray: what to render, what to skip, what an earlier run finished."""

    work_url: str
    manifest: JobManifest
    planned: list[tuple[ShotRef, VideoInfo, ChunkPlan]]
    skipped: list[ShotRef]
    reused: list[tuple[ShotRef, VideoInfo, ChunkPlan, dict[str, Any]]]
    fingerprints: dict[str, dict[str, Any]]
    spec_keys: dict[str, str]
    pack_hash: str
    identities_digest: str
    resumed: bool  # a manifest of an earlier run was found
    consent_refs: dict[str, str] = field(default_factory=dict)
    """Identity -> consent reference from the studio policy (empty without ``provenance``)."""


NO_POLICY_REF = "none (no studio policy in the job)"
"""Consent reference recorded in manifests and audit records when the job names no policy."""
SIGNABLE = (".mp4", ".mov", ".m4v")
"""Containers C2PA signing supports (BMFF)."""


def input_urls(spec: JobSpec, shots: list[ShotRef]) -> list[str]:
    """Every URL the job reads: shots, identity pictures and adapters, and the model pack."""
    urls = [s.url for s in shots]
    for ident in spec.identities.values():
        urls.extend(ident.images)
        if ident.adapter is not None:
            urls.append(ident.adapter.url)
    if not spec.models.pack.startswith("builtin:"):
        urls.append(spec.models.pack)
    return urls


def audit_url(spec: JobSpec) -> str:
    """Folder whose ``audit/`` holds the job's audit records: the output prefix."""
    return output_prefix_for(spec)


def check_provenance(spec: JobSpec, shots: list[ShotRef], work_url: str) -> dict[str, str]:
    """Policy (consent, prefixes) and signer checks, before anything is read for rendering or written.

    Returns identity -> consent reference.  Raises PolicyError naming the
    identity or URL the studio policy refuses, SpecError for outputs that
    cannot be signed or a signer that cannot be built.
    """
    import datetime as dt

    prov = spec.provenance
    if prov is None:
        return {}
    refs = {name: NO_POLICY_REF for name in spec.identities}
    if prov.policy_url is not None:
        from pipeline.provenance.policy import authorise_job, load_policy

        assert prov.project is not None  # the spec requires it with a policy
        outputs = [s.output_url for s in shots] + [work_url]
        if prov.audit:
            outputs.append(storage.join(audit_url(spec), "audit"))
        refs = authorise_job(
            load_policy(prov.policy_url),
            project=prov.project,
            identity_names=spec.identities,
            input_urls=input_urls(spec, shots),
            output_urls=outputs,
            today=dt.datetime.now(dt.UTC).date(),
        )
    if prov.signer is not None:
        from pipeline.provenance.credentials import make_signer

        for shot in shots:
            if not shot.output_url.lower().endswith(SIGNABLE):
                raise SpecError(
                    "provenance.signer",
                    f"{shot.output_url}: Content Credentials need an {', '.join(SIGNABLE)} output",
                )
        make_signer(signer_config(spec)).close()  # a bad key or chain fails now, not after rendering
    return refs


def signer_config(spec: JobSpec) -> Any:
    """The ``SignerConfig`` of the job's ``provenance.signer``."""
    from pipeline.provenance.credentials import SignerConfig

    assert spec.provenance is not None and spec.provenance.signer is not None
    return SignerConfig(**spec.provenance.signer.model_dump())


def watermark_config(spec: JobSpec) -> Any:
    """The ``WatermarkConfig`` of the job, or None when the watermark is off."""
    from pipeline.provenance.watermark import WatermarkConfig

    prov = spec.provenance
    if prov is None or not prov.watermark.enabled:
        return None
    return WatermarkConfig(key=prov.watermark.key, step=prov.watermark.step)


def marks_key(spec: JobSpec) -> dict[str, Any] | None:
    """What of ``provenance`` changes rendered pixels or published bytes (None: nothing)."""
    prov = spec.provenance
    if prov is None or not (prov.watermark.enabled or prov.review_label or prov.signer):
        return None
    return {
        "watermark": prov.watermark if prov.watermark.enabled else None,
        "job_id": spec.job_id if prov.watermark.enabled else None,
        "review_label": prov.review_label,
        "signer": prov.signer,
    }


def render_config(spec: JobSpec, pool: PoolPlan) -> RenderConfig:
    """What every actor of the job is built from."""
    execution = spec.models.execution
    if pool.num_gpus == 0 and execution.intra_op_threads == 0:
        # CPU actors share the node's cores: each gets as many threads as CPUs it reserved.
        execution = execution.model_copy(update={"intra_op_threads": actor_execution_threads(pool)})
    from pipeline.provenance.watermark import job_payload

    watermark = watermark_config(spec)
    return RenderConfig(
        watermark=watermark,
        watermark_payload=job_payload(spec.job_id) if watermark is not None else None,
        review_label=spec.provenance.review_label if spec.provenance is not None else False,
        pack_url=spec.models.pack,
        pack_cache_dir=spec.models.cache_dir,
        execution=execution,
        identities={
            name: IdentitySource(
                images=ident.images,
                face_index=ident.face_index,
                adapter_url=ident.adapter.url if ident.adapter else None,
                adapter_sha256=ident.adapter.sha256 if ident.adapter else None,
            )
            for name, ident in spec.identities.items()
        },
        faces=spec.faces,
        # CPU actors' codecs too: an actor uses the cores it reserved, no more.
        codec_threads=actor_execution_threads(pool) if pool.num_gpus == 0 else 0,
    )


def verify_identity_adapters(spec: JobSpec) -> None:
    """Refuse bad adapters (checksum, other base model, slot shapes) before any actor starts."""
    from pipeline.lora import verify_adapter
    from pipeline.models.loader import pack_lora_slots
    from pipeline.models.pack import MANIFEST, parse_manifest

    wanted = {n: i.adapter for n, i in spec.identities.items() if i.adapter is not None}
    if not wanted:
        return
    first = f"identities.{next(iter(wanted))}.adapter"
    if spec.models.execution.backend == "torch":
        raise SpecError(first, "adapters need models.execution.backend 'onnxruntime'")
    if spec.models.pack.startswith("builtin:"):
        raise SpecError(first, f"the embedded pack {spec.models.pack} has no LoRA slots")
    manifest_url = storage.join(spec.models.pack, MANIFEST)
    slots = pack_lora_slots(parse_manifest(storage.read_bytes(manifest_url), manifest_url), spec.models.pack)
    if slots is None:
        raise SpecError(first, f"model pack {spec.models.pack} has no LoRA slots (swapper contract.lora)")
    for adapter in wanted.values():
        verify_adapter(adapter.url, adapter.sha256, slots)  # ModelPackError naming the adapter URL


def execution_key(spec: JobSpec) -> dict[str, Any]:
    """The parts of ``models.execution`` that change model outputs.

    Thread counts and ``cpu_winograd`` only change float32 rounding (far below
    one code value), so chunks rendered either way may sit in one shot.
    """
    ex = spec.models.execution
    return {"backend": ex.backend, "fp16": ex.fp16}


def identities_digest(spec: JobSpec) -> str:
    """Digest of every identity's pictures (their bytes), face index and adapter.

    Reading the pictures here also fails the job early, naming a missing or unreadable one.
    """
    import hashlib

    parts: dict[str, Any] = {}
    for name, ident in sorted(spec.identities.items()):
        images = []
        for i, url in enumerate(ident.images):
            try:
                images.append(hashlib.sha256(storage.read_bytes(url)).hexdigest())
            except RecastError as exc:
                raise SpecError(f"identities.{name}.images[{i}]", f"cannot read {url}: {exc}") from exc
        parts[name] = {
            "images": images,
            "face_index": ident.face_index,
            "adapter": ident.adapter.sha256 if ident.adapter else None,
        }
    return digest(parts)


def analysis_key(spec: JobSpec, fingerprint: dict[str, Any], chunk: Any, pack_hash: str) -> str:
    """What a chunk's analysis depends on: its source frames and the models (not faces/tracking/encode)."""
    return digest(
        {
            "input": fingerprint,
            "chunk": [chunk.start_frame, chunk.end_frame],
            "pack": pack_hash,
            "execution": execution_key(spec),
        }
    )


def render_key(
    spec: JobSpec,
    fingerprint: dict[str, Any],
    chunk: Any,
    pack_hash: str,
    idents: str,
    encoder: EncoderChoice,
    tasks: list,
) -> str:
    """What a chunk's segment depends on: its frames, models, render settings, identities, encoder, and
    exactly the face tasks planned for it (so a tracking or selection change redoes only chunks it alters)."""
    parts = {
        "input": fingerprint,
        "chunk": [chunk.start_frame, chunk.end_frame],
        "pack": pack_hash,
        "execution": execution_key(spec),
        "faces": spec.faces,
        "identities": idents,
        "encoder": encoder,
        "tasks": tasks_digest(tasks),
    }
    marks = marks_key(spec)
    if marks is not None:  # only then: keys of jobs without provenance stay as they were
        parts["marks"] = marks
    return digest(parts)


def shot_spec_key(
    spec: JobSpec, ref: ShotRef, fingerprint: dict[str, Any], plan: ChunkPlan, pack_hash: str, idents: str
) -> str:
    """Digest of everything a shot's output depends on, known before any actor runs."""
    parts = {
        "input": fingerprint,
        "chunks": [[c.start_frame, c.end_frame] for c in plan.chunks],
        "pack": pack_hash,
        "execution": execution_key(spec),
        "tracking": spec.tracking,
        "selection": spec.selection,
        "faces": spec.faces,
        "identities": idents,
        "encode": spec.output.encode_settings(),
        "output": ref.output_url,
    }
    marks = marks_key(spec)
    if marks is not None:
        parts["marks"] = marks
    return digest(parts)


def prepare_job(spec: JobSpec, *, resume: bool | None = None) -> PreparedJob:
    """Check everything that can be checked without Ray, then plan the job.

    Expands shots, loads (fetches, verifies) the model pack and adapters, reads
    the identities' pictures, probes every shot, applies ``output.if_exists``
    and checks the work area and every output folder are writable.  Any
    problem raises a RecastError naming the field or file, before any actor
    starts and before anything is written to a destination.

    ``resume``: None = reuse what the job's manifest records, if any; True =
    require a manifest (``--resume``); False = ignore it and start afresh.
    """
    from pipeline.models.pack import load_pack

    shots = expand_shots(spec)
    work_url = work_url_for(spec, shots)
    # The studio policy first: a refused identity or path must not cause a single read or write.
    consent_refs = check_provenance(spec, shots, work_url)
    manifest = JobManifest(work_url)
    resumed = False
    if resume is not False:
        resumed = manifest.exists()
        if resume and not resumed:
            raise SpecError(
                "--resume", f"no manifest of job {spec.job_id} at {manifest.root}: nothing to resume"
            )
    pack_hash = load_pack(spec.models.pack, cache_dir=spec.models.cache_dir).hash
    verify_identity_adapters(spec)
    idents = identities_digest(spec)
    skipped = [s for s in shots if spec.output.if_exists == "skip" and storage.exists(s.output_url)]
    candidates = [s for s in shots if s not in skipped]
    probed = probe_shots(spec, candidates)
    planned, reused = [], []
    fingerprints: dict[str, dict[str, Any]] = {}
    spec_keys: dict[str, str] = {}
    for shot, info, plan in probed:
        fingerprint = input_fingerprint(shot.url, info)
        key = shot_spec_key(spec, shot, fingerprint, plan, pack_hash, idents)
        fingerprints[shot.name], spec_keys[shot.name] = fingerprint, key
        if storage.exists(shot.output_url):
            # Published by an earlier run of this very job, unchanged since, for the same inputs: keep it.
            record = manifest.published_output(shot.name, key, shot.output_url) if resumed else None
            if record is not None:
                reused.append((shot, info, plan, record))
                continue
            if spec.output.if_exists == "fail":
                raise SpecError(
                    "output.if_exists",
                    f"{shot.output_url} already exists (set if_exists: skip or overwrite)",
                )
        planned.append((shot, info, plan))
    # An unwritable destination must fail the job now, not after hours of rendering.
    for parent in sorted({_parent(shot.output_url) for shot, _, _ in planned}):
        storage.check_writable(parent)
    storage.check_writable(work_url)
    if spec.provenance is not None and spec.provenance.audit:
        storage.check_writable(storage.join(audit_url(spec), "audit"))
    for shot, _, _ in planned:
        _remove_interrupted_publish(shot.output_url)
    return PreparedJob(
        work_url=work_url,
        manifest=manifest,
        planned=planned,
        skipped=skipped,
        reused=reused,
        fingerprints=fingerprints,
        spec_keys=spec_keys,
        pack_hash=pack_hash,
        identities_digest=idents,
        resumed=resumed,
        consent_refs=consent_refs,
    )


def _remove_interrupted_publish(output_url: str) -> None:
    """Delete the temporary copy a killed run may have left beside a local output.

    ``storage.publish_file`` copies to ``.<name>.tmp-<random>`` and renames; a
    driver killed mid-copy leaves that file.  Object stores need nothing: an
    upload is invisible until it is complete.
    """
    import glob
    import os

    if not storage.is_local(output_url):
        return
    path = storage.local_path(output_url)
    head, tail = os.path.split(path)
    for stale in glob.glob(os.path.join(head or ".", f".{glob.escape(tail)}.tmp-*")):
        logger.info("removing %s, left by an interrupted publish", stale)
        with contextlib.suppress(FileNotFoundError):
            os.remove(stale)


def _parent(url: str) -> str:
    return url.rsplit("/", 1)[0] if "/" in url else "."


def probe_shots(spec: JobSpec, shots: list[ShotRef]) -> list[tuple[ShotRef, VideoInfo, ChunkPlan]]:
    """Probe and plan every shot up front: a bad input fails the job before any rendering."""
    out = []
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="probe") as pool:
        infos = list(pool.map(lambda s: probe(s.url), shots))
    for shot, info in zip(shots, infos, strict=True):
        plan = plan_chunks(
            info,
            spec.chunking.seconds,
            min_seconds=spec.chunking.min_seconds,
            max_seconds=spec.chunking.max_seconds,
            snap_to_keyframes=spec.chunking.snap_to_keyframes,
        )
        out.append((shot, info, plan))
    return out


def shared_storage_warnings(work_url: str, shots: list[ShotRef]) -> list[str]:
    """Local paths only work on a multi-node cluster if they are a shared filesystem: say so."""
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if len(nodes) < 2:
        return []
    warnings = []
    local = [s.url for s in shots if storage.is_local(s.url)]
    if local:
        warnings.append(
            f"{len(nodes)} nodes but {len(local)} shot(s) on local paths (e.g. {local[0]}): "
            "every node must see them (shared filesystem), or use s3:// / gs:// URLs"
        )
    if storage.is_local(work_url):
        warnings.append(
            f"{len(nodes)} nodes but the work area {work_url} is a local path: actors on other nodes "
            "write segments there, so it must be a shared filesystem (or set output.work_url to s3:// / gs://)"
        )
    for warning in warnings:
        logger.warning("%s", warning)
    return warnings


class JobRunner:
    """Runs one job on the current Ray cluster; ``run()`` returns its summary."""

    def __init__(self, spec: JobSpec, *, resume: bool | None = None) -> None:
        self.spec = spec
        self.resume = resume
        self.prepared: PreparedJob | None = None
        self.manifest: JobManifest | None = None
        self.timeline: list[dict[str, Any]] = []
        self.thumbs: dict[str, Any] = {}
        self.shot_retries: dict[str, int] = {}
        self.metrics: Any = None  # JobMetrics, once Ray is up
        self.progress: Any = None  # Progress, once runs are planned
        self.retries = 0
        self.started = time.perf_counter()
        self.actors: list[tuple[str, Any]] = []
        self.pool: PoolPlan | None = None
        self.config: RenderConfig | None = None
        self.embeddings: dict[str, np.ndarray] = {}
        self.runs: dict[str, ShotRun] = {}
        self.summary: JobSummary | None = None
        self._merger = ThreadPoolExecutor(max_workers=2, thread_name_prefix="merge")
        self._next_label = 0
        self._ready_refs: dict[str, Any] = {}  # label -> ready ref of actors not ready at warm-up

    def _elapsed(self) -> float:
        return time.perf_counter() - self.started

    # -- set-up -------------------------------------------------------------------------------

    def _start_pool(self, work_items: int) -> None:
        res = self.spec.resources
        self.pool = plan_pool(
            ray.cluster_resources(),
            gpus_per_actor=res.gpus_per_actor,
            cpus_per_actor=res.cpus_per_actor,
            max_actors=res.max_actors,
            work_items=work_items,
            custom=res.custom,
        )
        self.config = render_config(self.spec, self.pool)
        self.actors = start_actors(self.config, self.pool)
        self._next_label = len(self.actors)

    def _replace_actor(self, dead_label: str) -> tuple[str, Any]:
        assert self.pool is not None and self.config is not None
        label = f"actor-{self._next_label}"
        self._next_label += 1
        handle = RenderActor.options(**self.pool.options()).remote(self.config, label)
        if dead_label:  # "" = one more actor for pending work (elastic growth)
            logger.warning("replacing %s with %s", dead_label, label)
        self.actors.append((label, handle))  # so that it is killed at the end too
        return label, handle

    def _warm_actors(self) -> list[dict[str, Any]]:
        """Wait for every actor's set-up; a set-up error (pack, source face) is raised by name."""
        # Only the first ready actor is waited for: others may wait for nodes (the Dispatcher admits them).
        self._ready_refs = {label: ready_ref(handle) for label, handle in self.actors}
        infos = wait_first_ready(self._ready_refs)
        ready = [(label, handle) for label, handle in self.actors if label in infos]
        self.actors = ready + [a for a in self.actors if a[0] not in infos]  # a ready one first
        for label in infos:
            del self._ready_refs[label]
        self.embeddings = ray.get(self.actors[0][1].identity_embeddings.remote())
        return list(infos.values())

    # -- the job ------------------------------------------------------------------------------

    def prepare(self) -> PreparedJob:
        """Every check that needs no Ray (see :func:`prepare_job`); ``run()`` calls it if not done."""
        if self.prepared is None:
            self.prepared = prepare_job(self.spec, resume=self.resume)
        return self.prepared

    def run(self) -> JobSummary:
        spec = self.spec
        prepared = self.prepare()
        work_url, planned = prepared.work_url, list(prepared.planned)
        self.manifest = prepared.manifest
        summary = JobSummary(
            job_id=spec.job_id, work_url=work_url, shots=[], started_at_epoch=time.time() - self._elapsed()
        )
        self.summary = summary
        for shot in prepared.skipped:
            summary.shots.append(ShotSummary(shot.name, shot.url, shot.output_url, status="skipped"))
        for shot, info, plan, record in prepared.reused:
            summary.shots.append(
                ShotSummary(
                    shot.name,
                    shot.url,
                    shot.output_url,
                    status="published",
                    frames=info.frame_count,
                    chunks=len(plan.chunks),
                    chunks_reused=len(plan.chunks),
                    output_bytes=int(record.get("output_fingerprint", {}).get("size", 0)),
                    output_sha256=record.get("output_sha256"),
                    reused=True,
                )
            )
            logger.info("shot %s: %s was published by an earlier run; kept", shot.name, shot.output_url)
        # Longest work first: by frames x pixels.
        planned.sort(key=lambda p: -(p[1].frame_count * p[1].width * p[1].height))
        for rank, (shot, info, plan) in enumerate(planned):
            shot_summary = ShotSummary(shot.name, shot.url, shot.output_url, chunks=len(plan.chunks))
            summary.shots.append(shot_summary)
            run = ShotRun(shot, info, plan, shot_summary, rank)
            run.fingerprint = prepared.fingerprints[shot.name]
            run.spec_key = prepared.spec_keys[shot.name]
            run.analysis_keys = [
                analysis_key(spec, run.fingerprint, c, prepared.pack_hash) for c in plan.chunks
            ]
            self.runs[shot.name] = run
        self._write_job_record(prepared)
        for shot, _, _ in planned:
            logger.info("job %s: shot %s from %s to %s", spec.job_id, shot.name, shot.url, shot.output_url)
        if not planned:
            summary.wall_seconds = self._elapsed()
            self._write_audit(summary)
            self._write_summary(summary)
            self._write_report(finished=True)
            return summary

        summary.warnings.extend(shared_storage_warnings(work_url, [p[0] for p in planned]))
        total_chunks = sum(len(p[2].chunks) for p in planned)
        self._start_pool(total_chunks)
        assert self.pool is not None
        finished = False
        try:
            summary.actor_info = self._warm_actors()
            summary.actors = len(self.actors)
            summary.setup_seconds = self._elapsed()
            for info in summary.actor_info:
                summary.warnings.extend(w for w in info.get("warnings", []) if w not in summary.warnings)
            runs = list(self.runs.values())
            encoders = ray.get(
                self.actors[0][1].choose_encoders.remote(
                    spec.output.encode_settings(), [r.info for r in runs]
                )
            )
            for run, encoder in zip(runs, encoders, strict=True):
                run.encoder = encoder
                run.summary.encoder = encoder.name
            logger.info(
                "job %s: %d shot(s), %d chunk(s), %d actor(s) warm after %.1fs",
                spec.job_id,
                len(runs),
                total_chunks,
                len(self.actors),
                summary.setup_seconds,
            )
            self._start_observability(runs)
            self._loop(runs, work_url)
            finished = True
            if all(r.summary.status == "published" for r in runs):
                # Every shot's segments are already gone; drop their empty parent too.
                storage.remove(storage.join(work_url, "segments"), recursive=True)
        finally:
            self._merger.shutdown(wait=True)
            kill_actors(self.actors)
            if self.progress is not None:
                self.progress.close()
        summary.wall_seconds = self._elapsed()
        self._write_audit(summary)
        self._write_summary(summary)
        self._write_report(finished=finished)
        return summary

    def _start_observability(self, runs: list[ShotRun]) -> None:
        from cluster.metrics import JobMetrics
        from cluster.progress import Progress

        self.metrics = JobMetrics(self.spec.job_id)
        self.progress = Progress(
            {r.ref.name: r.info.frame_count for r in runs}, stream=sys.stderr, job=self.spec.job_id
        )

    def _on_retry(self, item: WorkItem) -> None:
        """A work item is tried again (its actor died, or it failed once): count it everywhere."""
        self.shot_retries[item.shot] = self.shot_retries.get(item.shot, 0) + 1
        if self.metrics is not None:
            self.metrics.retry(item.shot)
        if self.progress is not None:
            self.progress.retry(item.shot)
        now = self._elapsed()
        self.timeline.append(
            {
                "actor": item.actor,
                "shot": item.shot,
                "chunk": item.chunk,
                "kind": item.kind,
                "start": round(max(0.0, item.submitted_at - self.started), 3),
                "end": round(now, 3),
                "ok": False,
                "attempt": item.attempts,
            }
        )

    def _loop(self, runs: list[ShotRun], work_url: str) -> None:
        spec = self.spec
        dispatcher = Dispatcher(
            self.actors,
            max_inflight=spec.resources.max_inflight_per_actor,
            replace_actor=self._replace_actor,
            on_retry=self._on_retry,
            starting=self._ready_refs,
            elastic=Elasticity(
                start_actor=lambda: self._replace_actor(""),
                ready_call=ready_ref,
                max_actors=self.pool.actors if self.pool is not None else len(self.actors),
                idle_release_seconds=IDLE_RELEASE_SECONDS,
                upcoming=lambda: sum(r.chunks - len(r.render_keys) for r in runs if not r.done),
            ),
        )
        for run in runs:
            run.started_at = time.perf_counter()
            run.info_ref = ray.put(run.info)
            for chunk in run.plan.chunks:
                if self._reuse_analysis(run, chunk):
                    continue
                dispatcher.submit(
                    WorkItem(
                        priority=(_ANALYZE, run.rank, chunk.index),
                        kind="analyze",
                        shot=run.ref.name,
                        chunk=chunk.index,
                        call=_analyze_call(run, chunk),
                    )
                )
            self._track_ready(run)
            if run.next_to_track == run.chunks:
                self._plan_and_render(run, dispatcher, work_url)
        last_progress = time.perf_counter()
        while not all(r.done for r in runs):
            if dispatcher.idle:
                # Only merges are left: sleep on them instead of spinning (the merge threads need the GIL).
                merges = [r.merging for r in runs if r.merging is not None]
                if not merges:
                    raise RuntimeError("driver stalled: no work in flight and no merge running")
                wait_futures(merges, timeout=0.5, return_when=FIRST_COMPLETED)
            for outcome in dispatcher.wait(timeout=0.5):
                self._handle(outcome, dispatcher, work_url)
            for run in runs:
                if run.merging is not None and run.merging.done():
                    self._finish_merge(run, work_url)
            if time.perf_counter() - last_progress >= PROGRESS_EVERY_SECONDS:
                last_progress = time.perf_counter()
                self._log_progress(runs, dispatcher)
                self._write_report(finished=False)
        self.retries = dispatcher.retries
        if self.summary is not None:  # actors that joined later (e.g. on new nodes) too
            self.summary.actor_info.extend(dispatcher.infos.values())

    def _reuse_analysis(self, run: ShotRun, chunk: Any) -> bool:
        """Take chunk's faces from the manifest when an earlier run committed them for the same key."""
        assert self.manifest is not None
        if self.prepared is None or not self.prepared.resumed:
            return False
        faces = self.manifest.read_analysis(run.ref.name, chunk.index, run.analysis_keys[chunk.index])
        if faces is None or len(faces) != chunk.frame_count:
            return False
        run.analyses[chunk.index] = ChunkAnalysis(chunk.index, chunk.start_frame, faces, {}, "manifest")
        run.summary.analyses_reused += 1
        return True

    def _handle(self, outcome: Outcome, dispatcher: Dispatcher, work_url: str) -> None:
        item = outcome.item
        run = self.runs[item.shot]
        end = self._elapsed()
        # The actor's own run time when known (excludes waiting behind its previous call).
        busy = outcome.seconds
        if isinstance(outcome.value, SegmentResult):
            busy = outcome.value.wall_seconds
        elif isinstance(outcome.value, ChunkAnalysis):
            busy = outcome.value.stage_seconds.get("wall", busy)
        entry = {
            "kind": item.kind,
            "shot": item.shot,
            "chunk": item.chunk,
            "actor": item.actor,
            "attempt": item.attempts,
            "start": round(end - busy, 3),
            "end": round(end, 3),
            "ok": outcome.error is None,
        }
        run.summary.timeline.append(entry)
        self.timeline.append(dict(entry))
        if run.done:
            return  # the shot already failed; late results are dropped
        error = outcome.error
        if error is None and item.kind == "render":
            error = self._commit_segment(run, outcome.value)
        if error is not None:
            if item.attempts < WORK_ATTEMPTS and not isinstance(error, RayActorError):
                # Maybe transient (a storage hiccup); a deterministic failure fails again, and then the shot.
                logger.warning(
                    "%s of %s chunk %d failed (attempt %d): %s; trying again",
                    item.kind, item.shot, item.chunk, item.attempts, error,
                )  # fmt: skip
                dispatcher.submit(item)
                self._on_retry(item)
                return
            tries = f" after {item.attempts} tries" if item.attempts > 1 else ""
            self._fail(run, f"{item.kind} of chunk {item.chunk} failed{tries}: {error}")
            dispatcher.drop(item.shot)
            return
        if item.kind == "analyze":
            if self.summary is not None and self.summary.first_analysis_seconds is None:
                self.summary.first_analysis_seconds = self._elapsed()
            analysis: ChunkAnalysis = outcome.value
            self._commit_analysis(run, analysis)
            run.analyses[analysis.chunk_index] = analysis
            run.summary.analyses_run += 1
            run.summary.add_stages({k: v for k, v in analysis.stage_seconds.items() if k != "wall"})
            self._track_ready(run)
            if run.next_to_track == run.chunks:
                self._plan_and_render(run, dispatcher, work_url)
        else:
            result: SegmentResult = outcome.value
            if self.summary is not None and self.summary.first_chunk_seconds is None:
                self.summary.first_chunk_seconds = self._elapsed()
            run.segments[result.chunk_index] = result
            run.summary.chunks_rendered += 1
            run.summary.add_stages(result.stage_seconds)
            run.summary.faces_swapped += result.faces_swapped
            for role, providers in result.providers.items():
                run.summary.providers.setdefault(role, list(providers))
            frames = run.plan.chunks[result.chunk_index].frame_count
            if self.metrics is not None:
                self.metrics.chunk_done(
                    run.ref.name, outcome.seconds, frames, result.faces_swapped, result.stage_seconds
                )
            if self.progress is not None:
                self.progress.update(run.ref.name, frames)
            if len(run.segments) == run.chunks:
                self._start_merge(run)

    def _commit_analysis(self, run: ShotRun, analysis: ChunkAnalysis) -> None:
        assert self.manifest is not None
        try:
            self.manifest.write_analysis(
                run.ref.name,
                analysis.chunk_index,
                run.analysis_keys[analysis.chunk_index],
                analysis.faces,
                analysis.actor,
            )
        except RecastError as exc:
            # Not fatal: the chunk is simply analysed again if the job is resubmitted.
            logger.warning(
                "could not commit the analysis of %s chunk %d: %s", run.ref.name, analysis.chunk_index, exc
            )

    def _commit_segment(self, run: ShotRun, result: SegmentResult) -> BaseException | None:
        """Check the uploaded segment, then record it (the commit); returns the error if it is not right."""
        assert self.manifest is not None
        try:
            size = storage.size(result.url)
        except RecastError as exc:
            return exc
        if size != result.bytes:
            return RecastError(f"{result.url}: uploaded {size} bytes, the actor wrote {result.bytes}")
        try:
            self.manifest.write_render(
                run.ref.name,
                RenderRecord(
                    chunk=result.chunk_index,
                    key=run.render_keys[result.chunk_index],
                    segment_url=result.url,
                    sha256=result.sha256,
                    bytes=result.bytes,
                    frames=result.frames,
                    faces_swapped=result.faces_swapped,
                    actor=result.actor,
                ),
            )
        except RecastError as exc:
            return exc
        return None

    def _track_ready(self, run: ShotRun) -> None:
        """Track every analysed chunk that follows the last tracked one, in order.

        A chunk whose tracking an earlier run committed (same faces, same
        settings, same state in) is taken from the manifest: the chain resumes
        from the last committed chunk.
        """
        assert self.manifest is not None
        started = time.perf_counter()
        resumable = self.prepared is not None and self.prepared.resumed
        while run.next_to_track in run.analyses:
            index = run.next_to_track
            analysis = run.analyses.pop(index)
            state_in = run.tracker_state.to_dict() if run.tracker_state is not None else None
            key = digest(
                {"analysis": run.analysis_keys[index], "tracking": self.spec.tracking, "state_in": state_in}
            )
            record = (
                self.manifest.read_track(run.ref.name, index) if resumable and run.track_resumable else None
            )
            if (
                record is not None
                and record.get("key") == key
                and len(record["track_ids"]) == len(analysis.faces)
            ):
                ids = [list(map(int, f)) for f in record["track_ids"]]
                run.tracker_state = TrackerState.from_dict(record["state_out"])
            else:
                run.track_resumable = False
                ids, run.tracker_state = track_chunk(
                    analysis.faces, analysis.start_frame, self.spec.tracking, run.tracker_state
                )
                try:
                    self.manifest.write_track(
                        run.ref.name, index, key=key, state_in=state_in,
                        state_out=run.tracker_state.to_dict(), track_ids=ids,
                    )  # fmt: skip
                except RecastError as exc:
                    logger.warning(
                        "could not commit the tracking of %s chunk %d: %s", run.ref.name, index, exc
                    )
            run.faces.extend(analysis.faces)
            run.track_ids.extend(ids)
            run.summary.faces_detected += analysis.face_count
            run.next_to_track += 1
        run.summary.add_stages({"track": time.perf_counter() - started})

    def _plan_and_render(self, run: ShotRun, dispatcher: Dispatcher, work_url: str) -> None:
        from pipeline.faceplan import plan_shot

        assert self.manifest is not None and self.prepared is not None
        started = time.perf_counter()
        face_plan = plan_shot(
            run.faces,
            run.track_ids,
            self.spec.selection,
            self.embeddings,
            self.spec.tracking,
            frame_times=run.info.frame_times(),
        )
        run.summary.tracks = len(face_plan.tracks)
        run.faces, run.track_ids = [], []  # no longer needed: keep the driver small
        run.summary.add_stages({"plan": time.perf_counter() - started})
        assert run.encoder is not None
        for chunk in run.plan.chunks:
            tasks = face_plan.for_range(chunk.start_frame, chunk.end_frame)
            key = render_key(
                self.spec,
                run.fingerprint,
                chunk,
                self.prepared.pack_hash,
                self.prepared.identities_digest,
                run.encoder,
                tasks,
            )
            run.render_keys[chunk.index] = key
            record = (
                self.manifest.read_render(run.ref.name, chunk.index, key) if self.prepared.resumed else None
            )
            if record is not None:
                run.segments[chunk.index] = _reused_segment(record, run.encoder)
                run.summary.chunks_reused += 1
                run.summary.faces_swapped += record.faces_swapped
                if self.progress is not None:
                    self.progress.update(run.ref.name, chunk.frame_count)
                continue
            dispatcher.submit(
                WorkItem(
                    priority=(_RENDER, run.rank, chunk.index),
                    affinity=_adapter_identities(self.spec, tasks),
                    kind="render",
                    shot=run.ref.name,
                    chunk=chunk.index,
                    call=_render_call(
                        run, chunk, tasks, run.encoder, run.segment_url(work_url, chunk.index, key)
                    ),
                )
            )
        if len(run.segments) == run.chunks:
            self._start_merge(run)

    def _start_merge(self, run: ShotRun) -> None:
        urls = [run.segments[i].url for i in range(run.chunks)]
        run.summary.chunk_actors = [run.segments[i].actor for i in range(run.chunks)]
        run.merging = self._merger.submit(
            _merge_and_publish, urls, run.info, run.ref.output_url, run.ref.url, self._signing(run)
        )

    def _signing(self, run: ShotRun) -> tuple[Any, Any] | None:
        """(ManifestInfo, SignerConfig) for the shot's output when the job signs its outputs."""
        prov = self.spec.provenance
        if prov is None or prov.signer is None:
            return None
        from pipeline.provenance.credentials import ManifestInfo
        from pipeline.provenance.watermark import job_payload

        assert self.prepared is not None
        info = ManifestInfo(
            title=run.ref.output_url.rsplit("/", 1)[-1],
            job_id=self.spec.job_id,
            identities=self.prepared.consent_refs,
            model_pack_sha256=self.prepared.pack_hash,
            adapters=_adapter_hashes(self.spec),
            watermark_payload=job_payload(self.spec.job_id) if prov.watermark.enabled else None,
        )
        return info, signer_config(self.spec)

    def _write_audit(self, summary: JobSummary) -> None:
        """One audit record for this run of the job: inputs, published outputs, consent, models."""
        prov = self.spec.provenance
        if prov is None or not prov.audit or self.prepared is None:
            return
        from pipeline.provenance.audit import AuditLog, make_record, sha256_url

        prepared = self.prepared
        try:
            inputs = {}
            for shot in [s.ref for s in self.runs.values()] + [r[0] for r in prepared.reused]:
                inputs[shot.url] = sha256_url(shot.url)
            for ident in self.spec.identities.values():
                for url in ident.images:
                    inputs[url] = sha256_url(url)
            outputs = {
                s.output_url: s.output_sha256
                for s in summary.shots
                if s.status == "published" and s.output_sha256
            }
            record = make_record(
                job_id=self.spec.job_id,
                spec=self.spec,
                identities=prepared.consent_refs,
                model_pack_sha256=prepared.pack_hash,
                adapters=_adapter_hashes(self.spec),
                inputs=inputs,
                outputs=outputs,
                event="job.completed" if summary.ok else "job.failed",
                extra={"shots": {s.name: s.status for s in summary.shots}},
            )
            url = AuditLog(audit_url(self.spec)).append(record)
        except RecastError as exc:
            logger.error("job %s: could not write its audit record: %s", self.spec.job_id, exc)
            summary.warnings.append(f"audit record not written: {exc}")
            return
        logger.info("job %s: audit record %s", self.spec.job_id, url)

    def _finish_merge(self, run: ShotRun, work_url: str) -> None:
        from pipeline.thumbnails import boundary_frames, thumbnails

        assert self.manifest is not None
        future, run.merging = run.merging, None
        assert future is not None
        try:
            stats, sha256, fingerprint = future.result()
        except Exception as exc:  # noqa: BLE001 - fails this shot only
            self._fail(run, f"merge failed: {exc}")
            return
        run.summary.add_stages({"merge": stats.seconds})
        run.summary.frames = stats.frames
        run.summary.output_bytes = stats.bytes
        run.summary.output_sha256 = sha256
        run.summary.status = "published"
        run.summary.seconds = time.perf_counter() - (run.started_at or self.started)
        run.done = True
        logger.info(
            "shot %s published: %s (%d frames, %.1f fps)",
            run.ref.name,
            run.ref.output_url,
            stats.frames,
            run.summary.fps,
        )
        try:
            self.manifest.write_shot(
                run.ref.name,
                {
                    "status": "published",
                    "spec_key": run.spec_key,
                    "output_url": run.ref.output_url,
                    "output_sha256": sha256,
                    "output_fingerprint": fingerprint,
                    "frames": stats.frames,
                    "render_keys": [run.render_keys[i] for i in range(run.chunks)],
                },
            )
        except RecastError as exc:
            logger.warning("could not record the published output of %s: %s", run.ref.name, exc)
        try:
            self.thumbs[run.ref.name] = thumbnails(
                run.ref.url, run.ref.output_url, run.info, boundary_frames(run.plan)
            )
        except RecastError as exc:
            if self.summary is not None:
                self.summary.warnings.append(f"thumbnails of {run.ref.name}: {exc}")
        if self.progress is not None:
            self.progress.shot_done(run.ref.name)
        # The output is published and recorded: its segments are no longer needed (the records stay).
        try:
            storage.remove(storage.join(work_url, "segments", run.ref.name), recursive=True)
        except RecastError as exc:
            logger.warning("could not clean segments of %s: %s", run.ref.name, exc)

    def _fail(self, run: ShotRun, message: str) -> None:
        logger.error("shot %s failed: %s", run.ref.name, message)
        run.summary.status = "failed"
        run.summary.error = message
        run.summary.seconds = time.perf_counter() - (run.started_at or self.started)
        run.done = True
        if self.progress is not None:
            self.progress.shot_done(run.ref.name)
        if self.manifest is not None:
            try:
                self.manifest.write_shot(
                    run.ref.name, {"status": "failed", "error": message, "spec_key": run.spec_key}
                )
            except RecastError as exc:
                logger.warning("could not record the failure of %s: %s", run.ref.name, exc)

    def _log_progress(self, runs: list[ShotRun], dispatcher: Dispatcher) -> None:
        total = sum(r.info.frame_count for r in runs)
        analysed = sum(
            r.plan.chunks[i].frame_count for r in runs for i in range(min(r.next_to_track, r.chunks))
        )
        rendered = sum(s.frames for r in runs for s in r.segments.values())
        elapsed = self._elapsed()
        fps = rendered / elapsed if elapsed > 0 else 0.0
        logger.info(
            "progress: analysed %d/%d, rendered %d/%d frames (%.1f fps), %d in flight, %d pending, %d retries",
            analysed,
            total,
            rendered,
            total,
            fps,
            dispatcher.inflight,
            dispatcher.pending,
            dispatcher.retries,
        )

    def _write_job_record(self, prepared: PreparedJob) -> None:
        """``manifest/job.json``: which spec and pack the records were made for (the keys decide reuse)."""
        assert self.manifest is not None
        previous = self.manifest.read_job() if prepared.resumed else None
        spec_hash = digest(self.spec)
        if previous is not None and previous.get("spec_hash") != spec_hash:
            logger.info(
                "job %s: the spec changed since the last run; only the affected chunks are redone",
                self.spec.job_id,
            )
        self.manifest.write_job(
            {
                "job_id": self.spec.job_id,
                "spec_hash": spec_hash,
                "pack_hash": prepared.pack_hash,
                "identities": prepared.identities_digest,
                "runs": int(previous.get("runs", 0)) + 1 if previous else 1,
                "shots": {name: key for name, key in prepared.spec_keys.items()},
            }
        )

    def _write_report(self, *, finished: bool) -> None:
        """``report.html`` / ``report.json`` beside the summary (interim while running)."""
        from cluster.report import actor_busy_ratios, build_report, write_report

        summary = self.summary
        if summary is None:
            return
        try:
            if self.metrics is not None:
                for actor, ratio in actor_busy_ratios(self.timeline, until=self._elapsed()).items():
                    self.metrics.actor_busy(actor, ratio)
            report, page = build_report(
                redact(summary.to_dict()),
                thumbs=self.thumbs,
                timeline=self.timeline,
                retries=self.shot_retries,
                running=not finished,
            )
            write_report(summary.work_url, report, page)
        except RecastError as exc:
            logger.warning("could not write the job report: %s", exc)

    def _write_summary(self, summary: JobSummary) -> None:
        import json

        url = storage.join(summary.work_url, "summary.json")
        try:
            # A credential passed by mistake in the spec (e.g. a signed URL) must not be echoed.
            data = redact(summary.to_dict())
            storage.write_bytes(url, json.dumps(data, indent=2, default=str).encode())
        except RecastError as exc:
            logger.warning("could not write %s: %s", url, exc)


def _reused_segment(record: RenderRecord, encoder: EncoderChoice) -> SegmentResult:
    """A segment committed by an earlier run, as if just rendered."""
    return SegmentResult(
        chunk_index=record.chunk,
        url=record.segment_url,
        sha256=record.sha256,
        bytes=record.bytes,
        frames=record.frames,
        faces_swapped=record.faces_swapped,
        stage_seconds={},
        providers={},
        encoder=encoder.name,
        actor=record.actor or "manifest",
        wall_seconds=0.0,
    )


def _adapter_hashes(spec: JobSpec) -> dict[str, str]:
    return {n: i.adapter.sha256 for n, i in sorted(spec.identities.items()) if i.adapter is not None}


def _merge_and_publish(
    segment_urls: list[str],
    info: VideoInfo,
    output_url: str,
    audio_url: str,
    signing: tuple[Any, Any] | None = None,
) -> tuple[Any, str, dict[str, Any]]:
    """Merge into a local file, checksum it, then publish it atomically; the output appears only whole.

    ``signing`` = (ManifestInfo, SignerConfig): embed signed Content Credentials
    before publishing (the checksum is of the signed file).  Returns (merge
    stats, sha256 of the output, its fingerprint after publishing).
    """
    import hashlib
    import os
    import tempfile

    from pipeline.merge import merge_segments

    with tempfile.TemporaryDirectory(prefix="recast-out-") as tmp:
        local = os.path.join(tmp, "out" + os.path.splitext(output_url)[1])
        stats = merge_segments(segment_urls, info, local, audio_source_url=audio_url)
        if stats.frames != info.frame_count:
            raise RecastError(f"{output_url}: merged {stats.frames} frames, source has {info.frame_count}")
        if signing is not None:
            from pipeline.provenance.credentials import sign_video

            signed = os.path.join(tmp, "signed" + os.path.splitext(output_url)[1])
            sign_video(local, signed, signing[0], signing[1])
            local = signed
        digest_ = hashlib.sha256()
        with open(local, "rb") as fh:
            while block := fh.read(1 << 20):
                digest_.update(block)
        storage.publish_file(local, output_url)
    return stats, digest_.hexdigest(), stat_fingerprint(output_url)


def _adapter_identities(spec: JobSpec, tasks: list) -> tuple[str, ...]:
    """Identities with an adapter that a chunk renders: actors that hold them are preferred."""
    names = {task.identity for frame in tasks for task in frame}
    return tuple(sorted(n for n in names if n in spec.identities and spec.identities[n].adapter is not None))


def _analyze_call(run: ShotRun, chunk: Any):
    url, info = run.ref.url, run.info_ref if run.info_ref is not None else run.info
    return lambda actor: actor.analyze_chunk.remote(url, info, chunk)


def _render_call(run: ShotRun, chunk: Any, tasks: list, encoder: EncoderChoice, segment_url: str):
    url, info = run.ref.url, run.info_ref if run.info_ref is not None else run.info
    return lambda actor: actor.render_chunk.remote(url, info, chunk, tasks, encoder, segment_url)


def run_job(spec: JobSpec, *, resume: bool | None = None) -> JobSummary:
    """Render every shot of ``spec`` on the current Ray cluster and return the summary.

    Raises RecastError for problems found before rendering (spec, inputs,
    outputs, model pack, source faces); render failures are reported per shot
    in the summary (``summary.ok`` is False).  ``resume``: None = reuse what an
    earlier run of the job committed (its manifest), True = require that
    manifest, False = ignore it.
    """
    return JobRunner(spec, resume=resume).run()
