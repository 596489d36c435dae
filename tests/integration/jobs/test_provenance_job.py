"""Provenance wired into a real job: consent policy before Ray, watermark in the rendered faces,
signed Content Credentials on the published output, one audit record, and no secret in reports or logs.

One small real job (the embedded default pack, a 1.5 s clip of the astronaut, the
insightface group picture as the identity) runs through ``jobs.render.main`` on a
local Ray; the refused job never gets that far.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path

import av
import cv2
import numpy as np
import pytest
import yaml

from cluster.checks.prepare import prepare_job
from cluster.spec.job import parse_spec
from jobs.demo_media import make_face_clip, write_source_image
from pipeline.errors import SpecError
from pipeline.provenance.audit import AuditLog
from pipeline.provenance.consent import picture_embeddings
from pipeline.provenance.credentials import verify_video
from pipeline.provenance.policy import PolicyError
from pipeline.provenance.watermark import WatermarkConfig, detect, job_payload
from pipeline.store import storage
from pipeline.store.redact import RedactingFilter
from tests.faces_data import astronaut
from tests.pipeline.provenance.provenance_helpers import make_test_ca

JOB_ID = "prov-job"
CONSENT = "REL-2026-0042"
SIGNATURE = "0f1e2d3c4b5a69788796a5b4c3d2e1f0deadbeefcafe"
"""A signed-URL signature put in a shot URL by mistake: it must be redacted wherever it is echoed."""


pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("prov-job")
    media = root / "media"
    media.mkdir()
    clip = make_face_clip(str(media / "plate.mp4"), seconds=1.5, width=320, height=180, gop=12, timecode=None)
    # The same plate under a "presigned" name: the shot URL carries a credential.
    secret_url = f"{clip}?X-Amz-Signature={SIGNATURE}"
    shutil.copy(clip, secret_url)
    ca = make_test_ca(root / "ca")
    policy = root / "policy.yaml"
    policy.write_text(
        yaml.safe_dump(
            {
                "identities": {"hero": {"consent_ref": CONSENT, "projects": ["ep101"]}},
                # The signer's key and chain are inputs like any other.
                "allowed_input_prefixes": [str(media), str(root / "ca")],
                "allowed_output_prefixes": [str(root / "out")],
            }
        )
    )
    return {
        "root": str(root),
        "clip": clip,
        "secret_url": secret_url,
        "source": write_source_image(str(media / "source.jpg")),
        "policy": str(policy),
        "chain": str(ca["chain"]),
        "key": str(ca["key"]),
        "out": str(root / "out"),
    }


@pytest.fixture
def no_redaction_leak():
    """``jobs.render.main`` adds a RedactingFilter to the root handlers: take it off again."""
    yield
    for handler in logging.getLogger().handlers:
        for flt in [f for f in handler.filters if isinstance(f, RedactingFilter)]:
            handler.removeFilter(flt)


def _spec(setup: dict[str, str], identity: str, shot_url: str) -> dict:
    return {
        "job_id": JOB_ID,
        "shots": [{"name": "plate", "url": shot_url}],
        "identities": {identity: {"images": [setup["source"]], "face_index": 0}},
        "output": {"url": os.path.join(setup["out"], "{shot}.mp4"), "preset": "ultrafast"},
        "chunking": {"seconds": 1, "min_seconds": 1, "snap_to_keyframes": False},
        "resources": {"cpus_per_actor": 1, "max_actors": 2},
        "faces": {"batch_size": 4},
        "provenance": {
            "policy_url": setup["policy"],
            "project": "ep101",
            "signer": {"certificate_chain_url": setup["chain"], "private_key_url": setup["key"]},
            "watermark": {"enabled": True},
        },
    }


def _write_spec(folder: str, data: dict) -> str:
    path = os.path.join(folder, "spec.yaml")
    Path(path).write_text(yaml.safe_dump(data))
    return path


def _frames(path: str) -> list[np.ndarray]:
    with av.open(path) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def test_uncleared_identity_refused_before_anything(setup, tmp_path, capsys, no_redaction_leak) -> None:
    from jobs.render import EXIT_BAD_INPUT, main

    spec = _write_spec(str(tmp_path), _spec(setup, "stranger", setup["clip"]))
    assert main([spec]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "refused by the studio policy" in err and "'stranger'" in err and "not cleared" in err, err
    # Nothing written: no output folder, hence no output, work area or audit record.
    assert not os.path.exists(setup["out"])

    # Also refused before anything is read or written: an output outside the policy's prefixes.
    elsewhere = _spec(setup, "hero", setup["clip"])
    elsewhere["output"]["url"] = os.path.join(str(tmp_path), "elsewhere", "{shot}.mp4")
    with pytest.raises(PolicyError) as refused:
        prepare_job(parse_spec(elsewhere))
    assert "elsewhere" in str(refused.value) and "allowed output prefix" in str(refused.value)
    assert not os.path.exists(setup["out"]) and not os.path.exists(os.path.join(str(tmp_path), "elsewhere"))
    # An MKV output cannot embed Content Credentials: it is accepted, its signed sidecar manifest is
    # one of the files the job publishes (and the policy authorises).
    mkv = _spec(setup, "hero", setup["clip"])
    mkv["output"]["url"] = os.path.join(setup["out"], "{shot}.mkv")
    from cluster.checks.destinations import written_urls

    prepared = prepare_job(parse_spec(mkv))
    written = [
        url for url, _ in written_urls(prepared.spec, [p.ref for p in prepared.planned], prepared.work_url)
    ]
    assert os.path.join(setup["out"], "plate.mkv.credentials.json") in written
    assert not os.path.exists(setup["out"])
    # A policy without a project cannot be checked: the spec names the missing field.
    no_project = _spec(setup, "hero", setup["clip"])
    del no_project["provenance"]["project"]
    with pytest.raises(SpecError) as missing:
        parse_spec(no_project)
    assert missing.value.field == "provenance.project"


def test_signed_watermarked_audited_and_redacted(
    ray_local, setup, tmp_path, capsys, caplog, no_redaction_leak
) -> None:
    from jobs.render import EXIT_OK, main

    caplog.set_level(logging.INFO)
    spec = _write_spec(str(tmp_path), _spec(setup, "hero", setup["secret_url"]))
    summary_path = str(tmp_path / "summary.json")
    assert main([spec, "--summary-json", summary_path]) == EXIT_OK
    printed = capsys.readouterr()
    summary = json.loads(Path(summary_path).read_text())
    (shot,) = summary["shots"]
    assert shot["status"] == "published" and shot["faces_swapped"] > 0, shot
    output = shot["output_url"]
    sha256 = hashlib.sha256(Path(output).read_bytes()).hexdigest()
    assert shot["output_sha256"] == sha256
    pack_hash = summary["actor_info"][0]["pack"]["hash"]

    # Content Credentials: intact, AI replacement stated, consent and model pack named.
    result = verify_video(output)
    assert result.status == "valid", result.failures
    assert result.ai_replaced and result.job_id == JOB_ID
    assert result.consent_refs == {"hero": CONSENT}
    assert result.model_pack_sha256 == pack_hash

    # An intent record before rendering, then the result with the published output's hash and consent.
    started, record = AuditLog(setup["out"]).records()
    assert (started.event, record.event) == ("job.started", "job.completed")
    assert started.identities == {"hero": CONSENT} and not started.outputs
    assert record.job_id == JOB_ID and record.identities == {"hero": CONSENT}
    assert record.model_pack_sha256 == pack_hash
    assert {(o.url, o.sha256) for o in record.outputs} == {(output, sha256)}
    assert hashlib.sha256(Path(setup["clip"]).read_bytes()).hexdigest() in {i.sha256 for i in record.inputs}

    # The watermark carries the job's payload in the delivered file (read as jobs.detect_watermark reads
    # it: the blocks of the faces the pack's detector finds), and is absent from the plate.
    from jobs import detect_watermark

    capsys.readouterr()
    assert (
        detect_watermark.main([output, "--job-id", JOB_ID, "--window", "12"]) == detect_watermark.EXIT_FOUND
    )
    assert json.loads(capsys.readouterr().out)["payload"] == f"{job_payload(JOB_ID):08x}"
    unmarked, _ = detect(_frames(setup["clip"]), None, WatermarkConfig())
    assert unmarked is None

    # The shot URL's signature was echoed (redacted) but never written out in clear.
    work = os.path.join(setup["out"], ".recast-work", JOB_ID)
    texts = {
        "summary.json": storage.read_bytes(os.path.join(work, "summary.json")).decode(),
        "report.json": storage.read_bytes(os.path.join(work, "report.json")).decode(),
        "report.html": storage.read_bytes(os.path.join(work, "report.html")).decode(),
        "--summary-json": Path(summary_path).read_text(),
        "stdout": printed.out,
        "stderr": printed.err,
        "log": caplog.text,
        "audit": json.dumps([json.loads(storage.read_bytes(u)) for u in AuditLog(setup["out"]).urls()]),
    }
    for name, text in texts.items():
        assert SIGNATURE not in text, name
    for name in ("summary.json", "log", "audit"):
        assert "X-Amz-Signature=***REDACTED***" in texts[name], name


# -- a cluster policy (RECAST_POLICY_URL): pinned, always enforced, always audited --------------


@pytest.fixture(scope="module")
def cluster(setup, tmp_path_factory, default_models) -> dict[str, str]:
    """A cluster policy binding hero's consent to the source picture's sha256 and its face's embedding,
    and a reference embedding of someone else (the astronaut) for the mismatch case."""
    root = tmp_path_factory.mktemp("cluster-policy")
    ((_, hero_face),) = picture_embeddings([setup["source"]], default_models, 0)
    np.save(root / "hero.npy", hero_face)
    astronaut_png = os.path.join(os.path.dirname(setup["source"]), "astronaut.png")
    cv2.imwrite(astronaut_png, cv2.cvtColor(astronaut(), cv2.COLOR_RGB2BGR))
    ((_, other_face),) = picture_embeddings([astronaut_png], default_models, None)
    np.save(root / "someone-else.npy", other_face)
    source_sha = hashlib.sha256(Path(setup["source"]).read_bytes()).hexdigest()

    def policy(name: str, embedding: str, **extra: object) -> str:
        clearance = {
            "consent_ref": CONSENT,
            "projects": ["*"],
            "reference_sha256": [source_sha],
            "reference_embedding_url": str(root / embedding),
        }
        data = {
            "identities": {"hero": clearance},
            "allowed_input_prefixes": [os.path.dirname(setup["source"]), str(Path(setup["chain"]).parent)],
            "allowed_output_prefixes": [str(root / "out")],
            **extra,
        }
        path = root / name
        path.write_text(yaml.safe_dump(data))
        return str(path)

    return {
        "policy": policy("cluster.yaml", "hero.npy", enforce=False),  # enforce: false is ignored
        "mismatch": policy("mismatch.yaml", "someone-else.npy"),
        "astronaut": astronaut_png,
        "out": str(root / "out"),
    }


def _plain_spec(setup: dict[str, str], out: str, identity: str = "hero") -> dict:
    spec = _spec(setup, identity, setup["clip"])
    del spec["provenance"]
    spec["job_id"] = "cluster-job"
    spec["output"]["url"] = os.path.join(out, "{shot}.mp4")
    return spec


def test_cluster_policy_refusals(setup, cluster, tmp_path, capsys, monkeypatch, no_redaction_leak) -> None:
    """Every refusal comes before Ray and before anything is written (exit 2, naming the field or picture)."""
    from jobs.render import EXIT_BAD_INPUT, main

    monkeypatch.setenv("RECAST_POLICY_URL", cluster["policy"])
    other_picture = _plain_spec(setup, cluster["out"])
    other_picture["identities"]["hero"] = {"images": [cluster["astronaut"]]}
    spoofed_env = json.dumps({"runtime_env": {"env_vars": {"RECAST_POLICY_URL": ""}}, "metadata": {}})
    cases = [
        # No provenance block: consent is still checked, by the cluster's policy.
        (
            _plain_spec(setup, cluster["out"], "stranger"),
            {},
            ["refused by the studio policy", "'stranger'", "not cleared"],
        ),
        # enforce: false in the cluster policy does not relax it either: case variants are strangers.
        (_plain_spec(setup, cluster["out"], "Hero"), {}, ["'Hero'", "not cleared"]),
        (
            {
                **_plain_spec(setup, cluster["out"]),
                "provenance": {"policy_url": setup["policy"], "project": "ep101"},
            },
            {},
            ["provenance.policy_url", cluster["policy"], "RECAST_POLICY_URL"],
        ),
        (
            {**_plain_spec(setup, cluster["out"]), "provenance": {"audit": False}},
            {},
            ["provenance.audit", "every job is audited"],
        ),
        (other_picture, {}, ["'hero'", cluster["astronaut"], "reference_sha256"]),
        (
            _plain_spec(setup, cluster["out"]),
            {"RAY_JOB_CONFIG_JSON_ENV_VAR": spoofed_env},
            ["runtime_env.env_vars.RECAST_POLICY_URL"],
        ),
    ]
    for spec, env, words in cases:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        assert main([_write_spec(str(tmp_path), spec)]) == EXIT_BAD_INPUT, words
        err = capsys.readouterr().err
        for word in words:
            assert word in err, err
        for name in env:
            monkeypatch.delenv(name)
        assert not os.path.exists(cluster["out"]), words
    # The same spec with the policy the cluster pins is accepted (no conflict): checked up to the signer.
    same = {
        **_plain_spec(setup, cluster["out"]),
        "provenance": {"policy_url": cluster["policy"], "project": "x"},
    }
    assert prepare_job(parse_spec(same)).auth.cluster_policy


def test_cluster_policy_job_without_provenance(
    ray_local, setup, cluster, tmp_path, monkeypatch, no_redaction_leak
) -> None:
    """A spec without a provenance block on a cluster with a policy: consent checked (by name, picture
    hash and face), an intent record before rendering and a result record, submitter from Ray's metadata."""
    from jobs.render import EXIT_OK, main

    monkeypatch.setenv("RECAST_POLICY_URL", cluster["policy"])
    metadata = {"submitter": "jdoe@studio", "job_submission_id": "raysubmit_cluster1"}
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", json.dumps({"runtime_env": {}, "metadata": metadata}))
    assert main([_write_spec(str(tmp_path), _plain_spec(setup, cluster["out"]))]) == EXIT_OK
    started, completed = AuditLog(cluster["out"]).records()
    assert (started.event, completed.event) == ("job.started", "job.completed")
    for record in (started, completed):
        assert record.identities == {"hero": CONSENT}
        assert record.submitter == "jdoe@studio" and record.ray_submission_id == "raysubmit_cluster1"
        assert record.extra["ray_job_id"]
    assert started.extra["cluster_policy"] and started.extra["policy_url"] == cluster["policy"]
    source_sha = hashlib.sha256(Path(setup["source"]).read_bytes()).hexdigest()
    assert (setup["source"], source_sha) in {(i.url, i.sha256) for i in started.inputs}
    assert started.time_utc < completed.time_utc and len(completed.outputs) == 1


def test_face_not_matching_the_reference_is_refused(
    ray_local, setup, cluster, tmp_path, capsys, monkeypatch, no_redaction_leak
) -> None:
    """hero's picture is the approved file, but the consent's reference embedding is someone else's face:
    refused on the warm actor before any chunk is read, naming identity, picture and similarity."""
    from jobs.render import EXIT_BAD_INPUT, main

    monkeypatch.setenv("RECAST_POLICY_URL", cluster["mismatch"])
    out = os.path.join(cluster["out"], "mismatch")
    assert main([_write_spec(str(tmp_path), _plain_spec(setup, out))]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "refused by the studio policy" in err and "'hero'" in err, err
    assert setup["source"] in err and "similarity" in err and "min_similarity 0.4" in err, err
    assert not os.path.exists(os.path.join(out, "plate.mp4"))
    assert not AuditLog(out).urls()  # refused before the intent record
