"""Signed sidecar credentials for deliveries that cannot embed a C2PA manifest.

Image sequences (EXR, DPX, TIFF frames) and MKV files get a JSON document beside
them (``sh010.####.exr`` -> ``sh010.credentials.json``, ``x.mkv`` ->
``x.mkv.credentials.json``) that states what an embedded manifest would (the
``c2pa.created`` / ``c2pa.edited`` actions of :func:`~pipeline.provenance.credentials.build_manifest`,
consent references, model pack hash) and binds each delivered file by its sha256::

    {"format": "recast.credentials/1",
     "claim": {"title": ..., "job_id": ..., "content": "sequence", "pattern": "sh010.####.exr",
               "digital_source_type": ".../compositeWithTrainedAlgorithmicMedia",
               "actions": [...], "identities": [...], "model_pack_sha256": ..., "adapters": {...},
               "watermark_payload": "1234abcd", "generator": {"name": "recast", "version": "0"},
               "files": {"sh010.1001.exr": {"sha256": "...", "ai_modified": true}, ...}},
     "signature": {"algorithm": "es256", "value": "<base64>", "certificate_chain": "<PEM, leaf first>"}}

The signature covers the canonical bytes of ``claim`` (:func:`canonical_claim`).  ECDSA
signatures are DER encoded, RSA signatures are PSS with MGF1 and a salt as long as the digest.

Each AI-modified frame also says so in its own header (:func:`ai_header_attributes`), so a
frame that travels without its sidecar still carries the statement.

Longer than 500 lines because the writer, the verifier (with its certificate-chain check) and
the frame-header statement are one format: the rules a verifier applies read best next to the
writer that has to satisfy them.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import re
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from types import MappingProxyType
from typing import Any, Literal

import OpenImageIO as oiio
from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.x509.oid import NameOID

from pipeline.errors import MediaError, SpecError, StorageError
from pipeline.plates.sequence import is_sequence_url, parse_sequence_url
from pipeline.provenance.config import SignerConfig
from pipeline.provenance.credentials import (
    PROVENANCE_LABEL,
    SOURCE_TYPE_AI,
    SOURCE_TYPE_COMPOSITE,
    ManifestInfo,
    VerifyResult,
    build_manifest,
    read_pem,
)
from pipeline.store import storage
from pipeline.store.hashing import sha256_url
from pipeline.video.sequence_types import SequencePattern

SIDECAR_FORMAT = "recast.credentials/1"
SIDECAR_SUFFIX = ".credentials.json"
SIDECAR_MAX_BYTES = 64 * 1024 * 1024
"""A sidecar lists about 130 bytes per frame: 64 MiB is far above any real sequence."""

AI_TEXT_PREFIX = "AI-modified:"
AI_ATTRIBUTE = "recast:aiModified"
"""The EXR header attribute (a ``string`` attribute of that exact name in the file)."""
AI_ATTRIBUTES: Mapping[str, str] = MappingProxyType(
    {
        "exr": AI_ATTRIBUTE,
        "dpx": "DocumentName",
        **dict.fromkeys(("tif", "tiff", "png", "jpg", "jpeg"), "ImageDescription"),
    }
)
"""The header attribute (as OpenImageIO names it) that states AI modification, by file extension.

- EXR: :data:`AI_ATTRIBUTE`, a custom ``string`` attribute: EXR headers take any named
  attribute, so nothing of the source's header is replaced; ``exrheader``, Nuke and OIIO show it.
- DPX: ``DocumentName``, which OIIO writes into the file header's *project name* field (200
  bytes; the text fits whole).  DPX has no free attribute: OIIO writes a fixed set of header
  fields.  The others were ruled out: ``ImageDescription`` is the 32-byte image element
  description (the text does not fit, and it does not read back), ``Software`` is the 100-byte
  creator field (too short for the text with a job id), ``Copyright`` is a legal statement a
  studio may rely on, ``dpx:SourceImageFileName`` and the film/TV header (input device, time code,
  frame rate) are what conform tools match on, and ``dpx:UserData`` is binary and may already hold
  a scanner's data.  The project name is descriptive only; time code and frame rate stay intact.
- TIFF: ``ImageDescription`` (tag 270), the standard free-text description every TIFF reader
  shows; plate TIFFs do not use it for anything a pipeline reads.  PNG and JPEG frames take the
  same attribute (OIIO writes it as a PNG ``Description`` text chunk, a JPEG comment, and EXIF).

Other formats (Cineon, which OIIO cannot write, among them) have none: :func:`ai_header_attributes`
refuses them.
"""

Content = Literal["sequence", "file"]
FileHasher = Callable[[], str | None]
"""Gives a file's sha256 (hex), or None when the file is gone."""

_HASHES: Mapping[str, type[hashes.HashAlgorithm]] = MappingProxyType(
    {
        "es256": hashes.SHA256,
        "es384": hashes.SHA384,
        "es512": hashes.SHA512,
        "ps256": hashes.SHA256,
        "ps384": hashes.SHA384,
        "ps512": hashes.SHA512,
    }
)
_CURVES: Mapping[str, str] = MappingProxyType(
    {"es256": "secp256r1", "es384": "secp384r1", "es512": "secp521r1"}
)
_SHA256 = re.compile(r"[0-9a-f]{64}")
_FRAME_NAME = re.compile(r"(?P<head>.*?)(?P<number>-?\d+)(?P<tail>\.[^.]+)")


def sidecar_url(output_url: str) -> str:
    """Where the credentials of ``output_url`` live.

    A sequence pattern (``s3://b/out/sh010/sh010.####.exr``, ``%04d``, ``@@@@``) gives
    ``<folder>/<stem>.credentials.json`` (``s3://b/out/sh010/sh010.credentials.json``), the
    stem being the name before the frame number less a trailing ``.`` or ``_``; a plain
    file gives ``<file>.credentials.json``."""
    if not is_sequence_url(output_url):
        return output_url + SIDECAR_SUFFIX
    pattern = parse_sequence_url(output_url)
    folder, sep, _ = output_url.rpartition("/")
    stem = pattern.head.rstrip("._") or "sequence"
    return f"{folder}{sep}{stem}{SIDECAR_SUFFIX}"


def canonical_claim(claim: Mapping[str, Any]) -> bytes:
    """The bytes the signature covers: sorted keys, no spaces, UTF-8."""
    return json.dumps(claim, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _pattern_of(names: Collection[str]) -> SequencePattern | None:
    """The one sequence (``head####tail``) every name belongs to, canonically spelt; None if none."""
    parts = [_FRAME_NAME.fullmatch(name) for name in names]
    if not parts or any(p is None for p in parts):
        return None
    matches = [p for p in parts if p is not None]
    if len({(m["head"], m["tail"]) for m in matches}) != 1:
        return None
    padding = min(len(m["number"].lstrip("-")) for m in matches)
    first = matches[0]
    pattern = SequencePattern(
        url=f"{first['head']}{'#' * padding}{first['tail']}",
        directory=".",
        head=first["head"],
        tail=first["tail"],
        padding=padding,
    )
    if any(pattern.frame_name(int(m["number"])) != m.string for m in matches):
        return None
    return pattern


def _frame_number(pattern: SequencePattern, name: str) -> int | None:
    """The frame number of ``name`` in ``pattern`` (canonical spelling only), else None."""
    if not (name.startswith(pattern.head) and name.endswith(pattern.tail)):
        return None
    digits = name[len(pattern.head) : len(name) - len(pattern.tail)]
    if not re.fullmatch(r"-?\d+", digits):
        return None
    number = int(digits)
    return number if pattern.frame_name(number) == name else None


def _load_chain(pem: str, where: str) -> list[x509.Certificate]:
    try:
        chain = x509.load_pem_x509_certificates(pem.encode())
    except ValueError:
        raise SpecError("signer", f"{where} holds no readable PEM certificate chain") from None
    return chain


def _load_key(config: SignerConfig) -> Any:
    pem = read_pem(config.private_key_url, "signer.private_key_url", "PRIVATE KEY")
    try:
        return serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        # The library's message is not passed on: nothing of the key may reach an error.
        raise SpecError(
            "signer", f"{config.private_key_url} holds no readable unencrypted PKCS#8 private key"
        ) from None


def _public_der(key: Any) -> bytes:
    return bytes(
        key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


def _sign(key: Any, algorithm: str, data: bytes) -> bytes:
    """``data`` signed with ``key`` as ``algorithm`` says; SpecError when the key is of another kind."""
    if (
        algorithm in _CURVES
        and isinstance(key, ec.EllipticCurvePrivateKey)
        and key.curve.name == _CURVES[algorithm]
    ):
        return key.sign(data, ec.ECDSA(_HASHES[algorithm]()))
    if algorithm.startswith("ps") and isinstance(key, rsa.RSAPrivateKey):
        digest = _HASHES[algorithm]()
        return key.sign(data, padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size), digest)
    if algorithm == "ed25519" and isinstance(key, ed25519.Ed25519PrivateKey):
        return key.sign(data)
    wanted = {"es": f"an EC {_CURVES.get(algorithm, '')} key", "ps": "an RSA key"}.get(
        algorithm[:2], "an Ed25519 key"
    )
    raise SpecError("signer", f"{algorithm} needs {wanted}; the private key is of another kind")


def _verifies(public_key: Any, algorithm: str, signature: bytes, data: bytes) -> bool:
    try:
        if algorithm in _CURVES and isinstance(public_key, ec.EllipticCurvePublicKey):
            if public_key.curve.name != _CURVES[algorithm]:
                return False
            public_key.verify(signature, data, ec.ECDSA(_HASHES[algorithm]()))
        elif algorithm.startswith("ps") and algorithm in _HASHES and isinstance(public_key, rsa.RSAPublicKey):
            digest = _HASHES[algorithm]()
            pss = padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size)
            public_key.verify(signature, data, pss, digest)
        elif algorithm == "ed25519" and isinstance(public_key, ed25519.Ed25519PublicKey):
            public_key.verify(signature, data)
        else:
            return False
    except InvalidSignature:
        return False
    return True


def build_sidecar(
    info: ManifestInfo,
    *,
    files: Mapping[str, str],
    modified: Collection[str],
    signer: SignerConfig,
    content: Content,
) -> bytes:
    """The signed sidecar (UTF-8 JSON) for the delivered ``files``.

    ``files``: base name (``sh010.1001.exr``) -> sha256 (hex) of every delivered file: every
    frame of one sequence (``content="sequence"``) or the one file (``content="file"``).
    ``modified``: the names among them whose pixels the AI changed.  The key and chain are read
    from ``signer``; SpecError (``signer``...) when they are unreadable or do not belong together,
    never quoting key material.  ValueError for ``files`` that do not fit ``content``.
    """
    if not files:
        raise ValueError("no files to cover")
    bad = sorted(n for n in files if "/" in n or "\\" in n or n in ("", ".", ".."))
    if bad:
        raise ValueError(f"file names must be base names, not {bad[:3]}")
    digests = {n: d.lower() for n, d in files.items()}
    if not all(_SHA256.fullmatch(d) for d in digests.values()):
        raise ValueError("every sha256 must be 64 hex digits")
    changed = set(modified)
    if unknown := sorted(changed - set(files)):
        raise ValueError(f"modified files not among the files: {unknown[:3]}")
    pattern = _pattern_of(list(files)) if content == "sequence" else None
    if content == "sequence" and pattern is None:
        raise ValueError("the files do not form one frame sequence (name.NNNN.ext, one padding)")
    if content == "file" and len(files) != 1:
        raise ValueError(f"content 'file' covers one file, not {len(files)}")

    manifest = build_manifest(info)
    assertions = {a["label"]: a["data"] for a in manifest["assertions"]}
    claim: dict[str, Any] = {
        "title": manifest["title"],
        "content": content,
        "digital_source_type": SOURCE_TYPE_COMPOSITE,
        "actions": assertions["c2pa.actions.v2"]["actions"],
        **assertions[PROVENANCE_LABEL],
        "generator": {"name": info.generator, "version": info.generator_version},
        "files": {n: {"sha256": digests[n], "ai_modified": n in changed} for n in sorted(digests)},
    }
    if pattern is not None:
        claim["pattern"] = pattern.url

    chain_pem = read_pem(signer.certificate_chain_url, "signer.certificate_chain_url", "CERTIFICATE")
    chain = _load_chain(chain_pem, signer.certificate_chain_url)
    key = _load_key(signer)
    if _public_der(key.public_key()) != _public_der(chain[0].public_key()):
        raise SpecError(
            "signer",
            f"the private key does not match the first certificate of {signer.certificate_chain_url}",
        )
    value = _sign(key, signer.algorithm, canonical_claim(claim))
    document = {
        "format": SIDECAR_FORMAT,
        "claim": claim,
        "signature": {
            "algorithm": signer.algorithm,
            "value": base64.b64encode(value).decode(),
            "certificate_chain": chain_pem,
        },
    }
    return (json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parse(document: bytes) -> tuple[dict[str, Any], str, bytes, str] | str:
    """(claim, algorithm, signature, chain PEM) of ``document``, or why it is no sidecar."""
    try:
        data = json.loads(document.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        return f"the credentials are not JSON ({type(exc).__name__} at {getattr(exc, 'pos', '?')})"
    if not isinstance(data, dict) or data.get("format") != SIDECAR_FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        return f"the credentials are not {SIDECAR_FORMAT} (format {found!r})"
    claim, sig = data.get("claim"), data.get("signature")
    if not isinstance(claim, dict) or not isinstance(sig, dict):
        return "the credentials hold no claim or no signature block"
    algorithm, value, chain = sig.get("algorithm"), sig.get("value"), sig.get("certificate_chain")
    if not (isinstance(algorithm, str) and isinstance(value, str) and isinstance(chain, str)):
        return "the signature block lacks its algorithm, value or certificate chain"
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return "the signature value is not base64"
    files = claim.get("files")
    if not isinstance(files, dict) or not files:
        return "the claim lists no files"
    for name, entry in files.items():
        if "/" in name or "\\" in name or name in ("", ".", ".."):
            return f"the claim lists a file that is not a base name: {name!r}"
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("sha256"), str)
            and _SHA256.fullmatch(entry["sha256"])
            and isinstance(entry.get("ai_modified"), bool)
        ):
            return f"the claim's entry for {name} is malformed"
    return claim, algorithm, raw, chain


def _common_name(cert: x509.Certificate) -> str:
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else cert.subject.rfc4514_string()


def _valid_at(cert: x509.Certificate, now: dt.datetime) -> bool:
    return cert.not_valid_before_utc <= now <= cert.not_valid_after_utc


def _issued_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature, UnsupportedAlgorithm):
        return False
    return True


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def _untrusted(
    chain: list[x509.Certificate], anchors: list[x509.Certificate], now: dt.datetime
) -> str | None:
    """Why ``chain`` (leaf first) does not chain to one of ``anchors`` at ``now``; None when it does.

    Each certificate must be within its validity dates and carry the signature of the next one
    up: an intermediate of the chain (a CA by its basic constraints) or, at the end, an anchor."""
    cert, rest = chain[0], list(chain[1:])
    try:
        usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
        if not usage.digital_signature:
            return f"the signing certificate {_common_name(cert)!r} is not for digital signatures"
    except x509.ExtensionNotFound:
        pass
    anchor_ders = {a.public_bytes(serialization.Encoding.DER) for a in anchors}
    for _ in range(len(chain)):
        if not _valid_at(cert, now):
            return f"certificate {_common_name(cert)!r} is outside its validity dates"
        if cert.public_bytes(serialization.Encoding.DER) in anchor_ders:
            return None
        for anchor in anchors:
            if anchor.subject == cert.issuer and _issued_by(cert, anchor):
                return (
                    None if _valid_at(anchor, now) else f"trust anchor {_common_name(anchor)!r} has expired"
                )
        issuer = next(
            (c for c in rest if c.subject == cert.issuer and _is_ca(c) and _issued_by(cert, c)), None
        )
        if issuer is None:
            return f"the signer {_common_name(chain[0])!r} does not chain to the trust anchors"
        rest.remove(issuer)
        cert = issuer
    return f"the signer {_common_name(chain[0])!r} does not chain to the trust anchors"


def _summary(claim: Mapping[str, Any], signer: str | None) -> dict[str, Any]:
    """The VerifyResult fields the claim states (tolerant of a claim of the wrong shape)."""
    identities = claim.get("identities")
    refs = {
        str(i.get("name")): str(i.get("consent_ref"))
        for i in (identities if isinstance(identities, list) else [])
        if isinstance(i, dict)
    }
    actions = claim.get("actions")
    ai = any(
        isinstance(a, dict) and a.get("digitalSourceType") == SOURCE_TYPE_AI
        for a in (actions if isinstance(actions, list) else [])
    )
    model, job = claim.get("model_pack_sha256"), claim.get("job_id")
    out = {
        "consent_refs": refs,
        "model_pack_sha256": model if isinstance(model, str) else None,
        "job_id": job if isinstance(job, str) else None,
        "ai_replaced": ai,
        "signer": signer,
        "manifest": json.loads(json.dumps(claim)),
    }
    content = claim.get("content_sha256")
    if isinstance(content, str) and "content_sha256" in VerifyResult.model_fields:
        out["content_sha256"] = content
    return out


def _file_failures(listed: Mapping[str, Any], files: Mapping[str, FileHasher], *, threads: int) -> list[str]:
    """A failure per listed file that is missing or whose sha256 is not the listed one."""
    names = sorted(listed)

    def digest(name: str) -> str | None:
        hasher = files.get(name)
        return None if hasher is None else hasher()

    with ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="sidecar-hash") as pool:
        found = dict(zip(names, pool.map(digest, names), strict=True))
    failures = []
    for name in names:
        if found[name] is None:
            failures.append(f"{name}: missing (listed in the credentials)")
        elif found[name] != listed[name]["sha256"]:
            failures.append(f"{name}: changed after signing (sha256 differs from the credentials)")
    return failures


def _extra_files(claim: Mapping[str, Any], names: Collection[str], also: SequencePattern | None) -> list[str]:
    """Files among ``names`` that belong to the claim's sequence (or to ``also``) but are not listed."""
    patterns = [also] if also is not None else []
    if claim.get("content") == "sequence" and isinstance(claim.get("pattern"), str):
        try:
            patterns.append(parse_sequence_url(claim["pattern"]))
        except MediaError:
            pass
    listed = claim["files"]
    return [
        f"{name}: not covered by the credentials"
        for name in sorted(names)
        if name not in listed and any(_frame_number(p, name) is not None for p in patterns)
    ]


def verify_sidecar(
    document: bytes,
    *,
    files: Mapping[str, FileHasher],
    pattern: SequencePattern | None = None,
    trust_anchors_pem: str | None = None,
    now: dt.datetime | None = None,
    threads: int = 4,
) -> VerifyResult:
    """Check a sidecar against the files beside it; no I/O but what ``files`` does.

    ``files``: every plain file of the sidecar's folder, by base name, each with a function that
    hashes it (called only for the files the claim lists).  A listed file that is absent or whose
    sha256 differs, and a file that belongs to the claim's sequence (or to ``pattern``, the
    sequence the caller asked about) but is not listed, make the result ``tampered``, as does a
    signature that does not verify or a document that is no sidecar.  ``trusted``: the signing
    certificate chains to one of ``trust_anchors_pem`` at ``now`` (default: the current time).
    """
    parsed = _parse(document)
    if isinstance(parsed, str):
        return VerifyResult(status="tampered", failures=(parsed,))
    claim, algorithm, signature, chain_pem = parsed
    try:
        chain = x509.load_pem_x509_certificates(chain_pem.encode())
    except ValueError:
        chain = []
    failures: list[str] = []
    signer = _common_name(chain[0]) if chain else None
    if not chain:
        failures.append("the certificate chain of the credentials is unreadable")
    elif not _verifies(chain[0].public_key(), algorithm, signature, canonical_claim(claim)):
        failures.append(
            f"the claim's {algorithm} signature does not verify with the signing certificate "
            "(the credentials were edited or signed with another key)"
        )
    failures += _file_failures(claim["files"], files, threads=threads)
    failures += _extra_files(claim, list(files), pattern)
    status: Literal["valid", "tampered"] = "tampered" if failures else "valid"
    trusted = False
    if status == "valid" and trust_anchors_pem:
        try:
            anchors = x509.load_pem_x509_certificates(trust_anchors_pem.encode())
        except ValueError:
            anchors = []
        why = (
            _untrusted(chain, anchors, now or dt.datetime.now(dt.UTC))
            if anchors
            else "no readable trust anchor"
        )
        trusted = why is None
        if why is not None:
            failures.append(f"untrusted: {why}")
    return VerifyResult(status=status, trusted=trusted, failures=tuple(failures), **_summary(claim, signer))


def _hasher(url: str) -> FileHasher:
    def digest() -> str | None:
        try:
            return sha256_url(url)
        except StorageError as exc:
            if exc.reason.startswith("not found"):
                return None
            raise

    return digest


def verify_sidecar_url(
    url: str,
    *,
    trust_anchors_pem: str | None = None,
    now: dt.datetime | None = None,
    threads: int = 4,
) -> tuple[str, VerifyResult]:
    """Verify the delivery at ``url`` against its sidecar; returns (sidecar URL, result).

    ``url``: a sequence pattern (``out/sh010/sh010.####.exr``), the sidecar itself
    (``*.credentials.json``) or a plain file (``x.mkv``, whose sidecar is ``x.mkv.credentials.json``);
    local or in any store.  No sidecar: status ``missing``.  StorageError for a sidecar or frame
    that exists but cannot be read.
    """
    pattern = parse_sequence_url(url) if is_sequence_url(url) else None
    sidecar = url if url.endswith(SIDECAR_SUFFIX) else sidecar_url(url)
    try:
        document = storage.read_bytes(sidecar, max_bytes=SIDECAR_MAX_BYTES)
    except StorageError as exc:
        if exc.reason.startswith("not found"):
            return sidecar, VerifyResult(status="missing", failures=(f"no credentials sidecar at {sidecar}",))
        raise
    folder, sep, _ = sidecar.rpartition("/")
    folder = folder if sep else "."
    names = storage.listdir_stamps(folder)
    files = {name: _hasher(storage.join(folder, name)) for name in names}
    result = verify_sidecar(
        document, files=files, pattern=pattern, trust_anchors_pem=trust_anchors_pem, now=now, threads=threads
    )
    return sidecar, result


def ai_text(job_id: str) -> str:
    """The statement an AI-modified frame carries in its header."""
    return (
        f"{AI_TEXT_PREFIX} faces replaced by a trained AI model (IPTC trainedAlgorithmicMedia); "
        f"Recast job {job_id}"
    )


def ai_header_attributes(ext: str, *, job_id: str) -> dict[str, str]:
    """The header attribute(s) for an AI-modified frame of extension ``ext`` (``exr``, ``.dpx``,
    ``tif``...), for ``write_plate(..., attributes=...)``; see :data:`AI_ATTRIBUTES`.
    MediaError for a format without one."""
    key = ext.lower().lstrip(".")
    if key not in AI_ATTRIBUTES:
        raise MediaError(
            f".{key}", f"no AI header attribute for this format (only {', '.join(AI_ATTRIBUTES)})"
        )
    return {AI_ATTRIBUTES[key]: ai_text(job_id)}


def read_ai_attribute(path: str) -> str | None:
    """The AI statement in the header of the local frame ``path``, or None when it has none
    (a DPX project name or TIFF description that is not the statement does not count).
    MediaError when the file cannot be opened."""
    key = path.rpartition(".")[2].lower()
    if key not in AI_ATTRIBUTES:
        return None
    inp = oiio.ImageInput.open(path)
    if inp is None:
        raise MediaError(path, f"cannot open ({oiio.geterror()})")
    try:
        value = inp.spec().getattribute(AI_ATTRIBUTES[key])
    finally:
        inp.close()
    return value if isinstance(value, str) and value.startswith(AI_TEXT_PREFIX) else None
