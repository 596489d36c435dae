"""Studio policy: consent checks refuse before anything is written; prefixes are enforced."""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from pipeline.errors import SpecError
from pipeline.provenance.audit import AuditLog, make_record
from pipeline.provenance.policy import (
    DEFAULT_MIN_SIMILARITY,
    NOT_ENFORCED_REF,
    PolicyError,
    authorise_job,
    check_identities,
    check_pictures,
    check_url_allowed,
    load_policy,
    parse_policy,
)
from pipeline.store import storage

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


@pytest.mark.parametrize("name", ["Alice", "ALICE", "\u0430lice", "alic\u0435", "alice ", "al\u200bice"])
def test_lookalike_and_case_variant_names_are_other_identities(policy, name) -> None:
    """Names are compared exactly: a Cyrillic 'а', a case variant or a zero-width space is not alice."""
    with pytest.raises(PolicyError, match="not cleared"):
        check_identities(policy, "nightfall", [name], DAY)


@pytest.mark.parametrize(
    ("date", "field"),
    [
        ("2027-06-31", "identities.alice.valid_until"),
        ("2027-02-30", "identities.alice.valid_until"),
        ("2026-13-01", "identities.alice.valid_until"),
    ],
)
def test_impossible_policy_dates_name_file_and_field(tmp_path: Path, date: str, field: str) -> None:
    path = tmp_path / "studio.yaml"
    path.write_text(POLICY_YAML.replace("valid_until: 2026-12-31", f"valid_until: {date}"))
    with pytest.raises(SpecError) as err:
        load_policy(str(path))
    assert err.value.field == f"{path}#{field}", err.value
    assert date in str(err.value) and "not a date that exists" in str(err.value)


def test_reference_pictures_by_sha256(tmp_path: Path) -> None:
    approved = tmp_path / "alice_front.jpg"
    approved.write_bytes(b"alice, front, approved")
    other = tmp_path / "someone.jpg"
    other.write_bytes(b"a picture of someone else")
    digest = hashlib.sha256(approved.read_bytes()).hexdigest()
    policy = parse_policy(
        "identities: {alice: {consent_ref: R1, projects: ['*'], reference_sha256: ["
        + digest.upper()  # hex case does not matter
        + "]}, bob: {consent_ref: R2, projects: ['*']}}"
    )
    assert policy.identities["alice"].reference_sha256 == (digest,)
    check_pictures(policy, "alice", {str(approved): digest})
    check_pictures(policy, "bob", {str(other): "0" * 64})  # no references listed: consent by name only
    bad = hashlib.sha256(other.read_bytes()).hexdigest()
    with pytest.raises(PolicyError) as err:
        check_pictures(policy, "alice", {str(approved): digest, str(other): bad})
    assert "identity 'alice'" in str(err.value) and str(other) in str(err.value) and bad in str(err.value)
    with pytest.raises(SpecError, match="reference_sha256"):
        parse_policy("identities: {a: {consent_ref: R, projects: ['*'], reference_sha256: [abc]}}")


def test_symlink_out_of_an_allowed_prefix_is_refused(tmp_path: Path) -> None:
    """Prefixes are compared on resolved paths: a link inside an allowed folder is judged by its target."""
    allowed, outside = tmp_path / "plates", tmp_path / "private"
    allowed.mkdir()
    outside.mkdir()
    (outside / "secret.mov").write_bytes(b"not for this job")
    (allowed / "ok.mov").write_bytes(b"plate")
    os.symlink(outside / "secret.mov", allowed / "sneaky.mov")
    os.symlink(outside, allowed / "linked-dir")
    policy = parse_policy(f"allowed_input_prefixes: ['{allowed}']\nallowed_output_prefixes: ['{allowed}']")
    check_url_allowed(policy, str(allowed / "ok.mov"), "input")
    for url in (allowed / "sneaky.mov", allowed / "linked-dir" / "secret.mov"):
        with pytest.raises(PolicyError, match="not under an allowed input prefix"):
            check_url_allowed(policy, str(url), "input")
    # Outputs too, including one that does not exist yet under a linked folder.
    with pytest.raises(PolicyError, match="not under an allowed output prefix"):
        check_url_allowed(policy, f"file://{allowed}/linked-dir/new/out.mp4", "output")
    check_url_allowed(policy, f"file://{allowed}/new/out.mp4", "output")
    # A prefix that is itself a link is resolved the same way: its target is what is allowed.
    os.symlink(allowed, tmp_path / "plates-link")
    linked = parse_policy(f"allowed_input_prefixes: ['{tmp_path / 'plates-link'}']")
    check_url_allowed(linked, str(allowed / "ok.mov"), "input")
    with pytest.raises(PolicyError):
        check_url_allowed(linked, str(tmp_path / "plates-link" / "sneaky.mov"), "input")


def test_timestamp_url_and_similarity_fields() -> None:
    policy = parse_policy(
        "timestamp_url: http://tsa.studio.example/\n"
        "identities: {a: {consent_ref: R, projects: ['*'], reference_embedding_url: s3://legal/a.npy}}"
    )
    assert policy.timestamp_url == "http://tsa.studio.example/"
    clearance = policy.identities["a"]
    assert clearance.reference_embedding_url == ("s3://legal/a.npy",)
    assert clearance.min_similarity == DEFAULT_MIN_SIMILARITY
    with pytest.raises(SpecError, match="min_similarity"):
        parse_policy("identities: {a: {consent_ref: R, projects: ['*'], min_similarity: 1.5}}")
