"""A shot's own ``faces:`` takes effect in the analysis as well as the render (issue 44).

One job, two shots of the same real clip (the astronaut, 1 s at 24 fps) on a local Ray with a pack
that has an enhancer (the default pack's real YuNet detector with tiny stand-ins of the recognizer,
swapper and enhancer, the production I/O contracts): the shot whose own ``faces`` says
``embed: every_frame`` and ``enhance: true`` embeds every face it analysed and runs the enhancer;
the other shot, on the job's settings (embed per track, no enhancer), does neither.  Before issue 44
the shot's analysis settings never reached the actors: both shots embedded by track.
"""

from __future__ import annotations

import pytest

from bench.inputs import production_pack
from cluster.driver import run_job
from cluster.spec.job import parse_spec
from jobs.demo_media import make_face_clip, write_source_image

pytestmark = pytest.mark.ray


def test_a_shots_own_faces_settings_reach_its_analysis_and_render(ray_local, tmp_path) -> None:
    clip = make_face_clip(
        str(tmp_path / "plate.mp4"), seconds=1.0, width=320, height=180, gop=12, timecode=None
    )
    pack = production_pack(str(tmp_path), str(tmp_path / "cache"), tiny=True)
    spec = parse_spec(
        {
            "job_id": "shot-faces",
            "shots": [
                {"name": "tuned", "url": clip, "faces": {"embed": "every_frame", "enhance": True}},
                {"name": "plain", "url": clip},
            ],
            "identities": {
                "hero": {"images": [write_source_image(str(tmp_path / "source.jpg"))], "face_index": 0}
            },
            "models": {"pack": pack},
            "output": {"url": str(tmp_path / "out" / "{shot}.mp4"), "preset": "ultrafast"},
            "chunking": {"seconds": 1, "min_seconds": 1, "snap_to_keyframes": False},
            "resources": {"cpus_per_actor": 1, "max_actors": 2},
            "faces": {"embed_stride": 8},
        }
    )
    summary = run_job(spec, resume=False)
    assert summary.ok, summary.table()
    shots = {s.name: s for s in summary.shots}
    tuned, plain = shots["tuned"], shots["plain"]
    assert tuned.faces_analysed >= 20 and plain.faces_analysed == tuned.faces_analysed  # the same clip
    # every_frame: every face analysed is embedded; per track (stride 8): a few of them.
    assert tuned.faces_embedded == tuned.faces_analysed, (tuned.faces_embedded, tuned.faces_analysed)
    assert plain.faces_embedded < plain.faces_analysed // 2, (plain.faces_embedded, plain.faces_analysed)
    # The enhancer ran for the tuned shot's faces only.
    assert tuned.stage_seconds.get("render.enhance", 0.0) > 0, tuned.stage_seconds
    assert plain.stage_seconds.get("render.enhance", 0.0) == 0.0, plain.stage_seconds
    # Their analyses were made two ways, so they are two analyses (never one reused for the other).
    assert tuned.analyses_run == plain.analyses_run == 1
