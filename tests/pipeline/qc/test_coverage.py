"""Coverage on real detections: a face the detector loses behind an occluder is flagged unreplaced."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pipeline.faces.config import SelectionConfig
from pipeline.qc.config import QcConfig
from pipeline.tracking.fixes import AddBox, FixSpan, apply_fixes
from pipeline.tracking.tracker import TrackingConfig
from tests.pipeline.qc.shots import FIRST_NUMBER, N, detect, numbers_of, occluded_frames, qc, track_and_plan

ALL = SelectionConfig(mode="all", source="anna")


@pytest.fixture(scope="module")
def occluded(default_models):
    faces = detect(default_models, occluded_frames())
    vanished = [t for t, f in enumerate(faces) if not f]
    # The board really hides the face for a few frames in the middle, and only there.
    assert all(len(f) == 1 for f in faces if f)
    assert len(vanished) >= 3 and vanished == list(range(vanished[0], vanished[-1] + 1))
    assert 0 < vanished[0] and vanished[-1] < N - 1
    return faces, vanished


@pytest.mark.parametrize("max_gap", [0, "shorter"])
def test_face_lost_behind_an_occluder_is_flagged_unreplaced_on_exactly_those_frames(
    occluded, max_gap
) -> None:
    faces, vanished = occluded
    gap = 0 if max_gap == 0 else len(vanished) - 1  # bridging off, or a gap longer than max_gap
    shot = track_and_plan(faces, ALL, tracking=TrackingConfig(max_gap_frames=gap))
    assert len(shot.plan.tracks) == 2  # the plan could not join the two sides
    result = qc(shot, selection=ALL)
    (flag,) = [f for f in result.flags if f.reason == "unreplaced"]
    expected = [FIRST_NUMBER + t for t in vanished]
    assert (flag.first, flag.last) == (expected[0], expected[-1])
    assert numbers_of(result.flags, "unreplaced") == expected
    assert flag.value == len(vanished) and flag.severity >= 0.8
    assert flag.track == min(shot.plan.tracks)
    assert result.flags[0].reason == "unreplaced"  # the worst error leads the review list
    counts = result.series.coverage
    assert [t for t in range(N) if counts["unreplaced"][t]] == vanished
    assert [t for t in range(N) if counts["replaced"][t]] == [t for t in range(N) if t not in vanished]
    assert result.failed(QcConfig(fail_on=("unreplaced", "seam"))) == ["unreplaced"]
    assert result.failed(QcConfig(fail_on=("seam",))) == []
    # Longer runs than min_unreplaced_run only.
    longer = QcConfig(min_unreplaced_run=len(vanished) + 1)
    assert qc(shot, selection=ALL, config=longer).counts["unreplaced"] == 0


def test_a_bridged_gap_is_not_unreplaced(occluded) -> None:
    faces, vanished = occluded
    shot = track_and_plan(faces, ALL, tracking=TrackingConfig(max_gap_frames=len(vanished)))
    assert len(shot.plan.tracks) == 1
    result = qc(shot, selection=ALL)
    assert result.counts["unreplaced"] == 0
    assert [t for t in range(N) if result.series.coverage["bridged"][t]] == vanished


def test_a_fix_box_over_the_lost_face_replaces_it(occluded) -> None:
    """A ``box`` fix drawn where the detector lost the face renders it: no longer unreplaced."""
    faces, vanished = occluded
    shot = track_and_plan(faces, ALL, tracking=TrackingConfig(max_gap_frames=0))
    a, b = vanished[0] - 1, vanished[-1] + 1
    keys = {a: tuple(faces[a][0].box.tolist()), b: tuple(faces[b][0].box.tolist())}
    span = FixSpan(name="shots[0].fixes[0]", label="fix 0", start=vanished[0], end=b)
    fixed = apply_fixes(shot.plan, [AddBox(span=span, keys=keys, identity="anna")])
    result = qc(shot, selection=ALL, plan=fixed)
    assert result.counts["unreplaced"] == 0
    assert [t for t in range(N) if result.series.coverage["bridged"][t]] == vanished
    # A box elsewhere (not over the face) leaves the face unreplaced.
    away = {a: (0.0, 0.0, 20.0, 20.0)}
    elsewhere = apply_fixes(shot.plan, [AddBox(span=span, keys=away, identity="anna")])
    assert numbers_of(qc(shot, selection=ALL, plan=elsewhere).flags, "unreplaced") == [
        FIRST_NUMBER + t for t in vanished
    ]


def test_an_untouched_face_is_not_coverage(occluded) -> None:
    """In mode largest, or with no reference matched, a face nobody replaced is never 'unreplaced'."""
    faces, _ = occluded
    refs = {"nobody": np.eye(faces[0][0].embedding.shape[0], dtype=np.float32)[0]}
    sel = SelectionConfig(mode="reference", references={"nobody": "anna"}, threshold=0.9)
    shot = track_and_plan(faces, sel, refs, tracking=TrackingConfig(max_gap_frames=0))
    assert all(s.identity is None for s in shot.plan.tracks.values())
    result = qc(shot, selection=sel, refs=refs)
    assert not result.flags and sum(sum(v) for v in result.series.coverage.values()) == 0


def test_flags_and_series_use_frame_numbers_and_serialise(occluded) -> None:
    faces, vanished = occluded
    shot = track_and_plan(faces, ALL, tracking=TrackingConfig(max_gap_frames=0))
    result = qc(shot, selection=ALL)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["series"]["numbers"] == list(range(FIRST_NUMBER, FIRST_NUMBER + N))
    assert data["flags"][0]["first"] == FIRST_NUMBER + vanished[0]
    assert data["counts"]["unreplaced"] == 1 and data["frames"] == N
    # Numbers map back to source positions (thumbnails are taken by position).
    assert result.position(FIRST_NUMBER + vanished[0]) == 48 + vanished[0]
    assert result.review_positions(limit=1) == [48 + vanished[0]]  # the unreplaced run's first frame
    assert len(result.review_positions()) == len(result.flags)
    with pytest.raises(ValueError, match="numbers"):
        qc(shot, selection=ALL, plan=type(shot.plan)(tasks=shot.plan.tasks[1:], tracks=shot.plan.tracks))


def test_a_flag_as_data_is_a_deep_copy_of_its_fields() -> None:
    import dataclasses

    from pipeline.qc.records import Flag

    extra = {"tracks": [3, 4], "rival": "villain", "chunk_boundary": True, "nested": {"a": [1, (2, 3)]}}
    flag = Flag("sc010", 1001, 1004, 3, "identity_switch", 0.7, 0.31, 0.35, "detail", extra)
    data = flag.to_dict()
    assert data == dataclasses.asdict(flag) and list(data) == [f.name for f in dataclasses.fields(Flag)]
    data["extra"]["tracks"].append(5)
    data["extra"]["nested"]["a"].append(9)
    assert flag.extra == {
        "tracks": [3, 4],
        "rival": "villain",
        "chunk_boundary": True,
        "nested": {"a": [1, (2, 3)]},
    }
