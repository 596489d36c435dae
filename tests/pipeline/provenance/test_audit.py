"""Audit records accumulate across jobs, in order, and are never rewritten."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from pipeline.errors import StorageError
from pipeline.provenance import audit
from pipeline.provenance.audit import AuditLog, file_digest, make_record, spec_sha256, submitter_from_env
from pipeline.store import storage


def _job(prefix: str, job_id: str, env: dict[str, str], metadata=None) -> str:
    """What the driver does at the end of a job: hash inputs and outputs, append one record."""
    src = storage.join(prefix, "plates", f"{job_id}.mov")
    out = storage.join(prefix, "renders", f"{job_id}.mp4")
    storage.write_bytes(src, f"plate of {job_id}".encode())
    storage.write_bytes(out, f"render of {job_id}".encode())
    spec = {"job_id": job_id, "shots": ["sh010"], "storage": {"aws_secret_access_key": "leaked-secret"}}
    record = make_record(
        job_id=job_id,
        spec=spec,
        identities={"alice": "REL-2026-0042"},
        model_pack_sha256="a" * 64,
        adapters={"alice": "b" * 64},
        inputs={src: file_digest(src).sha256},
        outputs={out: file_digest(out).sha256},
        job_metadata=metadata,
        env=env,
        extra={"note": f"s3://AKIAIOSFODNN7EXAMPLE:secret@b/{job_id}"},
    )
    return AuditLog(prefix).append(record)


@pytest.fixture(params=["local", "s3"])
def prefix(request, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "out")
    return request.getfixturevalue("s3_bucket") + "/nightfall"


def test_records_accumulate_and_are_never_rewritten(prefix: str) -> None:
    env = {"USER": "vfx-artist", "RAY_JOB_SUBMISSION_ID": "raysubmit_1"}
    first = _job(prefix, "job-1", env)
    first_bytes = storage.read_bytes(first)
    second = _job(prefix, "job-2", env, metadata={"submitter": "lead@studio"})
    third = _job(prefix, "job-1", env)  # a resubmitted job adds a record, it does not replace one
    log = AuditLog(prefix)
    assert log.urls() == [first, second, third]
    records = log.records()
    assert [r.job_id for r in records] == ["job-1", "job-2", "job-1"]
    assert storage.read_bytes(first) == first_bytes
    assert [r.submitter for r in records] == ["vfx-artist", "lead@studio", "vfx-artist"]
    rec = records[1]
    assert rec.ray_submission_id == "raysubmit_1"
    assert rec.identities == {"alice": "REL-2026-0042"}
    assert rec.model_pack_sha256 == "a" * 64 and rec.adapters == {"alice": "b" * 64}
    assert rec.outputs[0].sha256 == hashlib.sha256(b"render of job-2").hexdigest()
    assert rec.inputs[0].url.endswith("plates/job-2.mov")
    raw = b"".join(storage.read_bytes(u) for u in log.urls())
    assert b"AKIAIOSFODNN7EXAMPLE" not in raw and b"leaked-secret" not in raw


def test_writing_refuses_to_overwrite(prefix: str) -> None:
    url = _job(prefix, "job-1", {"USER": "a"})
    before = storage.read_bytes(url)
    with pytest.raises(StorageError, match="never rewritten"):
        audit._write_new(url, b"{}")
    assert storage.read_bytes(url) == before


def test_submitter_and_spec_hash() -> None:
    assert submitter_from_env({"USER": "u"}, {"submitter": "s"}) == "s"
    assert submitter_from_env({"USER": "u", "RECAST_SUBMITTER": "r"}) == "r"
    assert submitter_from_env({"LOGNAME": "l"}) == "l"
    assert submitter_from_env({}) == "unknown"
    assert spec_sha256({"a": 1, "b": [1, 2]}) == spec_sha256({"b": [1, 2], "a": 1})
    assert spec_sha256({"a": 1}) != spec_sha256({"a": 2})
