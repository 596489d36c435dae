"""Every output marked as AI-made unless the cluster's studio policy allows otherwise (issue 43).

The checks before Ray (``prepare_job``) on real files: the defaults mark every output (the
watermark on, Content Credentials with the installation's own key, made on first use); switching
either off is refused unless ``RECAST_POLICY_URL`` names a policy with ``allow_unmarked_outputs``;
a policy's own ``signer`` is the key of every job that names none.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from cluster.checks.prepare import prepare_job
from cluster.checks.provenance import JobProvenance
from cluster.spec.job import parse_spec
from jobs.demo_media import write_source_image
from pipeline.errors import SpecError
from pipeline.provenance.install_key import UNTRUSTED_NAME, installation_signer, is_installation_certificate
from tests.clips import ClipSpec, write_clip
from tests.pipeline.provenance.provenance_helpers import make_test_ca


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("marking")
    clip = write_clip(root / "clip.mp4", ClipSpec(frames=24, rate=Fraction(24), gop=12, audio=False))
    return {"clip": clip, "source": write_source_image(str(root / "source.jpg")), "root": str(root)}


def _spec(inputs: dict[str, str], out: Path, provenance: dict | None = None) -> dict:
    spec = {
        "job_id": "marking",
        "shots": [{"name": "clip", "url": inputs["clip"]}],
        "identities": {"hero": {"images": [inputs["source"]], "face_index": 0}},
        "output": {"url": str(out / "{shot}.mp4")},
        "chunking": {"seconds": 1.0, "min_seconds": 1.0},
    }
    if provenance is not None:
        spec["provenance"] = provenance
    return spec


def _policy(folder: Path, **extra: object) -> str:
    path = folder / "policy.yaml"
    path.write_text(
        yaml.safe_dump({"identities": {"hero": {"consent_ref": "REL-1", "projects": ["*"]}}, **extra})
    )
    return str(path)


def test_marked_by_default_with_the_installation_key(inputs, tmp_path, no_ray, monkeypatch) -> None:
    monkeypatch.setenv("RECAST_SIGNING_DIR", str(tmp_path / "signing"))
    monkeypatch.delenv("RECAST_POLICY_URL", raising=False)
    spec = parse_spec(_spec(inputs, tmp_path / "out"))
    assert spec.provenance is None and spec.marking.watermark.enabled and spec.marking.content_credentials
    prepared = prepare_job(spec, resume=False)
    auth = prepared.auth
    # The key was made on first use, in the installation's folder, readable by its owner only.
    assert auth.signer is not None and auth.signer_source == "installation (untrusted)"
    key = tmp_path / "signing" / "signer.key"
    assert auth.signer.private_key_url == str(key) and key.stat().st_mode & 0o077 == 0
    leaf = x509.load_pem_x509_certificate((tmp_path / "signing" / "signer.pem").read_bytes())
    name = leaf.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value
    assert isinstance(name, str) and name.startswith(UNTRUSTED_NAME) and is_installation_certificate(name)
    # The same key the next time: made once per installation.
    assert installation_signer(tmp_path / "signing") == auth.signer
    provenance = JobProvenance(spec, prepared.consent_refs, prepared.pack_hash, auth)
    signing = provenance.signing(str(tmp_path / "out" / "clip.mp4"))
    assert signing is not None
    info, _ = signing
    # Without a policy the manifest still names every identity, saying no consent is on record.
    assert info.identities == {"hero": "none (no studio policy in the job)"}
    assert info.watermark_payload is not None and info.model_pack_sha256 == prepared.pack_hash
    marking = provenance.marking()
    assert marking["watermark"] and marking["content_credentials"] and marking["switched_off"] == []


@pytest.mark.parametrize(
    ("provenance", "field"),
    [
        ({"watermark": {"enabled": False}}, "provenance.watermark.enabled"),
        ({"content_credentials": False}, "provenance.content_credentials"),
    ],
)
def test_switching_marking_off_needs_the_cluster_policy(
    inputs, tmp_path, no_ray, monkeypatch, provenance: dict, field: str
) -> None:
    monkeypatch.setenv("RECAST_SIGNING_DIR", str(tmp_path / "signing"))
    monkeypatch.delenv("RECAST_POLICY_URL", raising=False)
    out = tmp_path / "out"
    # The spec alone: refused, naming the field.
    with pytest.raises(SpecError) as refused:
        prepare_job(parse_spec(_spec(inputs, out, provenance)), resume=False)
    assert refused.value.field == field and "RECAST_POLICY_URL" in str(refused.value)
    # A policy the spec names cannot give that leave, even one that says it may.
    own = _policy(tmp_path, allow_unmarked_outputs=True)
    with pytest.raises(SpecError) as refused:
        prepare_job(
            parse_spec(_spec(inputs, out, {**provenance, "policy_url": own, "project": "p"})), resume=False
        )
    assert refused.value.field == field
    # The cluster's policy without the leave: refused, naming the policy.
    (tmp_path / "strict").mkdir()
    strict = _policy(tmp_path / "strict")
    monkeypatch.setenv("RECAST_POLICY_URL", strict)
    with pytest.raises(SpecError) as refused:
        prepare_job(parse_spec(_spec(inputs, out, provenance)), resume=False)
    assert refused.value.field == field and "allow_unmarked_outputs" in str(refused.value)
    assert not out.exists() and not (tmp_path / "signing").exists()
    # With the leave: accepted, and what was switched off is recorded for the audit log and report.
    monkeypatch.setenv("RECAST_POLICY_URL", own)
    spec = parse_spec(_spec(inputs, out, provenance))
    prepared = prepare_job(spec, resume=False)
    assert prepared.auth.unmarked == (field,) and prepared.auth.cluster_policy
    marking = JobProvenance(spec, prepared.consent_refs, prepared.pack_hash, prepared.auth).marking()
    assert marking["switched_off"] == [field] and marking["switched_off_by"] == own
    assert marking["content_credentials"] == (field != "provenance.content_credentials")
    assert marking["watermark"] == (field != "provenance.watermark.enabled")


def test_the_cluster_policy_signer_is_the_key_of_jobs_that_name_none(
    inputs, tmp_path, no_ray, monkeypatch
) -> None:
    monkeypatch.setenv("RECAST_SIGNING_DIR", str(tmp_path / "signing"))
    ca = make_test_ca(tmp_path / "ca", "Studio")
    signer = {"certificate_chain_url": str(ca["chain"]), "private_key_url": str(ca["key"])}
    monkeypatch.setenv("RECAST_POLICY_URL", _policy(tmp_path, signer=signer))
    prepared = prepare_job(parse_spec(_spec(inputs, tmp_path / "out")), resume=False)
    assert prepared.auth.signer is not None
    assert prepared.auth.signer.private_key_url == str(ca["key"])
    assert prepared.auth.signer_source is not None and prepared.auth.signer_source.startswith(
        "studio (policy"
    )
    assert not (tmp_path / "signing").exists()  # no installation key needed
    # A policy's signer cannot choose the time-stamp authority: the policy's timestamp_url does.
    monkeypatch.setenv(
        "RECAST_POLICY_URL", _policy(tmp_path, signer={**signer, "timestamp_url": "http://tsa.invalid"})
    )
    with pytest.raises(SpecError) as refused:
        prepare_job(parse_spec(_spec(inputs, tmp_path / "out")), resume=False)
    assert "signer" in refused.value.field


def test_an_installation_key_that_cannot_be_made_is_a_clear_refusal(
    inputs, tmp_path, no_ray, monkeypatch
) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the key folder's parent should be")
    monkeypatch.setenv("RECAST_SIGNING_DIR", str(blocked / "signing"))
    monkeypatch.delenv("RECAST_POLICY_URL", raising=False)
    with pytest.raises(SpecError) as refused:
        prepare_job(parse_spec(_spec(inputs, tmp_path / "out")), resume=False)
    assert refused.value.field == "provenance.signer" and "RECAST_SIGNING_DIR" in refused.value.reason
    assert not (tmp_path / "out").exists()
