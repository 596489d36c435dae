"""C2PA Content Credentials: signed outputs verify, name consent and model hash,
and any changed byte of the video is reported as tampering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobs import verify as verify_cli
from pipeline.errors import MediaError, SpecError
from pipeline.provenance.credentials import SignerConfig, sign_video, verify_video
from tests.pipeline.provenance.provenance_helpers import INFO, MODEL_HASH, make_test_ca


def test_signed_output_verifies_and_names_consent_and_model(signed) -> None:
    result = verify_video(signed["signed"], signed["root"].read_text())
    assert result.status == "valid" and result.trusted, result.failures
    assert result.consent_refs == INFO.identities
    assert result.model_pack_sha256 == MODEL_HASH
    assert result.job_id == "nightfall-7"
    assert result.ai_replaced
    actions = next(a for a in result.manifest["assertions"] if a["label"].startswith("c2pa.actions"))
    edited = [a for a in actions["data"]["actions"] if a["action"] == "c2pa.edited"]
    assert edited[0]["parameters"]["consent_refs"] == ["REL-2026-0042", "REL-2026-0043"]
    # The signing key never travels with the file.
    key_body = signed["key"].read_text().splitlines()[1]
    assert key_body.encode() not in signed["signed"].read_bytes()


def test_one_changed_byte_is_tampering(signed) -> None:
    data = bytearray(signed["signed"].read_bytes())
    mdat = data.find(b"mdat")
    data[mdat + 64] ^= 0x01
    bad = signed["folder"] / "tampered.mp4"
    bad.write_bytes(bytes(data))
    result = verify_video(bad, signed["root"].read_text())
    assert result.status == "tampered"
    assert any("mismatch" in f for f in result.failures), result.failures
    assert verify_cli.main([str(bad)]) == verify_cli.EXIT_INVALID


def test_missing_and_untrusted(signed, tmp_path: Path) -> None:
    assert verify_video(signed["render"]).status == "missing"
    other = make_test_ca(tmp_path / "other", "Other Studio")
    result = verify_video(signed["signed"], other["root"].read_text())
    assert result.status == "valid" and not result.trusted
    assert (
        verify_cli.main([str(signed["signed"]), "--trust-anchors", str(other["root"])])
        == verify_cli.EXIT_INVALID
    )


def test_valid_without_trust_anchors_is_untrusted(signed, tmp_path: Path, capsys) -> None:
    """Anyone can sign with a self-made certificate: intact is not enough for exit 0."""
    assert verify_cli.main([str(signed["signed"])]) == verify_cli.EXIT_INVALID
    captured = capsys.readouterr()
    assert "untrusted" in captured.err and "--trust-anchors" in captured.err, captured.err
    assert "valid (untrusted signer)" in captured.out
    # A self-signed certificate (its own root) is just as untrusted without anchors.
    own = make_test_ca(tmp_path / "self", "Self Signed")
    config = SignerConfig(certificate_chain_url=str(own["chain"]), private_key_url=str(own["key"]))
    sign_video(signed["render"], tmp_path / "self.mp4", INFO, config)
    assert verify_cli.main([str(tmp_path / "self.mp4")]) == verify_cli.EXIT_INVALID
    assert verify_cli.main([str(tmp_path / "self.mp4"), "--trust-anchors", str(own["root"])]) == (
        verify_cli.EXIT_OK
    )


def test_verify_command(signed, capsys) -> None:
    code = verify_cli.main([str(signed["signed"]), "--trust-anchors", str(signed["root"]), "--json"])
    assert code == verify_cli.EXIT_OK
    report = json.loads(capsys.readouterr().out)
    assert report["consent_refs"]["alice"] == "REL-2026-0042" and report["trusted"]
    assert verify_cli.main([str(signed["render"])]) == verify_cli.EXIT_MISSING


def test_bad_inputs(signed, tmp_path: Path) -> None:
    config = SignerConfig(certificate_chain_url=str(signed["chain"]), private_key_url=str(signed["chain"]))
    with pytest.raises(SpecError, match="no PEM private key"):
        sign_video(signed["render"], tmp_path / "x.mp4", INFO, config)
    good = SignerConfig(certificate_chain_url=str(signed["chain"]), private_key_url=str(signed["key"]))
    with pytest.raises(MediaError, match="not '.mkv'"):
        sign_video(tmp_path / "x.mkv", tmp_path / "y.mkv", INFO, good)
