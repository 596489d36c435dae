"""The shared loaders of specs, policies, pack manifests, manifest records and leases (issue 29,
findings 3 and 9): bounded nesting and alias expansion, unique keys, errors without source text."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from cluster.lease.holder import Holder
from cluster.state.manifest import JobManifest
from pipeline.errors import ModelPackError
from pipeline.models.pack import parse_manifest
from pipeline.store import jsonload, yamlload
from tests.hostile_inputs import laughs


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "text",
    [
        laughs(),  # the audit's: 9 ** 10 values
        laughs(levels=30, fan=2),  # a long chain of pairs: 2 ** 30
        "a: &a {"
        + ", ".join(f"k{i}: x" for i in range(400))
        + "}\n"
        + "b: &b ["
        + ", ".join(["*a"] * 400)
        + "]\n"
        + "c: ["
        + ", ".join(["*b"] * 400)
        + "]\n",  # wide mappings: 400 ** 3
    ],
    ids=["9x10", "2x30", "mapping-400x3"],
)
def test_alias_expansion_refused_before_anything_is_built(text: str) -> None:
    started = time.monotonic()
    with pytest.raises(yamlload.LoadError, match="aliases expand this to more than 100,000 values"):
        yamlload.load(text)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[" * 20_000 + "]" * 20_000, "nested deeper than 64 levels"),  # the audit's
        (
            "".join("  " * i + "- \n" for i in range(200)) + "  " * 200 + "- x\n",
            "nested deeper than 64 levels",
        ),
        ("{a: " * 5_000 + "1" + "}" * 5_000, "nested deeper than 64 levels"),
        ("a: &a [*a]\n", "refers to a collection that holds it"),
        ("a: &a {b: *a}\n", "refers to a collection that holds it"),
        # Each level written once, one alias deep: short, but 100 levels once expanded.
        (
            "l0: &l0 [x]\n" + "".join(f"l{i}: &l{i} [*l{i - 1}]\n" for i in range(1, 100)),
            "aliases nest this deeper than 64 levels",
        ),
    ],
    ids=["flow-20000", "block-200", "mappings-5000", "self-list", "self-mapping", "alias-chain-100"],
)
def test_nesting_bounded(text: str, problem: str) -> None:
    with pytest.raises(yamlload.LoadError, match=problem) as caught:
        yamlload.load(text)
    assert caught.value.line is not None and caught.value.line >= 1


def test_shared_settings_through_anchors_and_merge_keys_still_load() -> None:
    text = (
        "defaults: &defaults {preset: ultrafast, if_exists: fail}\n"
        "shots:\n"
        "  - {name: a, output: {<<: *defaults}}\n"
        "  - name: b\n"
        "    output:\n"
        "      <<: *defaults\n"
        "      if_exists: overwrite\n"  # overriding a merged key is what a merge is for
        "tags: &t [x, y]\n"
        "more: [*t, *t]\n"
    )
    data = yamlload.load(text)
    assert data["shots"][0]["output"] == {"preset": "ultrafast", "if_exists": "fail"}
    assert data["shots"][1]["output"] == {"preset": "ultrafast", "if_exists": "overwrite"}
    assert data["more"] == [["x", "y"], ["x", "y"]]


@pytest.mark.parametrize(
    ("text", "key", "lines"),
    [
        ("output:\n  if_exists: fail\n  preset: fast\n  if_exists: overwrite\n", "'if_exists'", (2, 4)),
        ("provenance: {policy_url: a}\njob_id: j\nprovenance: {project: p}\n", "'provenance'", (1, 3)),
        ("shots:\n  - name: a\n    url: x\n    name: b\n", "'name'", (2, 4)),
        ("identities:\n  hero: {images: [a]}\n  hero: {images: [b]}\n", "'hero'", (2, 3)),
        ('{"job_id": "a",\n "job_id": "b"}\n', "'job_id'", (1, 2)),
        ("a:\n  b:\n    c:\n      d: 1\n      d: 2\n", "'d'", (4, 5)),
        ("1: one\n0x1: also one\n", "1", (1, 2)),
    ],
    ids=["if_exists", "provenance", "list-item", "identity", "json", "level-4", "same-value"],
)
def test_duplicate_keys_name_the_key_and_both_lines(text: str, key: str, lines: tuple[int, int]) -> None:
    with pytest.raises(yamlload.LoadError) as caught:
        yamlload.load(text)
    assert f"duplicate key {key} (lines {lines[0]} and {lines[1]})" in str(caught.value)
    assert caught.value.line == lines[1]


@pytest.mark.parametrize(
    "text",
    [
        "watermark:\n  key: hunter2-SECRET : x\n",
        "watermark:\n  key: 'hunter2-SECRET\n",
        "watermark:\n\tkey: hunter2-SECRET\n",
        "watermark: {key: !hunter2-SECRET x}\n",
        "watermark: {key: *hunter2-SECRET}\n",
        'watermark: {key: "hunter2-SECRET\\q"}\n',
    ],
    ids=["mapping-value", "unclosed-quote", "tab", "tag", "alias", "escape"],
)
def test_syntax_errors_give_line_and_column_never_the_text(text: str) -> None:
    with pytest.raises(yamlload.LoadError) as caught:
        yamlload.load(text)
    message = str(caught.value)
    assert "hunter2" not in message and "SECRET" not in message, message
    assert message.startswith("line ") and ", column " in message, message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


# -- JSON -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["[" * 200_000, '{"a":' * 200_000, '{"models": [' + "[" * 70 + "]" * 70 + "]}"],
    ids=["200000-[", "200000-objects", "71-levels"],
)
def test_json_depth_refused_without_recursion(text: str) -> None:
    with pytest.raises(jsonload.JsonError, match="nested deeper than 64 levels"):
        jsonload.loads(text.encode())


def test_json_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps({"note": "[" * 1000 + '\\"{' * 100, "deep": [[[1]]]})
    assert jsonload.loads(text)["deep"] == [[[1]]]
    assert jsonload.loads(text.encode("utf-16")) == json.loads(text)


@pytest.mark.parametrize(
    "text",
    ['{"sha256": "a", "sha256": "b"}', '{"m": [{"role": "x", "role": "y"}]}', '{"a": {"b": 1, "b": 1}}'],
)
def test_json_duplicate_keys_refused(text: str) -> None:
    with pytest.raises(jsonload.JsonError, match="duplicate key '(sha256|role|b)'"):
        jsonload.loads(text)


@pytest.mark.parametrize("body", [b"[" * 200_000, b'{"version": 1, "models": [], "version": 2}'])
def test_pack_manifest_refused_naming_it(body: bytes) -> None:
    with pytest.raises(ModelPackError, match="manifest.json.*not valid JSON"):
        parse_manifest(body, "s3://packs/v3/manifest.json")


@pytest.mark.parametrize("body", ["[" * 200_000, '{"version": 1, "version": 1}', "{torn"])
def test_bad_manifest_record_is_absent_with_a_warning(tmp_path: Path, body: str) -> None:
    manifest = JobManifest(str(tmp_path / "work"))
    manifest.write_job({"job_id": "j"})
    record = tmp_path / "work" / "manifest" / "sc01" / "track-00001.json"
    record.parent.mkdir(parents=True)
    record.write_text(body)
    assert manifest.read_track("sc01", 1) is None
    assert manifest.take_warnings() == [
        "manifest record sc01/track-00001.json is not JSON; treated as missing"
    ]


@pytest.mark.parametrize("body", [b"[" * 200_000, b'{"token": "a", "token": "b"}', b"{" * 100])
def test_bad_lease_file_is_not_a_lease(body: bytes) -> None:
    assert Holder.from_bytes(body) is None
