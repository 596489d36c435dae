"""``python -m jobs.verify`` on image sequences and MKV files: checked against their signed sidecar.

Real EXR frames (half float, frames 1001-1004) and a real MKV, signed by a throw-away test CA.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jobs import verify
from pipeline.plates.sequence import parse_sequence_url
from pipeline.provenance.credentials import SignerConfig
from pipeline.provenance.sidecar import build_sidecar, sidecar_url
from pipeline.store import storage
from pipeline.store.hashing import sha256_file
from tests.clips import ClipSpec, write_clip
from tests.pipeline.provenance.provenance_helpers import INFO, make_test_ca
from tests.plates import write_sequence

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_test_ca(tmp_path_factory.mktemp("verify-ca"))


def _signer(ca: dict[str, Path]) -> SignerConfig:
    return SignerConfig(certificate_chain_url=str(ca["chain"]), private_key_url=str(ca["key"]))


@pytest.fixture()
def sequence(tmp_path: Path, ca: dict[str, Path]) -> str:
    """``out/sh010/sh010.####.exr``: four 256x144 half-float frames (1002 and 1003 AI-modified), signed."""
    pattern = write_sequence(tmp_path / "out" / "sh010", "sh010", count=4, size=(256, 144))
    seq = parse_sequence_url(pattern)
    files = {seq.frame_name(n): sha256_file(seq.frame_url(n)) for n in range(1001, 1005)}
    modified = {seq.frame_name(1002), seq.frame_name(1003)}
    document = build_sidecar(INFO, files=files, modified=modified, signer=_signer(ca), content="sequence")
    storage.write_bytes(sidecar_url(pattern), document)
    return pattern


def test_a_signed_sequence_is_valid_and_trusted(sequence, ca, capsys) -> None:
    assert verify.main([sequence, "--trust-anchors", str(ca["root"])]) == verify.EXIT_OK
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{sequence}: valid (trusted signer)"
    assert f"  sidecar: {sidecar_url(sequence)}" in out
    assert "  signed by: Recast Test Signer" in out and "  job: nightfall-7" in out
    assert "  faces replaced by AI: yes" in out
    assert "  frames checked: 4 (2 AI-modified)" in out
    assert "  identity alice: consent REL-2026-0042" in out
    assert not [line for line in out if "failure" in line]


@pytest.mark.parametrize("spelling", ["sh010.%04d.exr", "sh010.@@@@.exr", "sh010.credentials.json"])
def test_other_spellings_of_the_same_delivery(sequence, ca, spelling) -> None:
    url = os.path.join(os.path.dirname(sequence), spelling)
    assert verify.main([url, "--trust-anchors", str(ca["root"])]) == verify.EXIT_OK


def test_without_trust_anchors_it_is_untrusted(sequence, capsys) -> None:
    assert verify.main([sequence]) == verify.EXIT_INVALID
    captured = capsys.readouterr()
    assert "valid (untrusted signer)" in captured.out
    assert "untrusted (no --trust-anchors given)" in captured.err


def test_another_studio_is_untrusted(sequence, tmp_path, capsys) -> None:
    other = make_test_ca(tmp_path / "other", "Other Studio")
    assert verify.main([sequence, "--trust-anchors", str(other["root"])]) == verify.EXIT_INVALID
    captured = capsys.readouterr()
    assert "does not chain to the trust anchors" in captured.out + captured.err


def test_a_changed_frame_is_tampered(sequence, ca, capsys) -> None:
    frame = Path(sequence.replace("####", "1002"))
    data = bytearray(frame.read_bytes())
    data[-64] ^= 0x01
    frame.write_bytes(bytes(data))
    assert verify.main([sequence, "--trust-anchors", str(ca["root"])]) == verify.EXIT_INVALID
    out = capsys.readouterr().out
    assert f"{sequence}: tampered\n" in out
    assert "  failure: sh010.1002.exr: changed after signing (sha256 differs from the credentials)" in out


def test_missing_and_extra_frames_are_tampered(sequence, ca, capsys) -> None:
    os.remove(sequence.replace("####", "1001"))
    shutil.copyfile(sequence.replace("####", "1004"), sequence.replace("####", "1005"))
    assert verify.main([sequence, "--trust-anchors", str(ca["root"]), "--json"]) == verify.EXIT_INVALID
    report = json.loads(capsys.readouterr().out)
    assert report["status"] == "tampered" and not report["trusted"]
    assert report["failures"] == [
        "sh010.1001.exr: missing (listed in the credentials)",
        "sh010.1005.exr: not covered by the credentials",
    ]
    assert report["frames_checked"] == 4 and report["ai_modified_frames"] == 2
    assert report["sidecar"] == sidecar_url(sequence)


def test_an_edited_claim_is_tampered(sequence, ca, capsys) -> None:
    path = Path(sidecar_url(sequence))
    document = json.loads(path.read_bytes())
    document["claim"]["job_id"] = "someone-else"
    path.write_text(json.dumps(document))
    assert verify.main([sequence, "--trust-anchors", str(ca["root"])]) == verify.EXIT_INVALID
    assert "signature does not verify" in capsys.readouterr().out


def test_no_sidecar_or_unreadable_input_is_exit_2(tmp_path, capsys) -> None:
    pattern = write_sequence(tmp_path, "sh020", count=2, size=(256, 144))
    assert verify.main([pattern]) == verify.EXIT_MISSING
    assert f"{pattern}: missing" in capsys.readouterr().out
    assert verify.main([str(tmp_path / "sh020.####.####.exr")]) == verify.EXIT_MISSING
    assert "frame paddings" in capsys.readouterr().err
    (tmp_path / "big.credentials.json").mkdir()
    assert verify.main([str(tmp_path / "big.credentials.json")]) == verify.EXIT_MISSING


def test_an_mkv_file(tmp_path, ca, capsys) -> None:
    mkv = tmp_path / "sh010.mkv"
    write_clip(mkv, ClipSpec(frames=12))
    assert verify.main([str(mkv)]) == verify.EXIT_MISSING  # before it is signed
    capsys.readouterr()
    document = build_sidecar(
        INFO, files={mkv.name: sha256_file(str(mkv))}, modified={mkv.name}, signer=_signer(ca), content="file"
    )
    storage.write_bytes(sidecar_url(str(mkv)), document)
    assert verify.main([str(mkv), "--trust-anchors", str(ca["root"])]) == verify.EXIT_OK
    assert "  files checked: 1 (1 AI-modified)" in capsys.readouterr().out
    mkv.write_bytes(mkv.read_bytes() + b"\x00")
    assert verify.main([str(mkv), "--trust-anchors", str(ca["root"])]) == verify.EXIT_INVALID


def test_a_sequence_on_s3(sequence, ca, s3_bucket, capsys) -> None:
    folder = os.path.dirname(sequence)
    for name in sorted(os.listdir(folder)):
        storage.publish_file(os.path.join(folder, name), f"{s3_bucket}/out/sh010/{name}")
    url = f"{s3_bucket}/out/sh010/sh010.####.exr"
    assert verify.main([url, "--trust-anchors", str(ca["root"])]) == verify.EXIT_OK
    assert "  frames checked: 4 (2 AI-modified)" in capsys.readouterr().out
    storage.remove(f"{s3_bucket}/out/sh010/sh010.1003.exr")
    assert verify.main([url, "--trust-anchors", str(ca["root"])]) == verify.EXIT_INVALID
    assert "sh010.1003.exr: missing" in capsys.readouterr().out


def test_the_command_line(sequence, ca) -> None:
    """``python -m jobs.verify`` itself, as a delivery checker runs it."""
    done = subprocess.run(
        [sys.executable, "-m", "jobs.verify", sequence, "--trust-anchors", str(ca["root"])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == verify.EXIT_OK, done.stderr
    assert "frames checked: 4 (2 AI-modified)" in done.stdout
