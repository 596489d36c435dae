"""Content Credentials (C2PA) for published videos, through ``c2pa-python``.

``sign_video`` embeds a manifest saying that faces were replaced by a trained
algorithm (IPTC digital source type ``trainedAlgorithmicMedia`` on a
``c2pa.edited`` action, after ``c2pa.created`` / ``compositeWithTrainedAlgorithmicMedia``
for the composite as a whole), with the identities' consent references and the
model pack hash in a ``com.recast.provenance`` assertion.  The manifest is
signed with the studio key and certificate chain named in ``SignerConfig``
(files or URLs); their content never enters the manifest, logs or errors.

``verify_video`` reads the credentials back and says ``valid``, ``tampered``
(signature or content hash does not match: a single changed byte of the video
is enough) or ``missing``.  Trust in the signer is reported separately: pass
the studio's trust anchors (PEM) to check the chain.

MP4, MOV and M4V are supported for video (BMFF hashing); other containers are
refused up front.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Literal

import c2pa
from pydantic import Field

from pipeline.configbase import Frozen
from pipeline.errors import InputRefused, MediaError, SpecError
from pipeline.limits import PEM_MAX_BYTES
from pipeline.provenance.config import SignerConfig
from pipeline.store import storage
from pipeline.store.redact import redact

log = logging.getLogger(__name__)

PROVENANCE_LABEL = "com.recast.provenance"
IPTC = "http://cv.iptc.org/newscodes/digitalsourcetype/"
SOURCE_TYPE_AI = IPTC + "trainedAlgorithmicMedia"
SOURCE_TYPE_COMPOSITE = IPTC + "compositeWithTrainedAlgorithmicMedia"
VIDEO_MIME = {".mp4": "video/mp4", ".m4v": "video/x-m4v", ".mov": "video/quicktime"}
IMAGE_MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
"""Pictures that carry embedded Content Credentials too (a review's contact sheet)."""

_ALGORITHMS = {
    "es256": c2pa.C2paSigningAlg.ES256,
    "es384": c2pa.C2paSigningAlg.ES384,
    "es512": c2pa.C2paSigningAlg.ES512,
    "ps256": c2pa.C2paSigningAlg.PS256,
    "ps384": c2pa.C2paSigningAlg.PS384,
    "ps512": c2pa.C2paSigningAlg.PS512,
    "ed25519": c2pa.C2paSigningAlg.ED25519,
}


class ManifestInfo(Frozen):
    """What the manifest states about one rendered output."""

    title: str
    job_id: str
    identities: dict[str, str]
    """Identity name -> consent reference."""
    model_pack_sha256: str
    adapters: dict[str, str] = Field(default_factory=dict)
    watermark_payload: int | None = None
    content_sha256: str | None = None
    """sha256 of the rendered file before its credentials were embedded: the same on every run of
    the same job (the signature is not: C2PA salts and signs afresh each time)."""
    generator: str = "recast"
    generator_version: str = "0"


class VerifyResult(Frozen):
    """What ``verify_video`` found."""

    status: Literal["valid", "tampered", "missing"]
    trusted: bool = False
    """True when the signer chains to one of the given trust anchors."""
    failures: tuple[str, ...] = ()
    """C2PA failure codes with explanations (empty when valid)."""
    consent_refs: dict[str, str] = Field(default_factory=dict)
    model_pack_sha256: str | None = None
    job_id: str | None = None
    content_sha256: str | None = None
    """sha256 of the rendered file before signing, as the signer stated it."""
    ai_replaced: bool = False
    """True when an action states trainedAlgorithmicMedia."""
    signer: str | None = None
    manifest: dict[str, Any] | None = None


def build_manifest(info: ManifestInfo) -> dict[str, Any]:
    """The manifest definition (JSON-able) for ``info``; credentials are redacted defensively."""
    consent_refs = sorted(set(info.identities.values()))
    provenance: dict[str, Any] = {
        "job_id": info.job_id,
        "identities": [{"name": n, "consent_ref": r} for n, r in sorted(info.identities.items())],
        "model_pack_sha256": info.model_pack_sha256,
        "adapters": dict(sorted(info.adapters.items())),
    }
    if info.watermark_payload is not None:
        provenance["watermark_payload"] = f"{info.watermark_payload:08x}"
    if info.content_sha256 is not None:
        provenance["content_sha256"] = info.content_sha256
    manifest = {
        "claim_generator_info": [{"name": info.generator, "version": info.generator_version}],
        "title": info.title,
        "assertions": [
            {
                "label": "c2pa.actions.v2",
                "data": {
                    "actions": [
                        # C2PA requires the first action to be created/opened; the
                        # delivered file as a whole is a composite of camera footage
                        # and AI-generated faces.
                        {"action": "c2pa.created", "digitalSourceType": SOURCE_TYPE_COMPOSITE},
                        {
                            "action": "c2pa.edited",
                            "digitalSourceType": SOURCE_TYPE_AI,
                            "description": "Faces replaced by a trained AI model (face swap).",
                            "softwareAgent": {"name": info.generator, "version": info.generator_version},
                            "parameters": {
                                "consent_refs": consent_refs,
                                "model_pack_sha256": info.model_pack_sha256,
                            },
                        },
                    ]
                },
            },
            {"label": PROVENANCE_LABEL, "data": provenance},
        ],
    }
    return redact(manifest)


def _mime(path: str | os.PathLike[str]) -> str:
    suffix = Path(path).suffix.lower()
    known = {**VIDEO_MIME, **IMAGE_MIME}
    if suffix not in known:
        raise MediaError(str(path), f"C2PA signing supports {', '.join(known)} here, not {suffix!r}")
    return known[suffix]


def read_pem(url: str, field: str, what: str) -> str:
    """The PEM text at ``url`` (at most :data:`~pipeline.limits.PEM_MAX_BYTES`) holding a ``what``
    block (``CERTIFICATE``, ``PRIVATE KEY``); SpecError naming ``field`` (a spec field or a CLI flag)
    for a file that is too large, not text (a picture named by mistake) or holds no such block."""
    try:
        text = storage.read_bytes(url, max_bytes=PEM_MAX_BYTES).decode()
    except UnicodeDecodeError:
        raise SpecError(field, f"{url} is not PEM text") from None
    except InputRefused as exc:
        raise SpecError(field, f"{url}: {exc.reason}") from None
    if f"-----BEGIN {what}" not in text and f" {what}-----" not in text:
        raise SpecError(field, f"{url} holds no PEM {what.lower()}")
    return text


def make_signer(config: SignerConfig) -> c2pa.Signer:
    """A c2pa Signer from the key and chain in ``config`` (read once)."""
    chain = read_pem(config.certificate_chain_url, "signer.certificate_chain_url", "CERTIFICATE")
    key = read_pem(config.private_key_url, "signer.private_key_url", "PRIVATE KEY")
    info = c2pa.C2paSignerInfo(
        _ALGORITHMS[config.algorithm], chain.encode(), key.encode(), config.timestamp_url
    )
    try:
        return c2pa.Signer.from_info(info)
    except c2pa.C2paError as exc:
        # The library's message names the problem, never the key material.
        raise SpecError(
            "signer", f"cannot build a signer from {config.certificate_chain_url}: {exc}"
        ) from exc


def sign_video(
    path_in: str | os.PathLike[str],
    path_out: str | os.PathLike[str],
    manifest_info: ManifestInfo,
    signer_config: SignerConfig,
) -> bytes:
    """Write ``path_out``: ``path_in`` with a signed C2PA manifest embedded.

    Both are local paths (sign before ``storage.publish_file``).  Returns the
    manifest bytes.  Raises MediaError for unsupported containers or when
    signing fails.
    """
    mime = _mime(path_in)
    signer = make_signer(signer_config)
    try:
        with (
            c2pa.Builder(build_manifest(manifest_info)) as builder,
            open(path_in, "rb") as src,
            open(path_out, "w+b") as dst,
        ):
            manifest_bytes = builder.sign(signer, mime, src, dst)
    except c2pa.C2paError as exc:
        raise MediaError(str(path_in), f"C2PA signing failed: {exc}") from exc
    finally:
        signer.close()
    log.info("signed %s -> %s (job %s)", path_in, path_out, manifest_info.job_id)
    return manifest_bytes


def verify_video(path: str | os.PathLike[str], trust_anchors_pem: str | None = None) -> VerifyResult:
    """Read and validate the C2PA manifest of the local file ``path``.

    ``trust_anchors_pem``: PEM root certificates the signer must chain to for
    ``trusted`` to be True; without them ``trusted`` is False and only integrity
    is checked.  No network access is made (no OCSP or time-stamp fetches).
    """
    mime = _mime(path)
    settings: dict[str, Any] = {"verify": {"verify_trust": bool(trust_anchors_pem)}}
    if trust_anchors_pem:
        settings["trust"] = {"trust_anchors": trust_anchors_pem}
    try:
        context = c2pa.Context.from_dict(settings)
        with open(path, "rb") as fh, c2pa.Reader(mime, fh, context=context) as reader:
            state = reader.get_validation_state()
            results = reader.get_validation_results() or {}
            manifest = reader.get_active_manifest()
    except c2pa.C2paError as exc:
        if "ManifestNotFound" in type(exc).__name__ or "JUMBF" in str(exc):
            return VerifyResult(status="missing", failures=(str(exc),))
        return VerifyResult(status="tampered", failures=(f"unreadable manifest: {exc}",))
    active = results.get("activeManifest", {}) if isinstance(results, dict) else {}
    failures = tuple(f"{f.get('code')}: {f.get('explanation', '')}" for f in active.get("failure", []))
    codes = {f.get("code") for f in active.get("failure", [])}
    # Trust is reported on its own; only integrity/signature failures mean tampering.
    trust_codes = {"signingCredential.untrusted", "signingCredential.ocsp.unknown"}
    tampered = bool(codes - trust_codes) or (state == "Invalid" and not codes)
    status: Literal["valid", "tampered", "missing"] = "tampered" if tampered else "valid"
    return VerifyResult(
        status=status,
        trusted=state == "Trusted",
        failures=failures,
        **_summary(manifest),
    )


def _summary(manifest: dict[str, Any] | None) -> dict[str, Any]:
    if not manifest:
        return {}
    out: dict[str, Any] = {"manifest": json.loads(json.dumps(manifest, default=str))}
    signature = manifest.get("signature_info") or {}
    out["signer"] = signature.get("common_name") or signature.get("issuer")
    for assertion in manifest.get("assertions", []):
        data = assertion.get("data") or {}
        if assertion.get("label") == PROVENANCE_LABEL:
            out["consent_refs"] = {i["name"]: i["consent_ref"] for i in data.get("identities", [])}
            out["model_pack_sha256"] = data.get("model_pack_sha256")
            out["job_id"] = data.get("job_id")
            out["content_sha256"] = data.get("content_sha256")
        if str(assertion.get("label", "")).startswith("c2pa.actions"):
            out["ai_replaced"] = any(
                a.get("digitalSourceType") == SOURCE_TYPE_AI for a in data.get("actions", [])
            )
    return out
