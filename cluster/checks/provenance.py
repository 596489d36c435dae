"""Driver-side provenance: the studio policy before anything runs, signing at publish, the audit records.

:func:`check_provenance` runs before any read for rendering or any write;
:class:`JobProvenance` is built from the checked job: it checks the identity
pictures' faces against the policy's reference embeddings on a warm actor,
writes the ``job.started`` audit record before any chunk renders, hands the
publisher what to sign each output with, and writes the result record at the end.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from cluster.checks.trust import Authorisation, authorise, check_faces
from cluster.spec.job import JobSpec
from cluster.spec.shot_refs import ShotRef, output_prefix_for
from pipeline.errors import RecastError, StorageError
from pipeline.store import storage
from pipeline.store.hashing import sha256_url

if TYPE_CHECKING:
    from cluster.report.summary import JobSummary
    from pipeline.provenance.config import SignerConfig, WatermarkConfig
    from pipeline.provenance.credentials import ManifestInfo

logger = logging.getLogger(__name__)


def audit_url(spec: JobSpec) -> str:
    """Folder whose ``audit/`` holds the job's audit records: the output prefix."""
    return output_prefix_for(spec)


def adapter_hashes(spec: JobSpec) -> dict[str, str]:
    """Identity -> sha256 of its LoRA adapter, for identities that have one."""
    return {n: i.adapter.sha256 for n, i in sorted(spec.identities.items()) if i.adapter is not None}


def watermark_config(spec: JobSpec) -> WatermarkConfig | None:
    """The ``WatermarkConfig`` of the job, or None when the watermark is off (the cluster policy's leave)."""
    watermark = spec.marking.watermark
    return watermark if watermark.enabled else None


def chosen_signer(spec: JobSpec, auth: Authorisation) -> tuple[SignerConfig, str] | None:
    """(the key the outputs are signed with, whose it is) or None with Content Credentials off.

    The spec's ``provenance.signer``, else the studio policy's ``signer``, else the installation's
    own key (made on first use, :mod:`pipeline.provenance.install_key`); always with the time-stamp
    authority of the policy or the cluster.
    """
    prov = spec.marking
    if not prov.content_credentials:
        return None
    if prov.signer is not None:
        signer, whose = prov.signer, "studio (provenance.signer)"
    elif auth.policy_signer is not None:
        signer, whose = auth.policy_signer, f"studio (policy {auth.policy_url})"
    else:
        from pipeline.provenance.install_key import installation_signer

        signer, whose = installation_signer(), "installation (untrusted)"
    return signer.model_copy(update={"timestamp_url": auth.timestamp_url}), whose


def check_provenance(spec: JobSpec, shots: list[ShotRef], work_url: str) -> Authorisation:
    """Policy (consent, prefixes, approved pictures, leave to switch marking off) and the signing
    key, before anything is read for rendering or written.

    Returns what the policy allowed (:class:`cluster.checks.trust.Authorisation`) with the key the
    outputs will be signed with.  Raises PolicyError naming the identity, picture or URL the studio
    policy refuses, SpecError for a field a cluster policy forbids (marking switched off without
    its leave) or a signer that cannot be built.
    """
    from cluster.checks.destinations import written_urls

    # Everything the job writes (outputs, passes, work area; the audit folder is added there) is
    # authorised by one function, policy.check_url_allowed.
    auth = authorise(spec, shots, [url for url, _ in written_urls(spec, shots, work_url)])
    chosen = chosen_signer(spec, auth)
    if chosen is None:
        return auth
    from pipeline.provenance.credentials import make_signer

    # A bad key or chain fails now, not after rendering.
    make_signer(chosen[0]).close()
    return replace(auth, signer=chosen[0], signer_source=chosen[1])


@dataclass(frozen=True)
class JobProvenance:
    """What a checked job signs its outputs with and records in its audit log."""

    spec: JobSpec
    consent_refs: dict[str, str]
    """Identity -> consent reference from the studio policy (empty without ``provenance``)."""
    pack_hash: str
    auth: Authorisation = field(default_factory=Authorisation)

    def signing(self, output_url: str) -> tuple[ManifestInfo, SignerConfig] | None:
        """(ManifestInfo, SignerConfig) for ``output_url``; None with Content Credentials off."""
        if self.auth.signer is None:
            return None
        from pipeline.provenance.credentials import ManifestInfo
        from pipeline.provenance.watermark import job_payload

        info = ManifestInfo(
            title=output_url.rsplit("/", 1)[-1],
            job_id=self.spec.job_id,
            identities=self.consent_refs,
            model_pack_sha256=self.pack_hash,
            adapters=adapter_hashes(self.spec),
            watermark_payload=job_payload(self.spec.job_id) if watermark_config(self.spec) else None,
        )
        return info, self.auth.signer

    def marking(self) -> dict[str, Any]:
        """How the job's outputs are marked as AI-made, for the audit log and the report."""
        from pipeline.provenance.watermark import job_payload

        watermark = watermark_config(self.spec)
        return {
            "watermark": watermark is not None,
            "watermark_payload": None if watermark is None else f"{job_payload(self.spec.job_id):08x}",
            "content_credentials": self.auth.signer is not None,
            "signer": self.auth.signer_source,
            "switched_off": list(self.auth.unmarked),
            "switched_off_by": self.auth.policy_url if self.auth.unmarked else None,
        }

    def check_faces(self, actor: Any) -> None:
        """The identity pictures' faces against the policy's reference embeddings, on a warm actor."""
        check_faces(self.auth, actor)

    def write_intent(self, shots: list[ShotRef]) -> None:
        """The ``job.started`` record, before any chunk renders: spec, identities and consent, inputs.

        Under a cluster policy a failure raises StorageError (the job does not
        start); otherwise it is logged.
        """
        if not self.auth.audited:
            return
        try:
            inputs = {
                url: digest
                for pictures in self.auth.picture_sha256.values()
                for url, digest in pictures.items()
            }
            for ident in self.spec.identities.values():
                for url in ident.images:
                    if url not in inputs:
                        inputs[url] = sha256_url(url)
            extra = {
                "policy_url": self.auth.policy_url,
                "cluster_policy": self.auth.cluster_policy,
                "marking": self.marking(),
                "shots": {s.name: {"url": s.url, "output_url": s.output_url} for s in shots},
            }
            url = self._append("job.started", inputs, {}, extra)
        except (RecastError, OSError) as exc:
            if self.auth.cluster_policy:
                raise StorageError(
                    storage.join(audit_url(self.spec), "audit"),
                    f"the job's intent record could not be written and the cluster policy requires it: {exc}",
                ) from exc
            logger.error("job %s: could not write its intent audit record: %s", self.spec.job_id, exc)
            return
        logger.info("job %s: intent audit record %s", self.spec.job_id, url)

    def write_audit(self, summary: JobSummary, shot_urls: list[str]) -> None:
        """One audit record for this run of the job: inputs, published outputs, consent, models.

        A failure fails the job under a cluster policy (``summary.failures``);
        otherwise it is logged and added to the summary's warnings.
        """
        if not self.auth.audited:
            return
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
            event = "job.completed" if summary.ok else "job.failed"
            url = self._append(
                event,
                inputs,
                outputs,
                {"shots": {s.name: s.status for s in summary.shots}, "marking": self.marking()},
            )
        except (RecastError, OSError) as exc:
            logger.error("job %s: could not write its audit record: %s", spec.job_id, exc)
            if self.auth.cluster_policy:
                summary.failures.append(f"audit record not written (the cluster policy requires it): {exc}")
            else:
                summary.warnings.append(f"audit record not written: {exc}")
            return
        logger.info("job %s: audit record %s", spec.job_id, url)

    def _append(
        self, event: str, inputs: dict[str, str], outputs: dict[str, str], extra: dict[str, Any]
    ) -> str:
        from pipeline.provenance.audit import AuditLog, make_record

        record = make_record(
            job_id=self.spec.job_id,
            spec=self.spec,
            identities=self.consent_refs,
            model_pack_sha256=self.pack_hash,
            adapters=adapter_hashes(self.spec),
            inputs=inputs,
            outputs=outputs,
            job_metadata=self.auth.job_metadata,
            event=event,
            extra={**extra, "ray_job_id": _ray_job_id()},
        )
        return AuditLog(audit_url(self.spec)).append(record)


def _ray_job_id() -> str | None:
    """The Ray job id of this driver, when Ray is running."""
    import ray

    return ray.get_runtime_context().get_job_id() if ray.is_initialized() else None
