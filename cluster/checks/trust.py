"""The studio policy a job runs under, and what the job spec may not choose.

``RECAST_POLICY_URL`` (set in the cluster's images, launcher configs and
KubeRay manifests, see the README) pins the policy on a cluster: it is always
loaded and always enforced (its ``enforce: false`` is ignored), every job is
audited, and a spec that names another ``provenance.policy_url`` or sets
``provenance.audit: false`` is refused.  Without it a job may name its own
policy (local use, as before).

Every output is marked as AI-made (the watermark, Content Credentials): a spec
that switches either off is refused unless the cluster's policy sets
``allow_unmarked_outputs: true``; a policy the spec names cannot give that leave.

The time-stamp authority for Content Credentials comes only from the policy
(``timestamp_url``) or the cluster (``RECAST_TIMESTAMP_URL``), never from a job
spec.  Everything but :func:`check_faces` (a call to a warm actor) runs before Ray starts
(Ray is imported only there).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cluster.spec.job import JobSpec
from cluster.spec.shot_refs import ShotRef, output_prefix_for
from pipeline.errors import RecastError, SpecError
from pipeline.store import jsonload, storage

if TYPE_CHECKING:
    from pipeline.models.pack import ManifestFile
    from pipeline.provenance.config import SignerConfig
    from pipeline.provenance.consent import FaceReference
    from pipeline.provenance.policy import Policy

logger = logging.getLogger(__name__)

POLICY_ENV = "RECAST_POLICY_URL"
TIMESTAMP_ENV = "RECAST_TIMESTAMP_URL"
RAY_JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"
"""What Ray's job supervisor hands a submitted driver: its runtime env and job metadata (JSON)."""
NO_POLICY_REF = "none (no studio policy in the job)"
"""Consent reference recorded in manifests and audit records when no policy applies."""


@dataclass(frozen=True)
class Authorisation:
    """What the studio policy allowed for one job, found before Ray starts."""

    consent_refs: dict[str, str] = field(default_factory=dict)
    """Identity -> consent reference (empty without a policy and without ``provenance``)."""
    policy_url: str | None = None
    cluster_policy: bool = False
    """True when ``RECAST_POLICY_URL`` set the policy: audit records are mandatory."""
    audited: bool = False
    faces: dict[str, FaceReference] = field(default_factory=dict)
    """Identity -> reference embeddings its pictures' faces must match (checked on an actor)."""
    picture_sha256: dict[str, dict[str, str]] = field(default_factory=dict)
    """Identity -> picture URL -> sha256, for identities whose pictures were hashed."""
    timestamp_url: str | None = None
    job_metadata: dict[str, str] = field(default_factory=dict)
    """Ray job metadata (``ray job submit --metadata-json``), when the driver was submitted."""
    pack_manifest: ManifestFile | None = None
    """The model pack's manifest as read once its folder was allowed (None: no policy, or the
    embedded pack); the later checks and the pack's load use these bytes, never a second read."""
    policy_signer: SignerConfig | None = None
    """The studio key of the policy (``signer``), for a job that names none of its own."""
    unmarked: tuple[str, ...] = ()
    """The spec fields that switched AI marking off, with the cluster policy's leave."""
    signer: SignerConfig | None = None
    """The key the job's Content Credentials are signed with, once chosen and built
    (:func:`cluster.checks.provenance.check_provenance`); None: not yet, or credentials off."""
    signer_source: str | None = None
    """Whose key ``signer`` is: a studio's (the spec's or the policy's) or the installation's."""


def ray_job_config(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The runtime env and metadata Ray's job supervisor gave this driver ({} outside ``ray job submit``)."""
    env = os.environ if env is None else env
    raw = env.get(RAY_JOB_CONFIG_ENV)
    if not raw:
        return {}
    try:
        data = jsonload.loads(raw)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def job_metadata(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Ray job metadata as strings (submitter, job_submission_id...)."""
    metadata = ray_job_config(env).get("metadata") or {}
    return {str(k): str(v) for k, v in metadata.items()} if isinstance(metadata, dict) else {}


def cluster_settings(env: Mapping[str, str] | None = None) -> tuple[str | None, str | None]:
    """(RECAST_POLICY_URL, RECAST_TIMESTAMP_URL) of the cluster; SpecError when the job's runtime env sets them."""
    env = os.environ if env is None else env
    runtime_env = ray_job_config(env).get("runtime_env") or {}
    env_vars = runtime_env.get("env_vars") or {} if isinstance(runtime_env, dict) else {}
    for name in (POLICY_ENV, TIMESTAMP_ENV):
        if isinstance(env_vars, dict) and name in env_vars:
            raise SpecError(
                f"runtime_env.env_vars.{name}",
                "a submitted job cannot set it: it is the cluster's (image, launcher config or KubeRay manifest)",
            )
    return (env.get(POLICY_ENV) or "").strip() or None, (env.get(TIMESTAMP_ENV) or "").strip() or None


def authorise(
    spec: JobSpec, shots: list[ShotRef], output_urls: list[str], env: Mapping[str, str] | None = None
) -> Authorisation:
    """Apply the studio policy (the cluster's, else the spec's) before anything is read for rendering.

    Consent by name, project and date, then input and output prefixes (the
    signer's key and chain are inputs too), then the identity pictures' sha256
    against the approved references, and the reference embeddings are loaded.
    Raises PolicyError naming the identity, picture or URL, SpecError naming the
    spec field a cluster policy forbids.
    """
    from pipeline.provenance.policy import authorise_job, check_pictures, check_url_allowed, load_policy

    cluster_url, cluster_timestamp = cluster_settings(env)
    prov = spec.provenance
    if cluster_url is not None and prov is not None:
        if prov.policy_url is not None and not _same(prov.policy_url, cluster_url):
            raise SpecError(
                "provenance.policy_url",
                f"this cluster's studio policy is {cluster_url} ({POLICY_ENV}); a job cannot name another "
                "(remove the field)",
            )
        if not prov.audit:
            raise SpecError(
                "provenance.audit",
                f"cannot be false on a cluster with a studio policy ({POLICY_ENV}): every job is audited",
            )
    unmarked = spec.unmarked_fields()
    if unmarked and cluster_url is None:
        raise SpecError(
            unmarked[0],
            "every output is marked as AI-made; only the cluster's studio policy "
            f"({POLICY_ENV}, with allow_unmarked_outputs: true) can let a job switch that off, "
            "never a job spec or a policy it names",
        )
    policy_url = _chosen_policy(spec, cluster_url)
    audited = cluster_url is not None or (prov is not None and prov.audit)
    metadata = job_metadata(env)
    if policy_url is None:
        refs = {name: NO_POLICY_REF for name in spec.identities}
        return Authorisation(refs, audited=audited, timestamp_url=cluster_timestamp, job_metadata=metadata)
    policy = load_policy(policy_url)
    if cluster_url is not None and not policy.enforce:
        logger.warning("%s: enforce: false is ignored, a cluster policy is always enforced", policy_url)
        policy = policy.model_copy(update={"enforce": True})
    if unmarked and not policy.allow_unmarked_outputs:
        raise SpecError(
            unmarked[0],
            f"the cluster's studio policy {policy_url} does not allow unmarked outputs "
            "(allow_unmarked_outputs: true): every output is marked as AI-made",
        )
    if unmarked:
        logger.warning(
            "job %s: %s switched off, as the cluster's studio policy %s allows; recorded in the audit log",
            spec.job_id,
            ", ".join(unmarked),
            policy_url,
        )
    outputs = list(output_urls)
    if audited:
        outputs.append(storage.join(output_prefix_for(spec), "audit"))
    reads = input_urls(spec, shots)
    refs = authorise_job(
        policy,
        project=prov.project if prov is not None else None,
        identity_names=spec.identities,
        input_urls=reads,
        output_urls=outputs,
        today=dt.datetime.now(dt.UTC).date(),
    )
    # The pack's folder is allowed: now its manifest and model files, each after its links.
    pack_manifest = pack_manifest_of(spec.models.pack)
    if pack_manifest is not None:
        for url in [pack_manifest.url, *pack_manifest.model_urls(spec.models.pack)]:
            check_url_allowed(policy, url, "input")
    hashes = picture_hashes(spec, policy)
    for name, pictures in hashes.items():
        check_pictures(policy, name, pictures)
    return Authorisation(
        consent_refs=refs,
        policy_url=policy_url,
        cluster_policy=cluster_url is not None,
        audited=audited,
        faces=_references(policy, spec, policy_url),
        picture_sha256=hashes,
        timestamp_url=cluster_timestamp or policy.timestamp_url,
        job_metadata=metadata,
        pack_manifest=pack_manifest,
        policy_signer=policy.signer,
        unmarked=unmarked,
    )


def input_urls(spec: JobSpec, shots: list[ShotRef]) -> list[str]:
    """Every URL the job reads, each as the file actually opened: shots (and every frame of a
    local sequence, whose links the policy follows), identity pictures and adapters, OCIO
    configs, the model pack's folder, the signer's key and chain.  The pack's manifest and
    model files are added by :func:`authorise` once its folder is allowed."""
    from pipeline.plates.sequence import list_frames, parse_sequence_url

    urls = []
    for s in shots:
        urls.append(s.url)
        if s.is_sequence and storage.is_local(s.url):
            urls.extend(frame.url for frame in list_frames(parse_sequence_url(s.url)))
        colour = s.settings.colour if s.settings is not None else spec.colour
        urls.append(colour.config)
    urls.append(spec.colour.config)
    if spec.edit is not None:
        urls.append(spec.edit.url)
    for ident in spec.identities.values():
        urls.extend(ident.images)
        if ident.adapter is not None:
            urls.append(ident.adapter.url)
    if not spec.models.pack.startswith("builtin:"):
        urls.append(spec.models.pack)
    signer = spec.marking.signer
    if signer is not None:
        urls.extend([signer.certificate_chain_url, signer.private_key_url])
    return list(dict.fromkeys(u for u in urls if not u.startswith("ocio://")))


def pack_manifest_of(pack_url: str) -> ManifestFile | None:
    """The model pack's ``manifest.json``, read once (None for the embedded ``builtin:`` pack)."""
    if pack_url.startswith("builtin:"):
        return None
    from pipeline.models.pack import read_manifest

    return read_manifest(pack_url)


def check_patterns(spec: JobSpec, env: Mapping[str, str] | None = None) -> None:
    """Refuse a shot ``pattern`` whose folder the studio policy does not let the job read, before
    it is listed: a refusal after listing would name files the job may not see."""
    from pipeline.provenance.policy import check_url_allowed, load_policy

    patterns = [(i, s.pattern) for i, s in enumerate(spec.shots) if s.pattern is not None]
    policy_url = job_policy_url(spec, env)
    if not patterns or policy_url is None:
        return
    policy = load_policy(policy_url)
    for i, pattern in patterns:
        fixed = re.split(r"[*?\[]", pattern, maxsplit=1)[0]
        folder = fixed.rsplit("/", 1)[0] if "/" in fixed else "."
        try:
            check_url_allowed(policy, folder, "input")
        except RecastError as exc:
            raise SpecError(f"shots[{i}].pattern", f"refused by the studio policy: {exc}") from None


def input_guard(spec: JobSpec, env: Mapping[str, str] | None = None) -> Callable[[str], None] | None:
    """A check that refuses (PolicyError) an input URL the job's studio policy does not let it read,
    for what is found only by reading (an edit's timeline and media); None without a policy."""
    from pipeline.provenance.policy import check_url_allowed, load_policy

    policy_url = job_policy_url(spec, env)
    if policy_url is None:
        return None
    policy = load_policy(policy_url)
    return lambda url: check_url_allowed(policy, url, "input")


def job_policy_url(spec: JobSpec, env: Mapping[str, str] | None = None) -> str | None:
    """The policy the job runs under: the cluster's (``RECAST_POLICY_URL``), else the spec's."""
    return _chosen_policy(spec, cluster_settings(env)[0])


def _chosen_policy(spec: JobSpec, cluster_url: str | None) -> str | None:
    prov = spec.provenance
    return cluster_url or (prov.policy_url if prov is not None else None)


def picture_hashes(spec: JobSpec, policy: Policy) -> dict[str, dict[str, str]]:
    """sha256 of the pictures of every identity whose clearance lists approved reference pictures."""
    from pipeline.store.hashing import sha256_url

    out: dict[str, dict[str, str]] = {}
    for name, ident in sorted(spec.identities.items()):
        clearance = policy.identities.get(name)
        if clearance is None or not clearance.reference_sha256:
            continue
        out[name] = {}
        for i, url in enumerate(ident.images):
            try:
                out[name][url] = sha256_url(url)
            except (RecastError, OSError) as exc:
                raise SpecError(f"identities.{name}.images[{i}]", f"cannot read {url}: {exc}") from exc
    return out


def _references(policy: Policy, spec: JobSpec, where: str) -> dict[str, FaceReference]:
    from pipeline.provenance.consent import load_references

    return load_references(policy, list(spec.identities), where)


def _same(a: str, b: str) -> bool:
    from pipeline.provenance.policy import comparable_url

    return comparable_url(a) == comparable_url(b)


def check_faces(auth: Authorisation, actor: Any) -> None:
    """On a warm render actor: every identity picture's face must match its reference embedding.

    Raises PolicyError naming the identity, the picture and the similarity; call
    it before any chunk is analysed or rendered.
    """
    if not auth.faces:
        return
    import ray

    from pipeline.provenance.consent import check_faces as compare

    embedded = ray.get(actor.picture_embeddings.remote(sorted(auth.faces)))
    for name, reference in sorted(auth.faces.items()):
        compare(name, reference, embedded[name])
