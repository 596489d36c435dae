"""First output sooner: a shot tracked while a later shot is analysed gets its renders first."""

from __future__ import annotations

import json
import os

import pytest

from cluster.driver import run_job
from cluster.spec.job import parse_spec
from jobs.demo_media import write_source_image
from pipeline.store import storage
from tests.clips import ClipSpec, write_clip

pytestmark = pytest.mark.ray


def two_shot_job(tmp_path, order: str | None = None) -> dict:
    """A 4-chunk shot, then a 2-chunk one, on one actor that may hold 2 calls (one running, one queued)."""
    media = tmp_path / "media"
    media.mkdir()
    resources: dict = {"cpus_per_actor": 1, "max_actors": 1, "max_inflight_per_actor": 2}
    if order is not None:
        resources["dispatch_order"] = order
    return {
        "job_id": "first-shot",
        "shots": [
            {"name": "later", "url": write_clip(str(media / "later.mp4"), ClipSpec(frames=48, rate=24))},
            {"name": "first", "url": write_clip(str(media / "first.mp4"), ClipSpec(frames=96, rate=24))},
        ],
        "identities": {"hero": {"images": [write_source_image(str(media / "source.jpg"))], "face_index": 0}},
        "output": {"url": str(tmp_path / "out" / "{shot}.mp4"), "preset": "ultrafast"},
        "chunking": {"seconds": 1, "min_seconds": 1, "snap_to_keyframes": False},
        "resources": resources,
    }


def test_tracked_shot_renders_before_later_analyses(ray_local, tmp_path) -> None:
    summary = run_job(parse_spec(two_shot_job(tmp_path)))
    assert summary.ok, summary.table()
    shots = {s.name: s for s in summary.shots}
    assert (shots["first"].chunks, shots["later"].chunks) == (4, 2)
    first, later = shots["first"].timeline, shots["later"].timeline
    analyses = sorted(r["start"] for r in later if r["kind"] == "analyze")
    # The longest shot is analysed first; once it is tracked, the one analysis the actor took while
    # its face plan was made is the only one ahead of its renders: the later shot's last analysis
    # waits until they have run (before, it was queued on the actor and ran first).
    renders = [r for r in first if r["kind"] == "render"]
    assert len(renders) == 4 and len(analyses) == 2
    assert max(r["start"] for r in renders) < analyses[-1], (first, later)
    # So the first shot is published before the last analysis of the job ends.
    last_analysis_end = max(r["end"] for r in first + later if r["kind"] == "analyze")
    assert summary.first_shot_seconds is not None
    assert summary.first_shot_seconds < last_analysis_end, (summary.first_shot_seconds, later)
    assert summary.first_shot_seconds <= summary.wall_seconds
    # Written in summary.json and shown in the table.
    work = os.path.join(str(tmp_path / "out"), ".recast-work", "first-shot")
    data = json.loads(storage.read_bytes(os.path.join(work, "summary.json")))
    assert data["first_shot_seconds"] == round(summary.first_shot_seconds, 3)
    assert f"first shot {summary.first_shot_seconds:.1f}s" in summary.table()
