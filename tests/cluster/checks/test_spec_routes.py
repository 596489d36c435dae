"""Every ``faces`` key does at shot level what it does at job level (issue 44).

The reference says a shot's ``faces:`` takes "the same keys, defaults and bounds as ``faces``".
This test walks every key of ``FaceConfig``: set to a value other than its default at job level,
then at the level of one shot, it must change the same things of that shot: the keys of its
analyses (what the actors detect and embed: the analysis request carries the shot's settings) and
its render key (what it renders).  A key that changes nothing at either level could not have an
effect and fails here too, and so does a key added to ``FaceConfig`` without a value below.

Before issue 44 the analysis read only the job's ``faces``: ``embed``, ``embed_stride``, ``refine``
and ``detect_size`` set on a shot changed nothing of its analysis.  (The behaviour itself, faces
embedded and enhanced per shot on a real job, is ``tests/integration/jobs/test_shot_faces_job.py``.)
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from cluster.checks.prepare import prepare_job
from cluster.spec.job import parse_spec
from jobs.demo_media import write_source_image
from pipeline.faces.config import FaceConfig
from tests.clips import ClipSpec, write_clip

OTHER_VALUE: dict[str, Any] = {
    "enhance": True,
    "enhance_blend": 0.5,
    "occlusion": True,
    "color_match": False,
    "mask_erode": 0.1,
    "mask_blur": 0.2,
    "batch_size": 4,
    "embed": "every_frame",
    "embed_stride": 4,
    "refine": "off",
    "detect_size": "auto",
}
"""A value other than the default for every key of ``faces``."""


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, str]:
    from bench.models.standins import write_pack

    root = tmp_path_factory.mktemp("routes")
    clip = write_clip(root / "clip.mp4", ClipSpec(frames=48, rate=Fraction(24), gop=12, audio=False))
    write_pack(str(root / "pack"))  # every role: the enhancer and occluder enhance and occlusion need
    return {"clip": clip, "source": write_source_image(str(root / "source.jpg")), "pack": str(root / "pack")}


def _keys(
    inputs: dict[str, str], out: Path, *, job: dict[str, Any], shot: dict[str, Any]
) -> tuple[tuple, str]:
    """(the analysis keys, the render key) of shot ``a`` of a two-shot job with ``job`` as the job's
    ``faces`` and ``shot`` as shot ``a``'s own."""
    spec = {
        "job_id": "routes",
        "shots": [
            {"name": "a", "url": inputs["clip"], **({"faces": shot} if shot else {})},
            {"name": "b", "url": inputs["clip"]},
        ],
        "identities": {"hero": {"images": [inputs["source"]], "face_index": 0}},
        "models": {"pack": inputs["pack"]},
        "output": {"url": str(out / "{shot}.mp4")},
        "chunking": {"seconds": 1.0, "min_seconds": 1.0},
        "faces": job,
    }
    prepared = prepare_job(parse_spec(spec), resume=False)
    (a,) = [p for p in prepared.planned if p.ref.name == "a"]
    return a.analysis_keys, prepared.shot_keys["a"]


def test_every_faces_key_is_walked() -> None:
    assert set(OTHER_VALUE) == set(FaceConfig.model_fields), "give every faces key a value to walk"
    for key, value in OTHER_VALUE.items():
        assert FaceConfig.model_fields[key].default != value, key
        FaceConfig.model_validate({key: value})  # within its bounds


@pytest.mark.parametrize("key", sorted(OTHER_VALUE))
def test_a_faces_key_does_the_same_at_shot_and_job_level(inputs, tmp_path, no_ray, key: str) -> None:
    value = OTHER_VALUE[key]
    out = tmp_path / "out"
    base_analysis, base_render = _keys(inputs, out, job={}, shot={})
    job_analysis, job_render = _keys(inputs, out, job={key: value}, shot={})
    shot_analysis, shot_render = _keys(inputs, out, job={}, shot={key: value})
    at_job = (job_analysis != base_analysis, job_render != base_render)
    at_shot = (shot_analysis != base_analysis, shot_render != base_render)
    assert any(at_job), f"faces.{key}: {value!r} changes neither the analysis nor the render"
    assert at_shot == at_job, (
        f"faces.{key}: at job level it changes (analysis, render) {at_job}, at shot level {at_shot}"
    )
    # The same setting reached the same way is the same work: one key, whichever level set it.
    assert (shot_analysis, shot_render) == (job_analysis, job_render)
