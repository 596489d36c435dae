"""plan_chunks(): validated lengths, cuts at source timestamps, keyframe snapping, serialisation."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from pipeline.errors import SpecError
from pipeline.video.chunking import ChunkPlan, plan_chunks
from pipeline.video.probe import VideoInfo
from tests.clips import info_from_timestamps


def _cfr(seconds: float, gop: int = 50) -> VideoInfo:
    n = round(seconds * 25)
    return info_from_timestamps([i * 40 for i in range(n)], list(range(0, n, gop)))


@pytest.mark.parametrize("seconds", [9.99, 30.01, float("nan"), 0.0, -5.0])
def test_chunk_length_out_of_range_is_a_spec_error(seconds: float) -> None:
    with pytest.raises(SpecError) as err:
        plan_chunks(_cfr(60), seconds)
    assert err.value.field == "chunk_seconds"


def test_plan_tiles_every_frame_once_and_serialises() -> None:
    info = _cfr(100)
    plan = plan_chunks(info, 20)
    assert len(plan.chunks) == 5
    assert plan.chunks[0].start_frame == 0 and plan.chunks[-1].end_frame == info.frame_count
    for a, b in zip(plan.chunks, plan.chunks[1:]):
        assert a.end_frame == b.start_frame and a.end_pts == b.start_pts == info.pts[b.start_frame]
    assert plan.chunks[-1].end_pts == info.end_pts()
    assert ChunkPlan.from_dict(plan.to_dict()) == plan
    assert pickle.loads(pickle.dumps(plan)) == plan


def test_cuts_snap_to_nearby_keyframes_or_stay_put() -> None:
    # Keyframes every 1.2 s (30 frames): a cut at 20 s (frame 500) snaps to frame 510.
    info = _cfr(60, gop=30)
    snapped = plan_chunks(info, 20)
    assert [c.start_frame for c in snapped.chunks[1:]] == [510, 990]
    assert all(c.start_frame in info.keyframes for c in snapped.chunks)
    exact = plan_chunks(info, 20, snap_to_keyframes=False)
    assert [c.start_frame for c in exact.chunks[1:]] == [500, 1000]
    # No keyframe within the window: the cut stays at the timestamp.
    sparse = info_from_timestamps(list(range(0, 60_000, 40)), [0])
    assert [c.start_frame for c in plan_chunks(sparse, 20).chunks[1:]] == [500, 1000]


def test_short_shot_is_one_chunk_and_vfr_cuts_at_timestamps() -> None:
    assert len(plan_chunks(_cfr(9.5), 20).chunks) == 1
    # VFR: first 10 s at 50 fps, then 10 s at 10 fps; a 10 s cut lands on the frame at 10.000 s.
    pts = [i * 20 for i in range(500)] + [10_000 + i * 100 for i in range(100)]
    plan = plan_chunks(info_from_timestamps(pts, [0]), 10)
    assert [(c.start_frame, c.start_pts) for c in plan.chunks] == [(0, 0), (500, 10_000)]


def test_tiny_chunks_for_tests_and_bad_plans_rejected() -> None:
    info = _cfr(3, gop=12)
    plan = plan_chunks(info, 1.0, min_seconds=0.5, snap_to_keyframes=False)
    assert [(c.start_frame, c.end_frame) for c in plan.chunks] == [(0, 25), (25, 50), (50, 75)]
    broken = plan.to_dict()
    broken["chunks"][1][1] = 26
    with pytest.raises(SpecError):
        ChunkPlan.from_dict(broken)
    assert dataclasses.asdict(plan.chunks[0])["end_frame"] == 25
