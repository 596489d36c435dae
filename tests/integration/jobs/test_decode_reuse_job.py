"""One CPU decode per frame: a real job whose renders reuse their analyses' decoded pictures
publishes the very bytes of a job that decodes every frame twice (``resources.decode_cache_mb: 0``)."""

from __future__ import annotations

import os

import pytest

from cluster.driver import run_job
from cluster.spec.job import parse_spec
from jobs.demo_media import make_face_clip, write_source_image
from pipeline.errors import SpecError


def _job(tmp_path, clip: str, source: str, name: str, **resources: object) -> dict:
    return {
        "job_id": "reuse",  # one job id for every run compared: the watermark carries it
        "shots": [{"name": "shot", "url": clip}],
        "identities": {"hero": {"images": [source], "face_index": 0}},
        "output": {"url": os.path.join(str(tmp_path), name, "{shot}.mp4"), "preset": "ultrafast"},
        "chunking": {"seconds": 1, "min_seconds": 1, "snap_to_keyframes": False},
        "resources": {"cpus_per_actor": 1, "max_actors": 1, **resources},
        "faces": {"batch_size": 4},
    }


@pytest.mark.parametrize("value", [-1, "lots", 1.5, True, None, 2 * 1024 * 1024])
def test_a_bad_budget_is_refused_by_name(tmp_path, value: object) -> None:
    data = _job(tmp_path, "clip.mp4", "source.jpg", "bad", decode_cache_mb=value)
    with pytest.raises(SpecError) as caught:
        parse_spec(data)
    assert caught.value.field == "resources.decode_cache_mb"


def test_the_budget_reaches_every_actor(tmp_path) -> None:
    from cluster.schedule.actor_config import render_config
    from cluster.schedule.pool import PoolPlan

    plan = PoolPlan(actors=1, num_cpus=1, num_gpus=0)
    spec = parse_spec(_job(tmp_path, "clip.mp4", "source.jpg", "default"))
    assert render_config(spec, plan).decode_cache_mb == 2048
    spec = parse_spec(_job(tmp_path, "clip.mp4", "source.jpg", "off", decode_cache_mb=0))
    assert render_config(spec, plan).decode_cache_mb == 0


@pytest.mark.ray
def test_renders_reuse_the_analysis_decode_and_publish_the_same_bytes(ray_local, tmp_path) -> None:
    clip = make_face_clip(str(tmp_path / "shot.mp4"), seconds=2, fps=24, width=320, height=180, gop=12)
    source = write_source_image(str(tmp_path / "source.jpg"))
    cached = run_job(parse_spec(_job(tmp_path, clip, source, "cached")))
    decoded = run_job(parse_spec(_job(tmp_path, clip, source, "decoded", decode_cache_mb=0)))
    assert cached.ok and decoded.ok, (cached.table(), decoded.table())
    one, two = cached.shots[0], decoded.shots[0]
    assert one.chunks == 2 and one.frames == 48 and one.faces_swapped > 0
    assert one.content_sha256 == two.content_sha256 and one.output_bytes == two.output_bytes
    # Both chunks fit the default budget: every render converted the analysis' pictures.
    assert (one.frames_rendered, one.frames_decoded, one.frames_reused) == (48, 48, 48)
    assert (two.frames_rendered, two.frames_decoded, two.frames_reused) == (48, 96, 0)
    assert cached.decode_calls_per_frame == 1.0 and cached.to_dict()["decode_calls_per_frame"] == 1.0
    assert decoded.decode_calls_per_frame == 2.0 and decoded.to_dict()["decode_calls_per_frame"] == 2.0
