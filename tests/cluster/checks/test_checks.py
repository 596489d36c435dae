"""The checks before Ray (``cluster.checks.prepare.prepare_job``) on real files, with Ray never started."""

from __future__ import annotations

import os
import shutil
from fractions import Fraction
from pathlib import Path

import pytest

from cluster.checks.prepare import prepare_job
from cluster.spec.job import parse_spec
from jobs.demo_media import write_source_image
from pipeline.errors import SpecError
from tests.clips import ClipSpec, write_clip


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("checks")
    # 2 s at 24 fps with a keyframe every 12 frames, and 3 s: 2 and 3 chunks of 1 s.
    short = write_clip(root / "short.mp4", ClipSpec(frames=48, rate=Fraction(24), gop=12, audio=False))
    long = write_clip(root / "long.mp4", ClipSpec(frames=72, rate=Fraction(24), gop=12, audio=False))
    return {
        "short": short,
        "long": long,
        "source": write_source_image(str(root / "source.jpg")),
        "root": str(root),
    }


def _spec(inputs: dict[str, str], out: Path, **output: object) -> dict:
    return {
        "job_id": "checks",
        "shots": [{"name": "short", "url": inputs["short"]}, {"name": "long", "url": inputs["long"]}],
        "identities": {"hero": {"images": [inputs["source"]], "face_index": 0}},
        "output": {"url": str(out / "{shot}.mp4"), **output},
        "chunking": {"seconds": 1.0, "min_seconds": 1.0},
    }


def test_a_job_is_planned_without_ray(inputs, tmp_path, no_ray) -> None:
    prepared = prepare_job(parse_spec(_spec(inputs, tmp_path)), resume=None)

    assert [p.ref.name for p in prepared.planned] == ["long", "short"]  # the most work first
    assert [len(p.plan.chunks) for p in prepared.planned] == [3, 2]
    assert prepared.chunk_count == 5 and not prepared.resumed and not prepared.skipped
    assert set(prepared.shot_keys) == {"short", "long"}
    long = prepared.planned[0]
    assert len(set(long.analysis_keys)) == 3  # one key per chunk
    # The same inputs give the same keys; a changed render setting changes the shot's key only.
    again = prepare_job(parse_spec(_spec(inputs, tmp_path)), resume=False)
    assert again.shot_keys == prepared.shot_keys
    assert again.planned[0].analysis_keys == long.analysis_keys
    enhanced = prepare_job(parse_spec({**_spec(inputs, tmp_path), "faces": {"mask_blur": 0.2}}), resume=False)
    assert enhanced.planned[0].analysis_keys == long.analysis_keys
    assert enhanced.shot_keys["long"] != prepared.shot_keys["long"]


def test_the_embedding_schedule_and_detect_size_are_in_the_analysis_key(inputs, tmp_path, no_ray) -> None:
    def keys(faces: dict) -> tuple:
        spec = parse_spec({**_spec(inputs, tmp_path), "faces": faces})
        return prepare_job(spec, resume=False).planned[0].analysis_keys

    track = keys({})
    assert keys({"embed": "track", "embed_stride": 8}) == track
    others = [
        keys({"embed": "every_frame"}),
        keys({"embed_stride": 4}),
        keys({"detect_size": "auto"}),
    ]
    assert len({track, *others}) == 4  # analyses made another way are never reused for this one


def test_auto_detection_made_the_old_way_is_not_reused(inputs, tmp_path, no_ray, monkeypatch) -> None:
    import cluster.state.keys

    spec = parse_spec({**_spec(inputs, tmp_path), "faces": {"detect_size": "auto"}})
    now = prepare_job(spec, resume=False).planned[0].analysis_keys
    monkeypatch.setattr(cluster.state.keys, "AUTO_DETECT_VERSION", 1)  # tiles only, before smaller inputs
    assert set(prepare_job(spec, resume=False).planned[0].analysis_keys).isdisjoint(now)


def test_an_existing_output_is_refused_before_anything_is_written(inputs, tmp_path, no_ray) -> None:
    out = tmp_path / "deliveries"
    out.mkdir()
    (out / "short.mp4").write_bytes(b"the delivery")
    with pytest.raises(SpecError, match="output.if_exists") as err:
        prepare_job(parse_spec(_spec(inputs, out)), resume=None)
    assert str(out / "short.mp4") in str(err.value)
    assert (out / "short.mp4").read_bytes() == b"the delivery"
    assert not (out / ".recast-work").exists()  # no work area either
    skipped = prepare_job(parse_spec(_spec(inputs, out, if_exists="skip")), resume=None)
    assert [s.name for s in skipped.skipped] == ["short"] and [p.ref.name for p in skipped.planned] == [
        "long"
    ]


def test_resume_without_a_manifest_names_it(inputs, tmp_path, no_ray) -> None:
    with pytest.raises(SpecError, match="--resume") as err:
        prepare_job(parse_spec(_spec(inputs, tmp_path)), resume=True)
    assert "manifest" in str(err.value)


# -- paths: escapes, collisions, inputs never replaced, no folders left ------------------------


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize(
    ("output", "field"),
    [
        ({"url": "{root}/deliveries/../escaped/{{shot}}.mp4"}, "output.url"),
        ({"url": "{root}/deliveries/{{shot}}.mp4", "work_url": "{root}/work/../../escaped/{{job_id}}"}, "output.work_url"),
        ({"url": "{root}/deliveries/{{shot}}.mp4", "passes": ["matte"], "pass_url": "{root}/p/{{shot}}/../../../escaped/{{pass}}"}, "output.pass_url"),
    ],
)  # fmt: skip
def test_templates_that_leave_their_folder_are_refused(inputs, tmp_path, output, field, no_ray) -> None:
    root = tmp_path / "job"
    for folder in ("deliveries", "work", "p"):
        (root / folder).mkdir(parents=True)
    spec = _spec(inputs, root)
    spec["output"] = {k: v.format(root=root) if isinstance(v, str) else v for k, v in output.items()}
    with pytest.raises(SpecError, match="'..'") as err:
        prepare_job(parse_spec(spec), resume=None)
    assert err.value.field == field
    assert _tree(tmp_path) == ["job", "job/deliveries", "job/p", "job/work"]  # nothing created anywhere


@pytest.mark.parametrize(
    ("outputs", "field"),
    [
        # Spelt differently, the same file: "." and empty segments, a symlinked folder.
        ({"short": "{out}/x.mp4", "long": "{out}/./x.mp4"}, "shots[1].output"),
        ({"short": "{out}//long.mp4"}, "output.url"),
        ({"short": "{link}/long.mp4"}, "output.url"),
        # Two outputs apart whose passes are the same frames (a video's passes drop its extension).
        ({"short": "{out}/x.mp4", "long": "{out}/x.mov"}, "output.passes"),
    ],
)
def test_outputs_that_are_the_same_file_are_refused(inputs, tmp_path, outputs, field, no_ray) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "link").symlink_to(out)
    spec = _spec(inputs, out, passes=["matte"])
    for shot in spec["shots"]:
        if shot["name"] in outputs:
            shot["output"] = outputs[shot["name"]].format(out=out, link=tmp_path / "link")
    with pytest.raises(SpecError, match="are the same file") as err:
        prepare_job(parse_spec(spec), resume=None)
    assert err.value.field == field
    assert os.listdir(out) == []


@pytest.mark.parametrize("if_exists", ["overwrite", "skip", "fail"])
def test_an_output_never_replaces_a_source(inputs, tmp_path, if_exists, no_ray) -> None:
    plates = tmp_path / "plates"
    plates.mkdir()
    source = plates / "sc01.mp4"
    shutil.copyfile(inputs["short"], source)
    (tmp_path / "plates-link").symlink_to(plates)
    before = source.read_bytes()
    for output in (str(source), str(tmp_path / "plates-link" / "sc01.mp4"), f"{plates}/./sc01.mp4"):
        spec = _spec(inputs, tmp_path, if_exists=if_exists)
        spec["shots"] = [{"name": "sc01", "url": str(source), "output": output}]
        with pytest.raises(SpecError, match="would replace shot sc01's source") as err:
            prepare_job(parse_spec(spec), resume=None)
        # The message names the output in its canonical spelling (./ collapsed at the spec boundary).
        assert (
            err.value.field == "shots[0].output"
            and os.path.normpath(output) in str(err.value)
            and str(source) in str(err.value)
        )
    # Another shot's source, through output.url.
    spec = _spec(inputs, plates, if_exists=if_exists)
    spec["shots"] = [{"name": "sc01", "url": inputs["long"]}, {"name": "other", "url": str(source)}]
    with pytest.raises(SpecError, match="shot sc01's output .* would replace shot other's source") as err:
        prepare_job(parse_spec(spec), resume=None)
    assert err.value.field == "output.url"
    # A pass onto an identity picture is refused the same way.
    picture = plates / "short_matte.0000.exr"
    picture.write_bytes(b"not really a picture, but read as one")
    spec = _spec(inputs, plates, if_exists=if_exists, passes=["matte"])
    spec["identities"]["hero"]["images"].append(str(picture))
    with pytest.raises(SpecError, match="would replace identity hero's picture"):
        prepare_job(parse_spec(spec), resume=None)
    assert source.read_bytes() == before


def test_a_sequence_output_never_lands_on_source_frames(tmp_path, no_ray) -> None:
    from tests.plates import write_sequence

    plates = tmp_path / "plates"
    pattern = write_sequence(plates, "sc010_plate", count=3, first=1001, size=(64, 48))
    frames = sorted(os.listdir(plates))
    spec = {
        "job_id": "plates",
        "shots": [{"name": "sc010", "url": pattern}],
        "identities": {"hero": {"images": [write_source_image(str(tmp_path / "source.jpg"))]}},
        "output": {"url": str(plates / "sc010_plate.%04d.exr"), "if_exists": "overwrite"},
    }
    with pytest.raises(SpecError, match="would replace shot sc010's source") as err:
        prepare_job(parse_spec(spec), resume=None)
    assert err.value.field == "output.url"
    # Frames that are symlinks into the delivery folder: writing there would change the plate.
    vault = tmp_path / "vault"
    vault.mkdir()
    linked = tmp_path / "linked"
    linked.mkdir()
    for name in frames:
        shutil.move(plates / name, vault / name.replace("sc010_plate", "sc010_recast"))
        (linked / name).symlink_to(vault / name.replace("sc010_plate", "sc010_recast"))
    spec["shots"] = [{"name": "sc010", "url": str(linked / "sc010_plate.####.exr")}]
    spec["output"]["url"] = str(vault / "{shot}_recast.####.exr")
    with pytest.raises(SpecError, match="would replace shot sc010's source frame 1001"):
        prepare_job(parse_spec(spec), resume=None)
    assert sorted(os.listdir(vault)) == [n.replace("sc010_plate", "sc010_recast") for n in frames]


def test_the_work_area_holds_neither_outputs_nor_inputs(inputs, tmp_path, no_ray) -> None:
    spec = _spec(inputs, tmp_path / "out", work_url=str(tmp_path))
    spec["shots"][0]["output"] = str(tmp_path / "segments" / "short.mp4")
    with pytest.raises(SpecError, match="one of the work area's own files") as err:
        prepare_job(parse_spec(spec), resume=None)
    assert err.value.field == "output.work_url"
    spec = _spec(inputs, tmp_path / "out", work_url=str(Path(inputs["short"]).parent.parent))
    spec["shots"][0]["url"] = shutil.copyfile(inputs["short"], tmp_path / "manifest.mp4")
    spec["output"]["work_url"] = str(tmp_path)
    os.makedirs(tmp_path / "manifest")
    os.replace(tmp_path / "manifest.mp4", tmp_path / "manifest" / "short.mp4")
    spec["shots"][0]["url"] = str(tmp_path / "manifest" / "short.mp4")
    with pytest.raises(SpecError, match="shot short's source .* one of the work area's own files"):
        prepare_job(parse_spec(spec), resume=None)
    # Beside the work area's own files, outputs are fine.
    prepared = prepare_job(parse_spec(_spec(inputs, tmp_path / "out", work_url=str(tmp_path / "out"))))
    assert prepared.work_url == str(tmp_path / "out")


def test_an_existing_pass_is_refused_like_an_existing_output(inputs, tmp_path, no_ray) -> None:
    (tmp_path / "long_matte.0003.exr").write_bytes(b"a compositor's matte")
    with pytest.raises(SpecError, match="long_matte.*pass.* already exists") as err:
        prepare_job(parse_spec(_spec(inputs, tmp_path, passes=["matte"])), resume=None)
    assert err.value.field == "output.if_exists"
    prepare_job(parse_spec(_spec(inputs, tmp_path, passes=["matte"], if_exists="overwrite")), resume=None)
    assert (tmp_path / "long_matte.0003.exr").read_bytes() == b"a compositor's matte"


def test_a_refused_job_leaves_no_folders(inputs, tmp_path, no_ray) -> None:
    # The outputs' folder is writable (checked, then removed again); the work area is not.
    spec = _spec(inputs, tmp_path / "new" / "deliveries", work_url="/proc/recast-test/{job_id}")
    with pytest.raises(Exception, match="/proc/recast-test"):
        prepare_job(parse_spec(spec), resume=None)
    assert os.listdir(tmp_path) == []
