"""Job spec validation: every error names its dotted field; relative paths resolve; patterns expand."""

from __future__ import annotations

import os

import pytest
import yaml

from cluster.spec.job import load_spec, parse_spec
from cluster.spec.shot_refs import expand_shots, work_url_for
from pipeline.errors import SpecError


def base() -> dict:
    return {
        "job_id": "ep1",
        "shots": [{"name": "a", "url": "/data/a.mp4"}, {"url": "/data/b.mov"}],
        "identities": {"hero": {"images": ["/refs/hero.jpg"]}},
        "output": {"url": "/out/{shot}.mp4"},
    }


def test_minimal_spec_defaults() -> None:
    spec = parse_spec(base())
    assert spec.selection.mode == "all" and spec.selection.source == "hero"
    assert spec.chunking.seconds == 20 and spec.output.codec == "h264" and spec.output.if_exists == "fail"
    assert spec.models.pack == "builtin:default"
    shots = expand_shots(spec)
    assert [(s.name, s.output_url) for s in shots] == [("a", "/out/a.mp4"), ("b", "/out/b.mp4")]
    assert work_url_for(spec, shots) == "/out/.recast-work/ep1"
    assert spec.output.encode_settings().codec == "h264"


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (lambda d: d["shots"][1].update(url=None, pattern=None), "shots[1]", "exactly one"),
        (lambda d: d["shots"][1].update(tint="red"), "shots[1].tint", "unknown key"),
        (lambda d: d.update(shotz=[]), "shotz", "unknown key"),
        (lambda d: d["output"].update(codec="av1"), "output.codec", "h264"),
        (lambda d: d["output"].update(url="/out/{shot}.avi"), "output.url", ".mp4"),
        (lambda d: d["output"].update(codec="prores"), "output", ".mov"),
        (lambda d: d.update(chunking={"seconds": 5}), "chunking", "between 10 and 30"),
        (lambda d: d.update(chunking={"seconds": 2, "min_seconds": 0.5}), "chunking.min_seconds", "1"),
        (lambda d: d.update(selection={"mode": "all", "source": "villain"}), "selection.source", "villain"),
        (lambda d: d["identities"]["hero"].update(images=[]), "identities.hero.images", "at least 1"),
        (lambda d: d.update(resources={"max_actors": 0}), "resources.max_actors", "greater than"),
        (
            lambda d: d.update(resources={"dispatch_order": "fifo"}),
            "resources.dispatch_order",
            "render_first",
        ),
        (lambda d: d.pop("output"), "output", "required"),
        (lambda d: d.update(job_id="a b"), "job_id", "letters"),
        (lambda d: d.update(tracking={"max_gap_frames": -1}), "tracking.max_gap_frames", "greater"),
    ],
)
def test_errors_name_the_field(mutate, field: str, words: str) -> None:
    data = base()
    mutate(data)
    with pytest.raises(SpecError) as err:
        parse_spec(data)
    assert err.value.field == field, str(err.value)
    assert words in err.value.reason, str(err.value)


def test_relative_paths_resolve_against_the_spec_file(tmp_path) -> None:
    data = base()
    data["shots"] = [{"url": "plates/a.mp4"}]
    data["output"] = {"url": "out/{shot}.mp4"}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    spec = load_spec(str(path))
    assert spec.shots[0].url == str(tmp_path / "plates/a.mp4")
    assert spec.output.url == str(tmp_path / "out/{shot}.mp4")


def test_bad_yaml_and_missing_file(tmp_path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text("job_id: [unclosed")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec(str(path))
    from pipeline.errors import StorageError

    with pytest.raises(StorageError, match="not found"):
        load_spec(str(tmp_path / "nope.yaml"))


def test_patterns_expand_and_names_must_be_unique(tmp_path) -> None:
    for name in ("s2.mp4", "s1.mp4", "notes.txt"):
        (tmp_path / name).write_bytes(b"x")
    data = base()
    data["shots"] = [{"pattern": os.path.join(tmp_path, "*.mp4")}]
    assert [s.name for s in expand_shots(parse_spec(data))] == ["s1", "s2"]
    data["shots"].append({"url": str(tmp_path / "s1.mp4")})
    with pytest.raises(SpecError) as err:
        expand_shots(parse_spec(data))
    assert err.value.field == "shots" and "s1" in err.value.reason
    data["shots"] = [{"pattern": os.path.join(tmp_path, "*.mkv")}]
    with pytest.raises(SpecError) as err:
        expand_shots(parse_spec(data))
    assert err.value.field == "shots[0].pattern"


def test_patterns_expand_on_s3(s3_bucket: str) -> None:
    from pipeline.store import storage

    for name in ("x1.mp4", "x2.mp4"):
        storage.write_bytes(f"{s3_bucket}/plates/{name}", b"x")
    data = base()
    data["shots"] = [{"pattern": f"{s3_bucket}/plates/*.mp4"}]
    shots = expand_shots(parse_spec(data))
    assert [s.url for s in shots] == [f"{s3_bucket}/plates/x1.mp4", f"{s3_bucket}/plates/x2.mp4"]


def test_single_output_needs_no_placeholder_but_many_do() -> None:
    data = base()
    data["output"] = {"url": "/out/final.mp4"}
    with pytest.raises(SpecError) as err:
        expand_shots(parse_spec(data))
    assert err.value.field == "output.url"
    data["shots"] = data["shots"][:1]
    assert expand_shots(parse_spec(data))[0].output_url == "/out/final.mp4"


def test_per_shot_output_overrides_the_template() -> None:
    data = base()
    data["shots"][1]["output"] = "s3://b/special.mov"
    shots = expand_shots(parse_spec(data))
    assert [s.output_url for s in shots] == ["/out/a.mp4", "s3://b/special.mov"]
    data["shots"][1]["output"] = "/out/a.mp4"
    with pytest.raises(SpecError) as err:
        expand_shots(parse_spec(data))
    # Named by the field that gives the second shot's output: its own override.
    assert err.value.field == "shots[1].output" and "/out/a.mp4" in err.value.reason
