"""Issue 29 (findings 3, 7 and 9) through the real entrypoints: YAML and JSON that expand or nest
without bound, duplicate keys, and secrets in messages.  Every case exits 2 before Ray starts,
names the file, and leaves the destination as it was; no secret reaches stdout or stderr."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import ray
import yaml

from cluster.spec.job import load_spec
from jobs import detect_watermark, verify
from jobs.render import EXIT_BAD_INPUT, main
from pipeline.errors import SpecError
from tests.faultjobs import job_spec, make_media, tmp_files
from tests.hostile_inputs import laughs
from tests.jobs.refusals import KEEP

SECRETS = ("hunter2", "SECRETTAIL", "svcuser")


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, str]:
    return make_media(str(tmp_path_factory.mktemp("untrusted-media")))


def spec_text(media: dict[str, str], dest: Path, job_id: str = "untrusted") -> str:
    return yaml.safe_dump(job_spec(media, str(dest), job_id), sort_keys=False)


def refused(path: Path, dest: Path, capsys, *words: str) -> str:
    """Exit 2 before Ray naming ``words`` (the spec's path unless another file is named), no secret printed."""
    assert main([str(path)]) == EXIT_BAD_INPUT
    out, err = capsys.readouterr()
    for word in words or (str(path),):
        assert word in err, err
    for secret in SECRETS:
        assert secret not in out + err, out + err
    assert not ray.is_initialized()
    assert sorted(p.name for p in dest.iterdir()) == ["keep.mp4"]
    assert (dest / "keep.mp4").read_bytes() == KEEP and not tmp_files(str(dest))
    return err


def with_policy(media: dict[str, str], dest: Path, tmp_path: Path, policy_text: str, *, name: str) -> Path:
    """A job spec at ``tmp_path/job.yaml`` (JSON when ``name`` ends in .json) whose studio policy is ``name``."""
    policy = tmp_path / name
    policy.write_text(policy_text)
    spec = job_spec(media, str(dest), "with-policy")
    spec["provenance"] = {"policy_url": str(policy), "project": "ep1"}
    (tmp_path / "job.yaml").write_text(
        json.dumps(spec, indent=1) if name.endswith(".json") else yaml.safe_dump(spec)
    )
    return policy


# -- finding 3: expansion and nesting ------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["top", "notes"])
def test_alias_bomb_spec(media, dest, tmp_path, capsys, where, no_ray) -> None:
    path = tmp_path / "job.yaml"
    bomb = laughs()
    if where == "notes":  # inside a field the spec knows, indented under it
        bomb = "x-notes:\n" + "".join(f"  {line}\n" for line in bomb.splitlines())
    path.write_text(spec_text(media, dest) + bomb)
    started = time.monotonic()
    refused(path, dest, capsys, str(path), "bad job spec", "not valid YAML", "aliases expand", "line ")
    assert time.monotonic() - started < 20


@pytest.mark.parametrize(
    "nested",
    [
        "x: " + "[" * 20_000 + "]" * 20_000 + "\n",  # the audit's
        "x:\n" + "".join("  " * (i + 1) + "- \n" for i in range(100)),
        "x: " + "{a: " * 3_000 + "1" + "}" * 3_000 + "\n",
    ],
    ids=["flow-lists-20000", "block-lists-100", "mappings-3000"],
)
def test_deep_spec(media, dest, tmp_path, capsys, nested, no_ray) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(spec_text(media, dest) + nested)
    refused(path, dest, capsys, str(path), "bad job spec", "nested deeper than 64 levels")


@pytest.mark.parametrize(
    "manifest",
    [b"[" * 200_000, b'{"version": 1, "models": ' + b"[" * 100_000, b'{"a": ' * 100_000],
    ids=["audit-200000-[", "under-models", "objects"],
)
def test_deep_pack_manifest(media, dest, tmp_path, capsys, manifest, no_ray, monkeypatch) -> None:
    monkeypatch.setenv("RECAST_CACHE_DIR", str(tmp_path))
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "manifest.json").write_bytes(manifest)
    spec = job_spec(media, str(dest), "deep-pack")
    spec["models"] = {"pack": str(pack), "cache_dir": str(tmp_path / "cache")}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main([str(path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "manifest.json" in err and "nested deeper than 64 levels" in err, err
    assert not ray.is_initialized()


@pytest.mark.parametrize("policy_text", [laughs(), "identities: " + "[" * 20_000], ids=["bomb", "deep"])
def test_policy_bomb(media, dest, tmp_path, capsys, policy_text, no_ray) -> None:
    policy = with_policy(media, dest, tmp_path, policy_text, name="studio-policy.yaml")
    path = tmp_path / "job.yaml"
    assert main([str(path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert str(policy) in err and "not valid YAML/JSON" in err and "line " in err, err
    assert not ray.is_initialized()


# -- finding 9: duplicate keys ------------------------------------------------------------------


def test_second_provenance_block(media, dest, tmp_path, capsys, no_ray) -> None:
    path = tmp_path / "job.yaml"
    text = spec_text(media, dest)
    path.write_text(
        "provenance:\n  policy_url: /studio/policy.yaml\n  project: ep1\n" + text + "provenance: {}\n"
    )
    last = len(path.read_text().splitlines())
    refused(path, dest, capsys, str(path), "duplicate key 'provenance'", f"(lines 1 and {last})")


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (
            lambda t: t.replace(
                "  preset: ultrafast\n", "  if_exists: fail\n  preset: ultrafast\n  if_exists: overwrite\n"
            ),
            "if_exists",
        ),
        (lambda t: t.replace("- name: plate\n", "- name: plate\n  name: other\n"), "name"),
        (lambda t: t.replace("    face_index: 0\n", "    face_index: 0\n    face_index: 1\n"), "face_index"),
        (lambda t: t + "job_id: other\n", "job_id"),
    ],
    ids=["if_exists", "shot-name", "identity-field", "job_id"],
)
def test_duplicate_key_in_spec(media, dest, tmp_path, capsys, edit, key, no_ray) -> None:
    path = tmp_path / "job.yaml"
    text = edit(spec_text(media, dest))
    assert text.count(f"{key}:") == 2, text  # the edit applied
    path.write_text(text)
    lines = [i + 1 for i, line in enumerate(text.splitlines()) if line.strip(" -").startswith(f"{key}:")]
    err = refused(path, dest, capsys, str(path), f"duplicate key '{key}'")
    assert f"(lines {lines[-2]} and {lines[-1]})" in err, (lines, err)


def test_duplicate_key_in_json_spec_and_policy(media, dest, tmp_path, capsys, no_ray) -> None:
    policy_text = '{"enforce": false,\n "identities": {},\n "enforce": true}\n'
    policy = with_policy(media, dest, tmp_path, policy_text, name="policy.json")
    path = tmp_path / "job.yaml"
    refused(path, dest, capsys, str(policy), "duplicate key 'enforce' (lines 1 and 3)")
    path.write_text(json.dumps(json.loads(path.read_text()))[:-1] + ', "job_id": "again"}')
    refused(path, dest, capsys, str(path), "duplicate key 'job_id' (lines 1 and 1)")


def test_merge_keys_still_work(media, dest, tmp_path) -> None:
    path = tmp_path / "job.yaml"
    text = spec_text(media, dest).replace("- name: plate\n", "- &plate\n  name: plate\n")
    path.write_text(text.replace("identities:\n", "- <<: *plate\n  name: again\nidentities:\n"))
    shots = load_spec(str(path)).shots
    assert [shot.name for shot in shots] == ["plate", "again"]  # its own key wins over the merged one
    assert shots[0].url == shots[1].url == media["plate"]


# -- finding 7: secrets in messages ---------------------------------------------------------------

SPELLINGS = [
    "s3://svcuser:hunter2 SECRETTAIL@bucket/x.mp4",  # the audit's
    "s3://svcuser:'hunter2' SECRETTAIL@bucket/x.mp4",
    "s3://<svcuser:hunter2>SECRETTAIL@bucket/x.mp4",
    "s3://svcuser:hunter2\nSECRETTAIL@bucket/x.mp4",
    "s3://svcuser%3Ahunter2%20SECRETTAIL@bucket/x.mp4",
    "s3://svcuser:hunter2@SECRETTAIL@bucket/x.mp4",
    "s3://svcuser:hunter2/SECRETTAIL?x@y@bucket/x.mp4",
    'https://svcuser:hunter2" SECRETTAIL@bucket/x.mp4',
]


@pytest.mark.parametrize("url", SPELLINGS, ids=range(len(SPELLINGS)))
def test_url_password_never_printed(media, dest, tmp_path, capsys, url, no_ray) -> None:
    spec = job_spec(media, str(dest), "secret-url")
    spec["shots"][0]["url"] = url
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    with pytest.raises(SpecError) as caught:
        load_spec(str(path))
    for secret in SECRETS:
        assert secret not in str(caught.value), str(caught.value)
    refused(path, dest, capsys, "shots[0].url", "credentials do not belong in a URL", "@bucket/x.mp4")


@pytest.mark.parametrize(
    "broken",
    [
        "watermark:\n  key: svcuser-hunter2 : x\n",
        "watermark:\n  key: 'hunter2 SECRETTAIL\n",
        "watermark:\n\tkey: hunter2\n",
        "watermark: {key: !hunter2 SECRETTAIL}\n",
        'watermark: {key: "hunter2\\q SECRETTAIL"}\n',
    ],
    ids=["mapping-value", "unclosed-quote", "tab", "tag", "escape"],
)
def test_yaml_error_never_echoes_the_line(media, dest, tmp_path, capsys, broken, no_ray) -> None:
    path = tmp_path / "job.yaml"
    text = spec_text(media, dest) + broken
    path.write_text(text)
    err = refused(path, dest, capsys, str(path), "not valid YAML", ", column ")
    first = len(text.splitlines()) - broken.count("\n") + 1
    assert re.search(rf"line ({first}|{first + 1}|{first + 2}), column \d+: ", err), err


def test_policy_yaml_error_never_echoes_the_line(media, dest, tmp_path, capsys, no_ray) -> None:
    policy_text = "timestamp_url: https://svcuser:hunter2@tsa.example\nidentities: {hero: hunter2 : x}\n"
    policy = with_policy(media, dest, tmp_path, policy_text, name="studio-policy.yaml")
    path = tmp_path / "job.yaml"
    refused(path, dest, capsys, str(policy), "line 2, column")


@pytest.mark.ray  # runs an entrypoint that would start Ray if the refusal regressed
@pytest.mark.parametrize("url", SPELLINGS[:4], ids=range(4))
def test_verify_and_detect_refuse_urls_with_passwords(url, tmp_path, capsys) -> None:
    assert verify.main([url]) == verify.EXIT_MISSING
    assert verify.main([str(tmp_path / "x.mp4"), "--trust-anchors", url]) == verify.EXIT_MISSING
    assert detect_watermark.main([url, "--all-blocks"]) == detect_watermark.EXIT_BAD_INPUT
    assert detect_watermark.main([str(tmp_path / "x.mp4"), "--pack", url]) == detect_watermark.EXIT_BAD_INPUT
    out, err = capsys.readouterr()
    assert err.count("credentials do not belong in a URL") == 4, err
    for secret in SECRETS:
        assert secret not in out + err, out + err
