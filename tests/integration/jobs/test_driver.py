"""The driver on a local Ray with several CPU actors: chunks spread, results in order, outputs published."""

from __future__ import annotations

import json
import os

import pytest

from cluster.driver import run_job
from cluster.spec.job import parse_spec
from jobs.demo_media import write_source_image
from pipeline.errors import SpecError
from pipeline.store import storage
from tests.clips import ClipSpec, decoded_indices, write_clip

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("driver-media")
    return {
        "long": write_clip(str(root / "long.mp4"), ClipSpec(frames=96, rate=24, gop=12)),
        "short": write_clip(str(root / "short.mp4"), ClipSpec(frames=40, rate=24, gop=12, audio=False)),
        "source": write_source_image(str(root / "source.jpg")),
    }


def job(media: dict[str, str], out_dir: str, **extra) -> dict:
    data = {
        "job_id": "driver-test",
        "shots": [{"name": "short", "url": media["short"]}, {"name": "long", "url": media["long"]}],
        "identities": {"hero": {"images": [media["source"]], "face_index": 0}},
        "output": {"url": os.path.join(out_dir, "{shot}.mp4"), "preset": "ultrafast"},
        "chunking": {"seconds": 1, "min_seconds": 1, "snap_to_keyframes": False},
        "resources": {"cpus_per_actor": 0.5, "max_actors": 3, "max_inflight_per_actor": 2},
        "faces": {"batch_size": 4},
    }
    data.update(extra)
    return data


def test_two_shots_on_three_actors(ray_local, media, tmp_path) -> None:
    spec = parse_spec(job(media, str(tmp_path)))
    summary = run_job(spec)
    assert summary.ok, summary.table()
    assert summary.actors == 3
    shots = {s.name: s for s in summary.shots}
    assert shots["long"].chunks == 4 and shots["short"].chunks == 2
    for name, frames in (("long", 96), ("short", 40)):
        shot = shots[name]
        assert shot.status == "published" and shot.frames == frames
        # Every frame came back, in order, through chunks rendered on different actors.
        assert decoded_indices(shot.output_url) == list(range(frames))
        assert shot.encoder == "libx264" and shot.faces_swapped == 0
        assert shot.stage_seconds["decode"] > 0 and shot.stage_seconds["merge"] >= 0
    actors_used = set(shots["long"].chunk_actors) | set(shots["short"].chunk_actors)
    assert len(actors_used) >= 2, actors_used
    # Each chunk was analysed, then rendered; no shot's render started before its analysis ended.
    for shot in shots.values():
        kinds = sorted((r["kind"], r["chunk"]) for r in shot.timeline)
        assert kinds == sorted(
            [("analyze", i) for i in range(shot.chunks)] + [("render", i) for i in range(shot.chunks)]
        )
        last_analysis = max(r["end"] for r in shot.timeline if r["kind"] == "analyze")
        assert min(r["start"] for r in shot.timeline if r["kind"] == "render") >= last_analysis - 0.05
    # Longest work first: the long shot's first analysis went out no later than the short shot's.
    first = {name: min(r["start"] for r in s.timeline) for name, s in shots.items()}
    assert first["long"] <= first["short"] + 0.5, first
    assert summary.first_chunk_seconds is not None and summary.first_chunk_seconds <= summary.wall_seconds
    # The summary is written to the work area, and the segments are cleaned up.
    work = os.path.join(str(tmp_path), ".recast-work", "driver-test")
    data = json.loads(storage.read_bytes(os.path.join(work, "summary.json")))
    assert data["ok"] is True and {s["name"] for s in data["shots"]} == {"long", "short"}
    assert not os.path.exists(os.path.join(work, "segments", "long"))

    # The job report (page + data) is beside the summary.
    assert os.path.getsize(os.path.join(work, "report.html")) > 0
    report = json.loads(storage.read_bytes(os.path.join(work, "report.json")))
    assert {s["name"] for s in report["shots"]} == {"long", "short"}

    # The same job again: its manifest says both outputs are its own, unchanged: nothing is redone.
    again = run_job(parse_spec(job(media, str(tmp_path))))
    assert again.ok and again.actors == 0
    assert all(s.reused and s.status == "published" and s.chunks_rendered == 0 for s in again.shots)

    # Existing outputs of another job: fail names the field before any work; skip renders nothing.
    with pytest.raises(SpecError) as err:
        run_job(parse_spec(job(media, str(tmp_path), job_id="other-job")))
    assert err.value.field == "output.if_exists"
    assert "long.mp4" in err.value.reason or "short.mp4" in err.value.reason
    data = job(media, str(tmp_path))
    data["output"]["if_exists"] = "skip"
    skipped = run_job(parse_spec(data))
    assert skipped.ok and {s.status for s in skipped.shots} == {"skipped"} and skipped.actors == 0


def test_bad_source_face_is_named(ray_local, media, tmp_path) -> None:
    from pipeline.errors import FaceError

    data = job(media, str(tmp_path))
    # A frame of the index clip has no face: the identity cannot be built.
    still = os.path.join(str(tmp_path), "noface.png")
    import cv2

    from tests.clips import frame_rgb

    cv2.imwrite(still, frame_rgb(3, 160, 120))
    data["identities"] = {"hero": {"images": [still]}}
    data["resources"] = {"cpus_per_actor": 1, "max_actors": 1}
    with pytest.raises(FaceError) as err:
        run_job(parse_spec(data))
    assert "noface.png" in str(err.value)
    assert not os.path.exists(os.path.join(str(tmp_path), "long.mp4"))


def test_cpu_actors_use_the_cores_they_reserve(media, tmp_path) -> None:
    """CPU actors get intra-op and codec threads equal to their CPU reservation; GPU actors keep the defaults."""
    from cluster.schedule.actor_config import render_config
    from cluster.schedule.pool import PoolPlan

    spec = parse_spec(job(media, str(tmp_path)))
    cpu = render_config(spec, PoolPlan(actors=2, num_cpus=3.0, num_gpus=0.0))
    assert (cpu.execution.intra_op_threads, cpu.codec_threads) == (3, 3)
    half = render_config(spec, PoolPlan(actors=4, num_cpus=0.5, num_gpus=0.0))
    assert (half.execution.intra_op_threads, half.codec_threads) == (1, 1)
    gpu = render_config(spec, PoolPlan(actors=1, num_cpus=4.0, num_gpus=1.0))
    assert (gpu.execution.intra_op_threads, gpu.codec_threads) == (0, 0)


def test_actor_process_env_caps_malloc_arenas_and_keeps_the_jobs(ray_local) -> None:
    """Render actors start with MALLOC_ARENA_MAX (memory flat in shot length) merged into the job's env."""
    import ray

    from actors.render import RenderConfig
    from cluster.schedule.pool import PoolPlan, kill_actors, start_actor
    from tests.raytools import REPO

    handle = start_actor(RenderConfig(), PoolPlan(actors=1, num_cpus=0.5, num_gpus=0.0), "env-probe")
    try:
        env = ray.get(handle.__ray_call__.remote(lambda worker: dict(os.environ)), timeout=120)
    finally:
        kill_actors([("env-probe", handle)])
    assert env["MALLOC_ARENA_MAX"] == "2"
    assert env["PYTHONPATH"] == str(REPO)  # the job's runtime_env env_vars are still there
