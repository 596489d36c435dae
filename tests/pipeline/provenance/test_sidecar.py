"""Signed sidecar credentials for image sequences and MKV files, and the AI statement in frame headers.

Every frame is a real EXR (half), DPX (10-bit) or TIFF (16-bit) file written with OpenImageIO,
signed by a throw-away test CA (:func:`tests.pipeline.provenance.provenance_helpers.make_test_ca`).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import OpenImageIO as oiio
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import NameOID

from pipeline.errors import MediaError, SpecError
from pipeline.plates.frames import write_plate
from pipeline.plates.sequence import parse_sequence_url
from pipeline.provenance.credentials import SOURCE_TYPE_AI, SOURCE_TYPE_COMPOSITE, SignerConfig
from pipeline.provenance.sidecar import (
    AI_ATTRIBUTE,
    AI_ATTRIBUTES,
    SIDECAR_FORMAT,
    ai_header_attributes,
    ai_text,
    build_sidecar,
    canonical_claim,
    read_ai_attribute,
    sidecar_url,
    verify_sidecar,
    verify_sidecar_url,
)
from pipeline.store import storage
from pipeline.store.hashing import sha256_file
from tests.pipeline.provenance.provenance_helpers import INFO, MODEL_HASH, make_test_ca
from tests.plates import FORMATS, write_sequence

SIZE = (256, 144)
KINDS = {"exr": FORMATS["exr-half-piz"], "dpx": FORMATS["dpx-10"], "tiff": FORMATS["tiff-16"]}
MODIFIED = (1002, 1003)


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_test_ca(tmp_path_factory.mktemp("sidecar-ca"))


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_test_ca(tmp_path_factory.mktemp("sidecar-other-ca"), "Other Studio")


def _config(ca: dict[str, Path], algorithm: Any = "es256") -> SignerConfig:
    return SignerConfig(
        certificate_chain_url=str(ca["chain"]), private_key_url=str(ca["key"]), algorithm=algorithm
    )


def _deliver(folder: Path, ca: dict[str, Path], kind: str = "exr", name: str = "sh010") -> str:
    """Frames 1001-1004 of a real plate in ``folder`` and their signed sidecar; returns the pattern."""
    pattern = write_sequence(folder, name, count=4, size=SIZE, **KINDS[kind])
    seq = parse_sequence_url(pattern)
    files = {seq.frame_name(n): sha256_file(seq.frame_url(n)) for n in range(1001, 1005)}
    modified = {seq.frame_name(n) for n in MODIFIED}
    document = build_sidecar(INFO, files=files, modified=modified, signer=_config(ca), content="sequence")
    storage.write_bytes(sidecar_url(pattern), document)
    return pattern


def _flip_pixel_byte(path: str) -> None:
    """One byte of the last pixel data block (the end of the file, after every header) changed."""
    data = bytearray(Path(path).read_bytes())
    data[-64] ^= 0x01
    Path(path).write_bytes(bytes(data))


def test_sidecar_url() -> None:
    assert sidecar_url("s3://b/out/sh010/sh010.####.exr") == "s3://b/out/sh010/sh010.credentials.json"
    assert sidecar_url("/out/sh010/sh010_%04d.dpx") == "/out/sh010/sh010.credentials.json"
    assert sidecar_url("out/sh020.@@@@.tif") == "out/sh020.credentials.json"
    assert sidecar_url("sh030_v002.####.exr") == "sh030_v002.credentials.json"
    assert sidecar_url("s3://b/out/sh010.mkv") == "s3://b/out/sh010.mkv.credentials.json"


@pytest.mark.parametrize("kind", KINDS)
def test_sequence_verifies_trusted_with_the_root_and_untrusted_without(tmp_path, ca, kind) -> None:
    pattern = _deliver(tmp_path / "out", ca, kind)
    sidecar, result = verify_sidecar_url(pattern, trust_anchors_pem=ca["root"].read_text())
    assert sidecar == str(tmp_path / "out" / "sh010.credentials.json")
    assert result.status == "valid" and result.trusted and result.failures == (), result.failures
    assert result.signer == "Recast Test Signer"
    assert result.job_id == "nightfall-7" and result.model_pack_sha256 == MODEL_HASH
    assert result.consent_refs == INFO.identities and result.ai_replaced
    claim = result.manifest
    assert claim is not None and claim["digital_source_type"] == SOURCE_TYPE_COMPOSITE
    ext = pattern.rpartition(".")[2]
    assert claim["pattern"] == f"sh010.####.{ext}" and claim["content"] == "sequence"
    assert {n: e["ai_modified"] for n, e in claim["files"].items()} == {
        f"sh010.{n}.{ext}": n in MODIFIED for n in range(1001, 1005)
    }
    edited = [a for a in claim["actions"] if a["action"] == "c2pa.edited"]
    assert edited[0]["digitalSourceType"] == SOURCE_TYPE_AI
    assert edited[0]["description"] == "Faces replaced by a trained AI model (face swap)."
    assert claim["watermark_payload"] == "1234abcd" and claim["adapters"] == INFO.adapters

    untrusted = verify_sidecar_url(pattern)[1]
    assert untrusted.status == "valid" and not untrusted.trusted and untrusted.failures == ()
    # The sidecar itself names the same delivery.
    assert verify_sidecar_url(sidecar, trust_anchors_pem=ca["root"].read_text())[1].trusted


def test_the_document_layout_and_no_key_material(tmp_path, ca) -> None:
    pattern = _deliver(tmp_path, ca)
    raw = Path(sidecar_url(pattern)).read_bytes()
    document = json.loads(raw)
    assert document["format"] == SIDECAR_FORMAT
    assert set(document) == {"format", "claim", "signature"}
    assert document["signature"]["algorithm"] == "es256"
    assert document["signature"]["certificate_chain"] == ca["chain"].read_text()
    assert (
        canonical_claim(document["claim"])
        == json.dumps(document["claim"], sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    )
    key_body = ca["key"].read_text().splitlines()[1]
    assert key_body.encode() not in raw


def test_one_changed_pixel_byte_is_tampering_naming_the_frame(tmp_path, ca) -> None:
    pattern = _deliver(tmp_path, ca)
    _flip_pixel_byte(pattern.replace("####", "1003"))
    result = verify_sidecar_url(pattern, trust_anchors_pem=ca["root"].read_text())[1]
    assert result.status == "tampered" and not result.trusted
    assert result.failures == ("sh010.1003.exr: changed after signing (sha256 differs from the credentials)",)


def test_a_deleted_frame_is_tampering(tmp_path, ca) -> None:
    pattern = _deliver(tmp_path, ca)
    os.remove(pattern.replace("####", "1002"))
    result = verify_sidecar_url(pattern, trust_anchors_pem=ca["root"].read_text())[1]
    assert result.status == "tampered"
    assert result.failures == ("sh010.1002.exr: missing (listed in the credentials)",)


def test_an_extra_frame_is_tampering(tmp_path, ca) -> None:
    pattern = _deliver(tmp_path, ca)
    shutil.copyfile(pattern.replace("####", "1004"), pattern.replace("####", "1005"))
    # Files beside it that are not frames of the sequence do not count.
    (tmp_path / "sh010.notes.txt").write_text("grade notes")
    shutil.copyfile(pattern.replace("####", "1004"), tmp_path / "sh010_matte.1005.exr")
    result = verify_sidecar_url(pattern, trust_anchors_pem=ca["root"].read_text())[1]
    assert result.status == "tampered"
    assert result.failures == ("sh010.1005.exr: not covered by the credentials",)
    # Also when the sidecar itself is named.
    assert verify_sidecar_url(sidecar_url(pattern))[1].failures == result.failures


def test_a_frame_of_the_named_pattern_outside_the_sidecar(tmp_path, ca) -> None:
    """Asked about ``sh010.####.dpx`` while the sidecar beside it covers the EXR frames."""
    pattern = _deliver(tmp_path, ca)
    write_sequence(tmp_path, "sh010", count=1, size=SIZE, **KINDS["dpx"])
    result = verify_sidecar_url(str(tmp_path / "sh010.####.dpx"))[1]
    assert result.status == "tampered"
    assert result.failures == ("sh010.1001.dpx: not covered by the credentials",)
    assert verify_sidecar_url(pattern)[1].status == "valid"


def test_an_edited_claim_is_tampering(tmp_path, ca) -> None:
    pattern = _deliver(tmp_path, ca)
    path = Path(sidecar_url(pattern))
    document = json.loads(path.read_bytes())
    document["claim"]["job_id"] = "someone-else"
    path.write_text(json.dumps(document))
    result = verify_sidecar_url(pattern, trust_anchors_pem=ca["root"].read_text())[1]
    assert result.status == "tampered" and not result.trusted
    assert len(result.failures) == 1 and "signature does not verify" in result.failures[0]
    # A frame marked as not AI-modified is an edit too.
    path = Path(sidecar_url(_deliver(tmp_path / "b", ca)))
    document = json.loads(path.read_bytes())
    document["claim"]["files"]["sh010.1002.exr"]["ai_modified"] = False
    path.write_text(json.dumps(document))
    assert verify_sidecar_url(str(path))[1].status == "tampered"


def test_signed_by_another_ca_is_valid_but_untrusted(tmp_path, ca, other_ca) -> None:
    pattern = _deliver(tmp_path, other_ca)
    result = verify_sidecar_url(pattern, trust_anchors_pem=ca["root"].read_text())[1]
    assert result.status == "valid" and not result.trusted
    assert result.signer == "Other Studio Signer"
    assert result.failures == (
        "untrusted: the signer 'Other Studio Signer' does not chain to the trust anchors",
    )
    # Expired by the time it is checked: untrusted, still intact.
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=60)
    expired = verify_sidecar_url(pattern, trust_anchors_pem=other_ca["root"].read_text(), now=later)[1]
    assert expired.status == "valid" and not expired.trusted
    assert "outside its validity dates" in expired.failures[0]


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b'{"format": "something/2", "claim": {}}', "not recast.credentials/1"),
        (b"[1, 2]", "not recast.credentials/1"),
        (
            b'{"format": "recast.credentials/1", "claim": {"files": {}}, "signature": {}}',
            "lacks its algorithm",
        ),
    ],
)
def test_unreadable_documents_are_tampering(tmp_path, ca, content, why) -> None:
    pattern = _deliver(tmp_path, ca)
    Path(sidecar_url(pattern)).write_bytes(content)
    result = verify_sidecar_url(pattern)[1]
    assert result.status == "tampered" and why in result.failures[0], result.failures


def test_hostile_names_and_values_in_a_claim(tmp_path, ca) -> None:
    pattern = _deliver(tmp_path, ca)
    document = json.loads(Path(sidecar_url(pattern)).read_bytes())
    document["claim"]["files"]["../../etc/passwd"] = {"sha256": "0" * 64, "ai_modified": False}
    result = verify_sidecar(json.dumps(document).encode(), files={})
    assert result.status == "tampered" and "not a base name" in result.failures[0]
    document["claim"]["files"].pop("../../etc/passwd")
    document["signature"]["value"] = "not base64!"
    assert "not base64" in verify_sidecar(json.dumps(document).encode(), files={}).failures[0]


def test_no_sidecar_is_missing(tmp_path) -> None:
    pattern = write_sequence(tmp_path, "sh010", count=2, size=SIZE)
    sidecar, result = verify_sidecar_url(pattern)
    assert result.status == "missing" and sidecar.endswith("sh010.credentials.json")


def test_a_file_delivery(tmp_path, ca) -> None:
    """An MKV file: ``x.mkv.credentials.json`` covers it alone."""
    from tests.clips import ClipSpec, write_clip

    mkv = tmp_path / "sh010.mkv"
    write_clip(mkv, ClipSpec(frames=12))
    document = build_sidecar(
        INFO, files={mkv.name: sha256_file(str(mkv))}, modified={mkv.name}, signer=_config(ca), content="file"
    )
    storage.write_bytes(sidecar_url(str(mkv)), document)
    (tmp_path / "other.mkv").write_bytes(mkv.read_bytes())  # a neighbour is no concern of this sidecar
    result = verify_sidecar_url(str(mkv), trust_anchors_pem=ca["root"].read_text())[1]
    assert result.status == "valid" and result.trusted, result.failures
    _flip_pixel_byte(str(mkv))
    assert verify_sidecar_url(str(mkv))[1].failures == (
        "sh010.mkv: changed after signing (sha256 differs from the credentials)",
    )


def test_build_refuses_what_does_not_fit(tmp_path, ca, other_ca) -> None:
    digest = "ab" * 32
    config = _config(ca)
    with pytest.raises(ValueError, match="one frame sequence"):
        build_sidecar(
            INFO,
            files={"a.1001.exr": digest, "b.1002.exr": digest},
            modified=(),
            signer=config,
            content="sequence",
        )
    with pytest.raises(ValueError, match="base names"):
        build_sidecar(INFO, files={"x/a.1001.exr": digest}, modified=(), signer=config, content="sequence")
    with pytest.raises(ValueError, match="not among the files"):
        build_sidecar(
            INFO, files={"a.1001.exr": digest}, modified={"a.1002.exr"}, signer=config, content="sequence"
        )
    with pytest.raises(ValueError, match="covers one file"):
        build_sidecar(
            INFO, files={"a.mkv": digest, "b.mkv": digest}, modified=(), signer=config, content="file"
        )
    key_body = ca["key"].read_text().splitlines()[1]
    mismatched = SignerConfig(certificate_chain_url=str(other_ca["chain"]), private_key_url=str(ca["key"]))
    with pytest.raises(SpecError, match="does not match") as caught:
        build_sidecar(INFO, files={"a.mkv": digest}, modified=(), signer=mismatched, content="file")
    assert key_body not in str(caught.value)
    with pytest.raises(SpecError, match="es384 needs an EC secp384r1 key") as caught:
        build_sidecar(INFO, files={"a.mkv": digest}, modified=(), signer=_config(ca, "es384"), content="file")
    assert key_body not in str(caught.value)
    broken = tmp_path / "broken.key"
    broken.write_text("-----BEGIN PRIVATE KEY-----\nAAAA" + key_body[4:] + "\n-----END PRIVATE KEY-----\n")
    bad_key = SignerConfig(certificate_chain_url=str(ca["chain"]), private_key_url=str(broken))
    with pytest.raises(SpecError) as caught:
        build_sidecar(INFO, files={"a.mkv": digest}, modified=(), signer=bad_key, content="file")
    assert caught.value.field == "signer" and key_body[4:] not in str(caught.value)
    no_key = SignerConfig(certificate_chain_url=str(ca["chain"]), private_key_url=str(ca["chain"]))
    with pytest.raises(SpecError, match="no PEM private key"):
        build_sidecar(INFO, files={"a.mkv": digest}, modified=(), signer=no_key, content="file")


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _cert(
    subject: str, key: Any, *, issuer: tuple[str, Any] | None = None, ca: bool = False
) -> x509.Certificate:
    """A certificate for ``key``, issued by ``issuer`` (name, key) or self-signed."""
    now = dt.datetime.now(dt.UTC)
    issuer_name, issuer_key = issuer or (subject, key)
    algorithm = None if isinstance(issuer_key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .sign(issuer_key, algorithm)
    )


def _write_signer(folder: Path, key: Any, *certs: x509.Certificate) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    chain, key_path = folder / "chain.pem", folder / "signer.key"
    chain.write_bytes(b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return {"chain": chain, "key": key_path}


@pytest.mark.parametrize(
    ("algorithm", "make_key"),
    [
        ("es384", lambda: ec.generate_private_key(ec.SECP384R1())),
        ("es512", lambda: ec.generate_private_key(ec.SECP521R1())),
        ("ps256", lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)),
        ("ed25519", ed25519.Ed25519PrivateKey.generate),
    ],
)
def test_every_algorithm_signs_and_verifies(tmp_path, algorithm, make_key) -> None:
    """A self-signed signing certificate given as its own trust anchor is trusted."""
    key = make_key()
    cert = _cert("Self Signer", key)
    paths = _write_signer(tmp_path / "ca", key, cert)
    pattern = write_sequence(tmp_path / "out", "sh010", count=2, size=SIZE)
    seq = parse_sequence_url(pattern)
    files = {seq.frame_name(n): sha256_file(seq.frame_url(n)) for n in (1001, 1002)}
    document = build_sidecar(
        INFO, files=files, modified=set(files), signer=_config(paths, algorithm), content="sequence"
    )
    assert json.loads(document)["signature"]["algorithm"] == algorithm
    storage.write_bytes(sidecar_url(pattern), document)
    anchor = cert.public_bytes(serialization.Encoding.PEM).decode()
    result = verify_sidecar_url(pattern, trust_anchors_pem=anchor)[1]
    assert result.status == "valid" and result.trusted, result.failures
    # The algorithm named in the document is the one checked: another one does not verify.
    edited = json.loads(document)
    edited["signature"]["algorithm"] = "es256" if algorithm != "es256" else "es384"
    storage.write_bytes(sidecar_url(pattern), json.dumps(edited).encode())
    assert verify_sidecar_url(pattern)[1].status == "tampered"


def test_trust_through_an_intermediate(tmp_path) -> None:
    root_key, mid_key, leaf_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    root = _cert("Studio Root", root_key, ca=True)
    mid = _cert("Studio Intermediate", mid_key, issuer=("Studio Root", root_key), ca=True)
    leaf = _cert("Studio Signer", leaf_key, issuer=("Studio Intermediate", mid_key))
    anchor = root.public_bytes(serialization.Encoding.PEM).decode()
    pattern = write_sequence(tmp_path / "out", "sh010", count=2, size=SIZE)
    seq = parse_sequence_url(pattern)
    files = {seq.frame_name(n): sha256_file(seq.frame_url(n)) for n in (1001, 1002)}

    def check(*chain: x509.Certificate) -> Any:
        paths = _write_signer(tmp_path / "ca", leaf_key, *chain)
        document = build_sidecar(INFO, files=files, modified=(), signer=_config(paths), content="sequence")
        return verify_sidecar(
            document, files={n: (lambda d=d: d) for n, d in files.items()}, trust_anchors_pem=anchor
        )

    assert check(leaf, mid).trusted
    assert not check(leaf).trusted  # the intermediate left out: no path to the root
    # An "intermediate" that is no CA cannot vouch for the signer, whoever signed it.
    not_ca = _cert("Studio Intermediate", mid_key, issuer=("Studio Root", root_key), ca=False)
    result = check(leaf, not_ca)
    assert result.status == "valid" and not result.trusted, result.failures


def _read(path: str) -> tuple[np.ndarray, dict[str, Any], Any]:
    inp = oiio.ImageInput.open(path)
    assert inp is not None, oiio.geterror()
    spec = oiio.ImageSpec(inp.spec())
    pixels = inp.read_image(0, 0, 0, spec.nchannels, spec.format)
    inp.close()
    return pixels, {a.name: a.value for a in spec.extra_attribs}, spec


KEPT = {
    "exr": ("smpte:TimeCode", "FramesPerSecond", "plate:camera", "colorspace", "compression"),
    "dpx": ("smpte:TimeCode", "dpx:TimeCode", "dpx:FrameRate", "oiio:BitsPerSample", "Software"),
    "tiff": ("Artist", "compression", "oiio:BitsPerSample"),
}


@pytest.mark.parametrize("kind", KINDS)
def test_write_plate_adds_the_ai_statement_and_keeps_the_header(tmp_path, kind) -> None:
    pattern = write_sequence(tmp_path / "src", "sh010", count=1, size=SIZE, **KINDS[kind])
    source = pattern.replace("####", "1001")
    pixels, src_attrs, spec = _read(source)
    if kind == "tiff":  # plate TIFFs carry no time code: a header field of the source's own
        spec.attribute("Artist", "Scan dept.")
        src_attrs["Artist"] = "Scan dept."
    ext = source.rpartition(".")[2]
    attributes = ai_header_attributes(ext, job_id="nightfall-7")
    assert attributes == {AI_ATTRIBUTES[ext]: ai_text("nightfall-7")}
    out = str(tmp_path / "out" / f"sh010.1001.{ext}")
    write_plate(out, pixels, spec, attributes=attributes)
    back, attrs, _ = _read(out)
    assert np.array_equal(back.view(np.uint8), pixels.view(np.uint8))
    assert read_ai_attribute(out) == ai_text("nightfall-7")
    assert "trainedAlgorithmicMedia" in ai_text("x") and "nightfall-7" in attrs[AI_ATTRIBUTES[ext]]
    for name in KEPT[kind]:
        assert attrs.get(name) == src_attrs.get(name) is not None, name
    assert read_ai_attribute(source) is None


@pytest.mark.parametrize("ext", ["png", "jpg"])
def test_eight_bit_frames_carry_the_statement_too(tmp_path, ext) -> None:
    spec = oiio.ImageSpec(*SIZE, 3, oiio.UINT8)
    spec.attribute("Artist", "Scan dept.")
    pixels = np.random.default_rng(0).integers(0, 255, (SIZE[1], SIZE[0], 3), dtype=np.uint8)
    out = str(tmp_path / f"sh010.1001.{ext}")
    write_plate(out, pixels, spec, attributes=ai_header_attributes(ext, job_id="j1"))
    assert read_ai_attribute(out) == ai_text("j1")
    assert _read(out)[1]["Artist"] == "Scan dept."


def test_the_exr_statement_is_a_string_attribute_of_its_own(tmp_path) -> None:
    pattern = write_sequence(tmp_path, "sh010", count=1, size=SIZE)
    pixels, _, spec = _read(pattern.replace("####", "1001"))
    out = str(tmp_path / "ai.1001.exr")
    write_plate(out, pixels, spec, attributes=ai_header_attributes(".EXR", job_id="j1"))
    header = Path(out).read_bytes()[:4096]
    assert AI_ATTRIBUTE.encode() + b"\x00string\x00" in header
    with pytest.raises(MediaError, match="no AI header attribute"):
        ai_header_attributes("mkv", job_id="j1")


@pytest.mark.parametrize("kind", KINDS)
def test_write_plate_without_attributes_writes_the_same_bytes(tmp_path, kind) -> None:
    pattern = write_sequence(tmp_path / "src", "sh010", count=1, size=SIZE, **KINDS[kind])
    pixels, _, spec = _read(pattern.replace("####", "1001"))
    ext = pattern.rpartition(".")[2]
    paths = [str(tmp_path / f"{name}.1001.{ext}") for name in ("plain", "none", "direct", "ai")]
    write_plate(paths[0], pixels, spec)
    write_plate(paths[1], pixels, spec, attributes=None)
    # What write_plate wrote before it took attributes: the header copied as it is.
    output = oiio.ImageOutput.create(paths[2])
    assert output.open(paths[2], oiio.ImageSpec(spec)) and output.write_image(pixels)
    output.close()
    write_plate(paths[3], pixels, spec, attributes=ai_header_attributes(ext, job_id="j1"))
    data = [_stable(Path(p).read_bytes(), kind) for p in paths]
    assert data[0] == data[1] == data[2] != data[3]


def _stable(data: bytes, kind: str) -> bytes:
    """``data`` less what differs between two writes of the same frame: OIIO puts the path it
    writes to (write_plate's scratch file) in the DPX file-name field, bytes 36-135."""
    return data[:36] + data[136:] if kind == "dpx" else data


def test_a_sequence_on_s3(s3_bucket, tmp_path, ca) -> None:
    local = _deliver(tmp_path, ca)
    for name in sorted(os.listdir(tmp_path)):
        storage.publish_file(tmp_path / name, f"{s3_bucket}/out/sh010/{name}")
    pattern = f"{s3_bucket}/out/sh010/sh010.####.exr"
    sidecar, result = verify_sidecar_url(pattern, trust_anchors_pem=ca["root"].read_text())
    assert sidecar == f"{s3_bucket}/out/sh010/sh010.credentials.json"
    assert result.status == "valid" and result.trusted, result.failures
    _flip_pixel_byte(local.replace("####", "1001"))
    storage.publish_file(local.replace("####", "1001"), f"{s3_bucket}/out/sh010/sh010.1001.exr")
    storage.publish_file(local.replace("####", "1004"), f"{s3_bucket}/out/sh010/sh010.1005.exr")
    storage.remove(f"{s3_bucket}/out/sh010/sh010.1002.exr")
    result = verify_sidecar_url(pattern, trust_anchors_pem=ca["root"].read_text())[1]
    assert result.status == "tampered"
    assert result.failures == (
        "sh010.1001.exr: changed after signing (sha256 differs from the credentials)",
        "sh010.1002.exr: missing (listed in the credentials)",
        "sh010.1005.exr: not covered by the credentials",
    )
