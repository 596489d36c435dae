"""Studio policy: consent checks refuse before anything is written; prefixes are enforced."""

from __future__ import annotations

import datetime as dt
import logging
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from pipeline import storage
from pipeline.errors import SpecError
from pipeline.provenance.audit import AuditLog, make_record
from pipeline.provenance.policy import (
    NOT_ENFORCED_REF,
    PolicyError,
    authorise_job,
    check_identities,
    check_url_allowed,
    load_policy,
    parse_policy,
)

POLICY_YAML = """
enforce: true
identities:
  alice:
    consent_ref: REL-2026-0042
    projects: [nightfall]
    valid_from: 2026-01-01
    valid_until: 2026-12-31
  bob:
    consent_ref: REL-2025-0007
    projects: ["*"]
    valid_until: 2025-06-30
allowed_input_prefixes: ["s3://studio-plates/nightfall/"]
allowed_output_prefixes: ["s3://studio-renders/nightfall"]
"""

DAY = dt.date(2026, 6, 1)


@pytest.fixture()
def policy():
    return parse_policy(POLICY_YAML, "policy.yaml")


def test_cleared_identity_returns_consent_ref(policy) -> None:
    assert check_identities(policy, "nightfall", ["alice"], DAY) == {"alice": "REL-2026-0042"}


@pytest.mark.parametrize(
    ("name", "project", "day", "words"),
    [
        ("carol", "nightfall", DAY, "not cleared"),
        ("alice", "other-film", DAY, "does not cover project 'other-film'"),
        ("bob", "nightfall", DAY, "expired on 2025-06-30"),
        ("alice", "nightfall", dt.date(2025, 12, 31), "not valid before 2026-01-01"),
    ],
)
def test_refusals_name_the_identity(policy, name, project, day, words) -> None:
    with pytest.raises(PolicyError) as err:
        check_identities(policy, project, ["alice", name], day)
    assert f"identity {name!r}" in str(err.value)
    assert words in str(err.value)


def test_refused_job_writes_nothing(policy, tmp_path: Path) -> None:
    """At this level "nothing rendered": authorise_job raises before any output or audit record."""
    out = tmp_path / "renders"

    def run_job() -> None:
        authorise_job(
            policy,
            project="nightfall",
            identity_names=["alice", "mallory"],
            input_urls=["s3://studio-plates/nightfall/sh010.mov"],
            output_urls=["s3://studio-renders/nightfall/sh010.mp4"],
            today=DAY,
        )
        storage.write_bytes(str(out / "sh010.mp4"), b"rendered")
        AuditLog(str(out)).append(make_record(job_id="j", spec={}, identities={}, model_pack_sha256="0" * 64))

    with pytest.raises(PolicyError, match="mallory"):
        run_job()
    assert not out.exists()


def test_enforcement_relaxed_only_by_policy_file(tmp_path: Path, caplog) -> None:
    relaxed = tmp_path / "policy.yaml"
    relaxed.write_text(POLICY_YAML.replace("enforce: true", "enforce: false"))
    policy = load_policy(str(relaxed))
    with caplog.at_level(logging.WARNING):
        refs = check_identities(policy, "nightfall", ["carol", "bob"], DAY)
    assert refs == {"carol": NOT_ENFORCED_REF, "bob": "REL-2025-0007"}
    assert "carol" in caplog.text and "enforce: false" in caplog.text
    # A loaded policy is frozen: code holding it (a job spec handler) cannot flip it.
    strict = parse_policy(POLICY_YAML)
    with pytest.raises(ValidationError):
        strict.enforce = False  # type: ignore[misc]


def test_policy_from_s3(s3_bucket: str) -> None:
    url = f"{s3_bucket}/policy/studio.yaml"
    storage.write_bytes(url, POLICY_YAML.encode())
    assert load_policy(url).identities["alice"].consent_ref == "REL-2026-0042"


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("identities: {x: {consent_ref: R, projects: [p], bogus: 1}}", "identities.x.bogus"),
        ("identities: {x: {consent_ref: R}}", "identities.x.projects"),
        ("enforce: maybe", "enforce"),
        ("- a list", ""),
        ("allowed_output_prefixes: ['s3://b/../x']", "allowed_output_prefixes"),
    ],
)
def test_bad_policy_names_field(text: str, field: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_policy(text, "studio.yaml")
    assert str(err.value).startswith("studio.yaml")
    assert field in str(err.value)


def test_url_prefixes(policy) -> None:
    check_url_allowed(policy, "s3://studio-plates/nightfall/reel1/sh010.mov", "input")
    check_url_allowed(policy, "s3://studio-renders/nightfall/sh010/v001.mp4", "output")
    refused = [
        ("s3://studio-plates/other/sh010.mov", "input"),
        ("s3://studio-renders/nightfall/sh010.mp4", "input"),  # output prefix is not an input prefix
        ("s3://studio-renders/nightfall-leak/x.mp4", "output"),  # whole segments only
        ("s3://studio-renders/nightfall/../other/x.mp4", "output"),
        ("gs://studio-renders/nightfall/x.mp4", "output"),
        ("/tmp/x.mp4", "output"),
    ]
    for url, kind in refused:
        with pytest.raises(PolicyError, match="not under an allowed|'..'"):
            check_url_allowed(policy, url, kind)


def test_local_prefixes_and_unrestricted(tmp_path: Path) -> None:
    policy = parse_policy(f"allowed_output_prefixes: ['{tmp_path}/out']")
    check_url_allowed(policy, f"file://{tmp_path}/out/a.mp4", "output")
    check_url_allowed(policy, os.path.join(str(tmp_path), "out", ".", "b.mp4"), "output")
    with pytest.raises(PolicyError):
        check_url_allowed(policy, f"{tmp_path}/outside/a.mp4", "output")
    # No input prefixes configured: any input is allowed, but '..' never is.
    check_url_allowed(policy, "s3://anything/a.mov", "input")
    with pytest.raises(PolicyError):
        check_url_allowed(policy, "s3://anything/../a.mov", "input")
