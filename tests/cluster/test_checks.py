"""The checks before Ray (``cluster.checks.prepare_job``) on real files, with Ray never started."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from cluster.checks import prepare_job
from cluster.spec import parse_spec
from jobs.bench.clips import write_source_image
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


def _spec(inputs: dict[str, str], out: Path, **output: str) -> dict:
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
