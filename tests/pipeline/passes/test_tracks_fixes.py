"""The tracks pass of a shot with fixes: frames a keep_plate fix keeps are ``kept`` (not ``missing``),
an identity fix's frames show its identity, a box fix's face is a track of its own; each marked with
the fix's position, and a shot without fixes writes the records it always did."""

from __future__ import annotations

import json

import numpy as np

from pipeline.passes.tracks import TrackFrame, jsonl, plan_track_frames
from pipeline.tracking import fixes as ops
from pipeline.tracking.faceplan import plan_shot
from pipeline.tracking.fixes import FIX_TRACK_BASE, FixOp, FixSpan, apply_fixes, box_at, switched_tracks
from pipeline.tracking.tracker import track_chunk
from tests.tracking_media import TRACKING, chunk_bounds, frame_times_for, multi_face_shot, selection

FIRST = 1001
FIELDS = ["track", "frame", "state", "identity", "similarity", "box", "landmarks_raw", "landmarks"]


def span(start: int, end: int, j: int) -> FixSpan:
    return FixSpan(name=f"shots[0].fixes[{j}]", label=f"fix {j}", start=start, end=end)


def records(fixes: list[FixOp], *, mode: str = "all") -> list[TrackFrame]:
    """The tracks pass's records of the three-person shot with ``fixes``, planned as the driver plans."""
    shot = multi_face_shot()
    ids: list[list[int]] = []
    state = None
    for start, end in chunk_bounds(len(shot.faces), 3):
        chunk_ids, state = track_chunk(shot.faces[start:end], start, TRACKING, state)
        ids.extend(chunk_ids)
    plan = plan_shot(
        shot.faces,
        ids,
        selection(mode=mode, source="anna"),
        {},
        TRACKING,
        frame_times=frame_times_for(shot.faces),
        also_render=switched_tracks(fixes),
    )
    numbers = list(range(FIRST, FIRST + len(shot.faces)))
    return plan_track_frames(numbers, shot.faces, ids, apply_fixes(plan, fixes), fixes=fixes)


def by_key(rs: list[TrackFrame]) -> dict[tuple[int, int], TrackFrame]:
    return {(r.track, r.frame): r for r in rs}


def late_track(plain: list[TrackFrame]) -> int:
    """The person who enters late and is missed on shot frames 61-63 (bridged there)."""
    return next(r.track for r in plain if r.frame == FIRST + 62 and r.state == "bridged")


def test_a_shot_without_fixes_writes_the_same_fields() -> None:
    plain = records([])
    lines = [json.loads(line) for line in jsonl(plain).decode().splitlines()]
    assert lines and all(list(line) == FIELDS for line in lines)
    assert {r.state for r in plain} == {"detected", "bridged"}


def test_keep_plate_frames_are_kept_not_missing() -> None:
    plain = records([])
    track = late_track(plain)
    fixed = records([ops.KeepPlate(span=span(55, 70, 0), track=track)])
    before, after = by_key(plain), by_key(fixed)
    assert before.keys() == after.keys()
    for key, r in after.items():
        if key[0] == track and FIRST + 55 <= key[1] < FIRST + 70:
            assert r.state == "kept" and r.fix == 0, r
            assert r.identity == before[key].identity == "anna" and r.landmarks is None
        else:
            assert r == before[key]
    assert after[(track, FIRST + 62)].landmarks_raw is None  # missed there and kept: no face at all
    lines = [json.loads(line) for line in jsonl(fixed).decode().splitlines()]
    assert {line.get("fix") for line in lines} == {None, 0}
    assert all(("fix" in line) == (line["state"] == "kept") for line in lines)


def test_identity_fix_frames_show_the_new_identity() -> None:
    plain = records([])
    track = min(r.track for r in plain)
    fixed = records(
        [
            ops.FaceSettings(span=span(0, 5, 0), faces={"enhance": True}),  # a fix's position counts all
            ops.SwitchIdentity(span=span(10, 20, 1), track=track, identity="ben"),
        ]
    )
    before, after = by_key(plain), by_key(fixed)
    for key, r in after.items():
        if key[0] == track and FIRST + 10 <= key[1] < FIRST + 20:
            assert r.identity == "ben" and r.fix == 1 and r.state == before[key].state == "detected"
        else:
            assert r == before[key]


def test_identity_fix_on_a_track_selection_left_untouched() -> None:
    plain = records([], mode="largest")
    track = next(r.track for r in plain if r.identity is None and r.frame == FIRST + 10)
    switch = ops.SwitchIdentity(span=span(10, 20, 0), track=track, identity="ben")
    fixed = by_key(records([switch], mode="largest"))
    assert [fixed[(track, FIRST + f)].identity for f in (9, 10, 19, 20)] == [None, "ben", "ben", None]
    assert fixed[(track, FIRST + 10)].landmarks is not None and fixed[(track, FIRST + 10)].fix == 0


def test_box_fix_face_is_a_track_entry() -> None:
    keys = {40: (300.0, 40.0, 360.0, 110.0), 50: (320.0, 50.0, 380.0, 120.0)}
    plain = records([])
    fixed = records(
        [
            ops.FaceSettings(span=span(0, 120, 0), faces={"mask_blur": 0.2}),
            ops.AddBox(span=span(38, 53, 1), keys=keys, identity="cleo"),
        ]
    )
    box_track = FIX_TRACK_BASE + 1
    boxed = [r for r in fixed if r.track == box_track]
    assert [r.frame for r in boxed] == list(range(FIRST + 38, FIRST + 53))
    for r in boxed:
        assert r.state == "box" and r.identity == "cleo" and r.fix == 1 and r.landmarks_raw is None
        np.testing.assert_allclose(r.box, box_at(keys, r.frame - FIRST), atol=1e-3)
        assert r.landmarks is not None and len(r.landmarks) == 5
    assert [r for r in fixed if r.track != box_track] == plain  # a faces fix marks no record
    line = json.loads(jsonl(boxed[:1]).decode())
    assert line["track"] == box_track and line["state"] == "box" and line["fix"] == 1
