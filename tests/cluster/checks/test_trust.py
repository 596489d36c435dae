"""What a cluster policy makes mandatory, without Ray: audit records whose failure fails the job, and
cluster settings a submitted job cannot override through its runtime env."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cluster.checks.provenance import JobProvenance
from cluster.checks.trust import Authorisation, cluster_settings, job_metadata
from cluster.report.summary import JobSummary
from cluster.spec.job import parse_spec
from pipeline.errors import SpecError, StorageError
from pipeline.provenance.audit import AuditLog


def _job(tmp_path: Path, *, audit_is_a_file: bool) -> JobProvenance:
    out = tmp_path / "out"
    out.mkdir()
    if audit_is_a_file:
        (out / "audit").write_text("a file where the audit folder should be")
    picture = tmp_path / "hero.jpg"
    picture.write_bytes(b"picture bytes")
    spec = parse_spec(
        {
            "job_id": "trust-job",
            "shots": [{"name": "sc01", "url": str(tmp_path / "sc01.mp4")}],
            "identities": {"hero": {"images": [str(picture)]}},
            "output": {"url": str(out / "{shot}.mp4")},
        }
    )
    return JobProvenance(spec, {"hero": "REL-1"}, "0" * 64, Authorisation(audited=True))


def _cluster(job: JobProvenance) -> JobProvenance:
    auth = Authorisation(audited=True, cluster_policy=True, policy_url="s3://legal/policy.yaml")
    return JobProvenance(job.spec, job.consent_refs, job.pack_hash, auth)


def test_failed_audit_fails_the_job_under_a_cluster_policy(tmp_path: Path) -> None:
    job = _cluster(_job(tmp_path, audit_is_a_file=True))
    summary = JobSummary(job_id="trust-job", work_url=str(tmp_path / "work"), shots=[])
    job.write_audit(summary, [])
    assert not summary.ok and "audit record not written" in summary.failures[0], summary.failures
    assert "job failure: audit record not written" in summary.table()
    # At intent time, before anything renders, the job does not start.
    with pytest.raises(StorageError) as err:
        job.write_intent([])
    assert "intent record" in str(err.value) and "cluster policy" in str(err.value)


def test_failed_audit_is_a_warning_without_a_cluster_policy(tmp_path: Path) -> None:
    job = _job(tmp_path, audit_is_a_file=True)
    summary = JobSummary(job_id="trust-job", work_url=str(tmp_path / "work"), shots=[])
    job.write_audit(summary, [])
    job.write_intent([])  # logged only
    assert summary.ok and not summary.failures
    assert any("audit record not written" in w for w in summary.warnings)


def test_intent_then_result_records(tmp_path: Path) -> None:
    job = _cluster(_job(tmp_path, audit_is_a_file=False))
    job.write_intent([])
    summary = JobSummary(job_id="trust-job", work_url=str(tmp_path / "work"), shots=[])
    job.write_audit(summary, [])
    started, completed = AuditLog(str(tmp_path / "out")).records()
    assert (started.event, completed.event) == ("job.started", "job.completed")
    assert started.extra["cluster_policy"] and started.identities == {"hero": "REL-1"}
    assert started.spec_sha256 == completed.spec_sha256


def test_cluster_settings_and_ray_job_metadata() -> None:
    config = {
        "runtime_env": {"env_vars": {"OTHER": "1"}},
        "metadata": {"submitter": "jdoe", "job_submission_id": "raysubmit_1"},
    }
    env = {
        "RECAST_POLICY_URL": " s3://legal/p.yaml ",
        "RECAST_TIMESTAMP_URL": "",
        "RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps(config),
    }
    assert cluster_settings(env) == ("s3://legal/p.yaml", None)
    assert job_metadata(env) == {"submitter": "jdoe", "job_submission_id": "raysubmit_1"}
    assert job_metadata({"RAY_JOB_CONFIG_JSON_ENV_VAR": "not json"}) == {}
    for name in ("RECAST_POLICY_URL", "RECAST_TIMESTAMP_URL"):
        spoofed = {"runtime_env": {"env_vars": {name: ""}}}
        with pytest.raises(SpecError) as err:
            cluster_settings({**env, "RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps(spoofed)})
        assert err.value.field == f"runtime_env.env_vars.{name}"
