"""Fixes applied to a shot's face plan: keep the plate, another identity, a missed face's box, render
settings on a range; a fix naming a track not on its frames is refused naming it; track ids stable."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.errors import SpecError
from pipeline.tracking import fixes as ops
from pipeline.tracking.faceplan import ShotFacePlan, plan_shot
from pipeline.tracking.fixes import FIX_TRACK_BASE, FixOp, FixSpan, apply_fixes, switched_tracks
from pipeline.tracking.tracker import TrackingConfig, track_chunk
from tests.tracking_media import chunk_bounds, frame_times_for, multi_face_shot, selection

CONFIG = TrackingConfig()


def span(start: int, end: int, j: int = 0) -> FixSpan:
    return FixSpan(
        name=f"shots[0].fixes[{j}]", label=f"fix {j} (frames {start}-{end - 1})", start=start, end=end
    )


def track_ids_of(faces, n_chunks: int = 3) -> list[list[int]]:
    ids: list[list[int]] = []
    state = None
    for start, end in chunk_bounds(len(faces), n_chunks):
        chunk_ids, state = track_chunk(faces[start:end], start, CONFIG, state)
        ids.extend(chunk_ids)
    return ids


def planned(fixes: list[FixOp], sel=None) -> tuple[ShotFacePlan, ShotFacePlan]:
    """The plan of the three-person shot without fixes, and with ``fixes`` applied."""
    shot = multi_face_shot()
    ids = track_ids_of(shot.faces)
    sel = sel or selection(mode="all", source="anna")
    times = frame_times_for(shot.faces)
    plain = plan_shot(shot.faces, ids, sel, {}, CONFIG, frame_times=times)
    base = plan_shot(shot.faces, ids, sel, {}, CONFIG, frame_times=times, also_render=switched_tracks(fixes))
    return plain, apply_fixes(base, fixes)


def tracks_on(plan: ShotFacePlan, f: int) -> list[int]:
    return [t.track_id for t in plan.tasks[f]]


def test_keep_plate_removes_that_track_on_exactly_those_frames() -> None:
    plain, _ = planned([])
    track = sorted(plain.tracks)[1]
    plain, fixed = planned([ops.KeepPlate(span=span(20, 41), track=track)])
    for f in range(plain.num_frames):
        expected = [t for t in plain.tasks[f] if not (20 <= f <= 40 and t.track_id == track)]
        assert [(t.track_id, t.identity) for t in fixed.tasks[f]] == [
            (t.track_id, t.identity) for t in expected
        ]
        for a, b in zip(fixed.tasks[f], expected, strict=True):
            np.testing.assert_array_equal(a.landmarks, b.landmarks)
    assert track in tracks_on(plain, 20) and track in tracks_on(plain, 40)
    assert track not in tracks_on(fixed, 20) and track not in tracks_on(fixed, 40)
    assert track in tracks_on(fixed, 19) and track in tracks_on(fixed, 41)
    assert fixed.tracks == plain.tracks  # what QC and the summary show stays the analysis'


def test_identity_switch_on_a_range() -> None:
    plain, _ = planned([])
    track = min(plain.tracks)
    _, fixed = planned([ops.SwitchIdentity(span=span(10, 20), track=track, identity="ben")])
    for f in range(plain.num_frames):
        for task in fixed.tasks[f]:
            want = "ben" if task.track_id == track and 10 <= f < 20 else "anna"
            assert task.identity == want, (f, task.track_id)
    assert sum(len(f) for f in fixed.tasks) == sum(len(f) for f in plain.tasks)


def test_identity_switch_renders_a_track_selection_left_untouched() -> None:
    sel = selection(mode="largest", source="anna")
    plain, _ = planned([], sel)
    untouched = next(t for t, s in sorted(plain.tracks.items()) if s.identity is None)
    _, fixed = planned([ops.SwitchIdentity(span=span(50, 60), track=untouched, identity="ben")], sel)
    on = [f for f in range(plain.num_frames) if untouched in tracks_on(fixed, f)]
    assert on and set(on) <= set(range(50, 60))
    assert all(
        t.identity == "ben" and "undecided" not in t.extra
        for f in on
        for t in fixed.tasks[f]
        if t.track_id == untouched
    )
    assert not any(t.extra.get("undecided") for frame in fixed.tasks for t in frame)


def test_keyframed_box_is_interpolated_with_landmarks_on_every_frame() -> None:
    keys = {5: (100.0, 100.0, 200.0, 220.0), 15: (120.0, 110.0, 220.0, 230.0)}
    plain, fixed = planned([ops.AddBox(span=span(5, 21, 3), keys=keys, identity="cleo")])
    for f in range(plain.num_frames):
        added = [t for t in fixed.tasks[f] if t.track_id == FIX_TRACK_BASE]
        assert len(added) == (1 if 5 <= f <= 20 else 0), f
        if not added:
            continue
        task = added[0]
        assert task.identity == "cleo" and task.extra == {"fix_box": True}
        k = min(max(f, 5), 15)
        want = np.array(keys[5]) + (np.array(keys[15]) - np.array(keys[5])) * (k - 5) / 10
        np.testing.assert_allclose(task.box, want, atol=1e-4)
        x0, y0, x1, y1 = task.box
        assert task.landmarks.shape == (5, 2)
        assert np.all((task.landmarks[:, 0] > x0) & (task.landmarks[:, 0] < x1))
        assert np.all((task.landmarks[:, 1] > y0) & (task.landmarks[:, 1] < y1))
        assert task.landmarks[0, 0] < task.landmarks[1, 0]  # left eye left of the right eye
        assert task.landmarks[2, 1] < task.landmarks[3, 1]  # the nose above the mouth


def test_faces_settings_on_a_range_only() -> None:
    plain, fixed = planned([ops.FaceSettings(span=span(30, 36), faces={"enhance": True, "mask_blur": 0.12})])
    for f in range(plain.num_frames):
        for task in fixed.tasks[f]:
            if 30 <= f < 36:
                assert task.extra["faces"] == {"enhance": True, "mask_blur": 0.12}
            else:
                assert "faces" not in task.extra
    assert any(fixed.tasks[f] for f in range(30, 36))


@pytest.mark.parametrize("faces_first", [True, False])
def test_faces_settings_reach_a_box_fix_on_their_frames_whatever_the_order(faces_first: bool) -> None:
    """A box added on frames a ``faces`` fix covers renders with its settings, listed before it or after."""
    box = ops.AddBox(span=span(28, 34), keys={28: (100.0, 100.0, 200.0, 220.0)}, identity="cleo")
    settings = ops.FaceSettings(span=span(30, 36), faces={"mask_erode": 0.3})
    _, fixed = planned([settings, box] if faces_first else [box, settings])
    for f in range(28, 38):
        assert fixed.tasks[f], f
        want = {"mask_erode": 0.3} if 30 <= f < 36 else None
        for task in fixed.tasks[f]:
            assert task.extra.get("faces") == want, (f, task.track_id)
    assert {t.track_id for f in range(30, 34) for t in fixed.tasks[f]} >= {FIX_TRACK_BASE + int(faces_first)}


def test_a_track_not_on_the_frames_is_refused_naming_the_fix_and_the_tracks_there() -> None:
    plain, _ = planned([])
    late = max(plain.tracks, key=lambda t: plain.tracks[t].first_frame)
    first = plain.tracks[late].first_frame
    assert first > 5
    there = sorted(t for t, s in plain.tracks.items() if s.first_frame <= 4 and s.last_frame >= 0)
    with pytest.raises(SpecError) as err:
        planned([ops.KeepPlate(span=span(0, 5, 2), track=late)])
    assert err.value.field == "shots[0].fixes[2]"
    assert f"track {late} is not on these frames" in str(err.value)
    assert f"tracks there: {', '.join(map(str, there))}" in str(err.value)


def test_a_fix_outside_the_shot_is_refused_naming_it() -> None:
    with pytest.raises(SpecError) as err:
        planned([ops.FaceSettings(span=span(110, 130, 1), faces={"enhance": True})])
    assert err.value.field == "shots[0].fixes[1]"


def test_track_numbers_are_stable_for_the_same_analysis() -> None:
    """The numbers a fix names are the plan's: the same analysis, chunked alike or not, gives the same."""
    shot = multi_face_shot()
    sel = selection(mode="all", source="anna")
    plans = [
        plan_shot(
            shot.faces, track_ids_of(shot.faces, n), sel, {}, CONFIG, frame_times=frame_times_for(shot.faces)
        )
        for n in (1, 3, 3, 5)
    ]
    for plan in plans[1:]:
        assert plan.tracks == plans[0].tracks
        assert [tracks_on(plan, f) for f in range(plan.num_frames)] == [
            tracks_on(plans[0], f) for f in range(plan.num_frames)
        ]
    assert len(plans[0].tracks) == 3


def test_qc_does_not_flag_the_frames_a_fix_keeps_as_the_plate() -> None:
    from pipeline.qc.config import QcConfig
    from pipeline.qc.coverage import coverage
    from pipeline.qc.marks import ShotTracks

    shot = multi_face_shot()
    ids = track_ids_of(shot.faces)
    plain, _ = planned([])
    track = min(plain.tracks)
    _, fixed = planned([ops.KeepPlate(span=span(20, 41), track=track)])
    assert fixed.is_kept(track, 20) and fixed.is_kept(track, 40) and not fixed.is_kept(track, 41)
    config = QcConfig()
    flagged = coverage(fixed, ShotTracks.build(shot.faces, ids, fixed), config).marks
    assert not [m for m in flagged if m.reason == "unreplaced" and 20 <= m.index <= 40]
    # Without the record of the fix, those frames are a gap QC reports.
    bare = type(fixed)(tasks=fixed.tasks, tracks=fixed.tracks)
    gap = coverage(bare, ShotTracks.build(shot.faces, ids, bare), config).marks
    assert {m.index for m in gap if m.reason == "unreplaced"} >= set(range(20, 41))
    assert type(fixed).from_dict(fixed.to_dict()).kept == fixed.kept
