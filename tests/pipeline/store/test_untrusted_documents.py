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


# -- tags and integers (issue 41) -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "loc", "problem"),
    [
        ("a: !!int abc\n", ("a",), "a value tagged !!int is not a whole number"),  # the audit's
        ("a: !!float abc\n", ("a",), "a value tagged !!float is not a number"),
        ("a: !!timestamp abc\n", ("a",), "a value tagged !!timestamp is not a date"),
        ("a: " + "9" * 5000 + "\n", ("a",), "an integer of more than 30 digits"),  # the audit's
        ("a: [1, -" + "1" * 31 + "]\n", ("a", 1), "more than 30 digits"),
        ("a: 0x" + "f" * 31 + "\n", ("a",), "more than 30 digits"),
        ("a: {b: [0, !!int hunter2-SECRET]}\n", ("a", "b", 1), "!!int is not a whole number"),
        ("a: !!int 0x_\n", ("a",), "!!int is not a whole number"),  # fits the pattern, not int()
        ("a: !!bool hunter2-SECRET\n", ("a",), "!!bool is not true or false"),
        ("a: !!null hunter2-SECRET\n", ("a",), "!!null is not empty, ~ or null"),
        ("a: !!binary aHVudGVyMg==\n", ("a",), "!!binary values are not accepted"),
        ("a: !!set {hunter2-SECRET: null}\n", ("a",), "!!set values are not accepted"),
        ("a: !!omap [{b: 1}]\n", ("a",), "!!omap values are not accepted"),
        ("a: !!pairs [{b: 1}]\n", ("a",), "!!pairs values are not accepted"),
        ("a:\n  ? !!int hunter2-SECRET\n  : 1\n", ("a",), "!!int is not a whole number"),  # a key
        ("- x\n- !!float hunter2-SECRET\n", (1,), "!!float is not a number"),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 30 else None,
)
def test_a_value_its_tag_does_not_fit_is_refused_saying_where(
    text: str, loc: tuple[int | str, ...], problem: str
) -> None:
    with pytest.raises(yamlload.LoadError) as caught:
        yamlload.load(text)
    message = str(caught.value)
    assert problem in message and "hunter2" not in message and "SECRET" not in message, message
    assert message.startswith("line ") and caught.value.line is not None and caught.value.line >= 1
    assert caught.value.loc == loc
    assert caught.value.__cause__ is None


def test_values_that_fit_their_tags_still_load() -> None:
    text = (
        "i: !!int 12\nh: 0x1F\ns: 1:30\nbig: " + "9" * 30 + "\nf: !!float 1e5\ng: !!float 12\n"
        "inf: !!float .inf\nt: !!str 12\nb: !!bool yes\nn: !!null ~\nd: !!timestamp 2027-06-30\n"
        "m: !!map {k: v}\nq: !!seq [1]\n"
    )
    data = yamlload.load(text)
    assert data["i"] == 12 and data["h"] == 31 and data["s"] == 90 and data["big"] == int("9" * 30)
    assert data["f"] == 1e5 and data["g"] == 12.0 and data["inf"] == float("inf")
    assert data["t"] == "12" and data["b"] is True and data["n"] is None
    assert str(data["d"]) == "2027-06-30" and data["m"] == {"k": "v"} and data["q"] == [1]


def test_pure_python_events_read_the_same(monkeypatch) -> None:
    """Without libyaml (PyYAML built without it) the same documents load, and the same ones are refused."""
    text = "shots:\n  - {name: a, url: x}\ndefaults: &d {p: 1}\nmore: {<<: *d, q: 2}\n"
    fast = yamlload.load(text)
    monkeypatch.setattr(yamlload, "_EventParser", None)
    assert (
        yamlload.load(text)
        == fast
        == {
            "shots": [{"name": "a", "url": "x"}],
            "defaults": {"p": 1},
            "more": {"p": 1, "q": 2},
        }
    )
    for bad, problem in [
        ("a: !!int abc\n", "!!int"),
        ("[" * 100 + "]" * 100, "nested deeper than 64 levels"),
        ("a: 1\na: 2\n", "duplicate key 'a'"),
    ]:
        with pytest.raises(yamlload.LoadError, match=problem):
            yamlload.load(bad)


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
