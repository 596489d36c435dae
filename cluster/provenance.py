"""Driver-side provenance: the studio policy before anything runs, signing at publish, the audit record.

:func:`check_provenance` runs before any read for rendering or any write;
:class:`JobProvenance` is built from the checked job and hands the publisher
what to sign each output with, and writes the job's audit record at the end.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cluster.shots import ShotRef, output_prefix_for
from cluster.spec import JobSpec
from pipeline import storage
from pipeline.errors import RecastError, SpecError

if TYPE_CHECKING:
    from cluster.summary import JobSummary
    from pipeline.provenance.config import SignerConfig, WatermarkConfig
    from pipeline.provenance.credentials import ManifestInfo

logger = logging.getLogger(__name__)

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


def adapter_hashes(spec: JobSpec) -> dict[str, str]:
    """Identity -> sha256 of its LoRA adapter, for identities that have one."""
    return {n: i.adapter.sha256 for n, i in sorted(spec.identities.items()) if i.adapter is not None}


def signer_config(spec: JobSpec) -> SignerConfig:
    """The ``SignerConfig`` of the job's ``provenance.signer``."""
    assert spec.provenance is not None and spec.provenance.signer is not None
    return spec.provenance.signer


def watermark_config(spec: JobSpec) -> WatermarkConfig | None:
    """The ``WatermarkConfig`` of the job, or None when the watermark is off."""
    prov = spec.provenance
    if prov is None or not prov.watermark.enabled:
        return None
    return prov.watermark


def check_provenance(spec: JobSpec, shots: list[ShotRef], work_url: str) -> dict[str, str]:
    """Policy (consent, prefixes) and signer checks, before anything is read for rendering or written.

    Returns identity -> consent reference.  Raises PolicyError naming the
    identity or URL the studio policy refuses, SpecError for outputs that
    cannot be signed or a signer that cannot be built.
    """
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


@dataclass(frozen=True)
class JobProvenance:
    """What a checked job signs its outputs with and records in its audit log."""

    spec: JobSpec
    consent_refs: dict[str, str]
    """Identity -> consent reference from the studio policy (empty without ``provenance``)."""
    pack_hash: str

    def signing(self, output_url: str) -> tuple[ManifestInfo, SignerConfig] | None:
        """(ManifestInfo, SignerConfig) for ``output_url`` when the job signs its outputs."""
        prov = self.spec.provenance
        if prov is None or prov.signer is None:
            return None
        from pipeline.provenance.credentials import ManifestInfo
        from pipeline.provenance.watermark import job_payload

        info = ManifestInfo(
            title=output_url.rsplit("/", 1)[-1],
            job_id=self.spec.job_id,
            identities=self.consent_refs,
            model_pack_sha256=self.pack_hash,
            adapters=adapter_hashes(self.spec),
            watermark_payload=job_payload(self.spec.job_id) if prov.watermark.enabled else None,
        )
        return info, signer_config(self.spec)

    def write_audit(self, summary: JobSummary, shot_urls: list[str]) -> None:
        """One audit record for this run of the job: inputs, published outputs, consent, models.

        A failure is logged and added to the summary's warnings.
        """
        prov = self.spec.provenance
        if prov is None or not prov.audit:
            return
        from pipeline.hashing import sha256_url
        from pipeline.provenance.audit import AuditLog, make_record

        spec = self.spec
        try:
            inputs = {url: sha256_url(url) for url in shot_urls}
            for ident in spec.identities.values():
                for url in ident.images:
                    inputs[url] = sha256_url(url)
            outputs = {
                s.output_url: s.output_sha256
                for s in summary.shots
                if s.status == "published" and s.output_sha256
            }
            record = make_record(
                job_id=spec.job_id,
                spec=spec,
                identities=self.consent_refs,
                model_pack_sha256=self.pack_hash,
                adapters=adapter_hashes(spec),
                inputs=inputs,
                outputs=outputs,
                event="job.completed" if summary.ok else "job.failed",
                extra={"shots": {s.name: s.status for s in summary.shots}},
            )
            url = AuditLog(audit_url(spec)).append(record)
        except RecastError as exc:
            logger.error("job %s: could not write its audit record: %s", spec.job_id, exc)
            summary.warnings.append(f"audit record not written: {exc}")
            return
        logger.info("job %s: audit record %s", spec.job_id, url)
