"""Identity on real detections: two real faces cross; a wrong track assignment is an identity switch."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pipeline.faces.config import SelectionConfig
from pipeline.qc.config import QcConfig
from pipeline.qc.records import FaceMeasure
from pipeline.tracking.faceplan import ShotFacePlan
from tests.faces_data import crossing_clip
from tests.pipeline.qc.shots import FIRST_NUMBER, FIRST_POSITION, detect, numbers_of, qc, track_and_plan

N = 40
SEL = SelectionConfig(mode="reference", references={"ref_left": "anna", "ref_right": "ben"}, threshold=0.5)


@pytest.fixture(scope="module")
def crossing(default_models):
    faces = detect(default_models, crossing_clip(N).frames)
    first = faces[0]
    left = min(range(len(first)), key=lambda i: float(first[i].box[0]))
    # References: each person's embedding from the first frame, where they are apart.
    refs = {"ref_left": first[left].embedding, "ref_right": first[1 - left].embedding}
    return faces, refs


def test_right_tracking_has_no_identity_switch(crossing) -> None:
    faces, refs = crossing
    shot = track_and_plan(faces, SEL, refs)
    assert {s.identity for s in shot.plan.tracks.values()} == {"anna", "ben"}
    result = qc(shot, selection=SEL, refs=refs)
    assert result.counts["identity_switch"] == 0
    # Without the source identities' embeddings there is no "before"; the references are people.
    assert all(v is None for v in result.series.similarity_before)


def _swap_identities(plan: ShotFacePlan) -> ShotFacePlan:
    other = {"anna": "ben", "ben": "anna"}
    tracks = {
        tid: dataclasses.replace(s, identity=other[s.identity] if s.identity else None)
        for tid, s in plan.tracks.items()
    }
    tasks = [[dataclasses.replace(t, identity=other[t.identity]) for t in frame] for frame in plan.tasks]
    return ShotFacePlan(tasks=tasks, tracks=tracks)


def test_swapped_identities_are_flagged_over_each_whole_track(crossing) -> None:
    faces, refs = crossing
    shot = track_and_plan(faces, SEL, refs)
    result = qc(shot, selection=SEL, refs=refs, plan=_swap_identities(shot.plan))
    flagged = {f.track for f in result.flags if f.reason == "identity_switch"}
    assert flagged == set(shot.plan.tracks)
    for tid, summary in shot.plan.tracks.items():
        detected = [FIRST_NUMBER + t for t, ids in enumerate(shot.track_ids) if set(ids) & set(summary.parts)]
        mine = numbers_of([f for f in result.flags if f.track == tid], "identity_switch")
        # Every frame where the track's face is seen clearly; the crossing itself may blur it.
        assert set(mine) <= set(detected)
        assert len(mine) >= 0.8 * len(detected), (tid, len(mine), len(detected))
    worst = max(f.value for f in result.flags if f.reason == "identity_switch")
    assert worst > 0.5  # two different people: far apart in SFace space


def test_tracks_swapped_after_the_crossing_are_flagged_from_there(crossing) -> None:
    """The failure the check exists for: after the faces cross, the tracker's ids change hands."""
    faces, refs = crossing
    k = 31  # both faces are apart again (about a face width) from here on
    assert all(len(f) == 2 for f in faces[k:])
    good = track_and_plan(faces, SEL, refs)
    a, b = sorted({i for ids in good.track_ids[k:] for i in ids})
    swapped = [
        list(ids) if t < k else [{a: b, b: a}.get(i, i) for i in ids] for t, ids in enumerate(good.track_ids)
    ]
    from pipeline.tracking.faceplan import plan_shot
    from pipeline.tracking.tracker import TrackingConfig

    times = [t / 24.0 for t in range(N)]
    plan = plan_shot(faces, swapped, SEL, refs, TrackingConfig(), frame_times=times)
    shot = dataclasses.replace(good, track_ids=swapped, plan=plan)
    result = qc(shot, selection=SEL, refs=refs)
    switches = [f for f in result.flags if f.reason == "identity_switch"]
    assert len(switches) == 2 and {f.track for f in switches} == {a, b}
    for flag in switches:
        assert (flag.first, flag.last) == (FIRST_NUMBER + k, FIRST_NUMBER + N - 1)
        assert flag.severity >= 0.7 and flag.value >= QcConfig().switch_margin


def test_low_identity_from_measures_with_how_far_the_face_moved(crossing) -> None:
    faces, refs = crossing
    # The source identities are the references' people here, so "before" is the plate's own person.
    sources = {"anna": refs["ref_left"], "ben": refs["ref_right"]}
    shot = track_and_plan(faces, SEL, refs)
    anna = next(t for t, s in shot.plan.tracks.items() if s.identity == "anna")
    measures = [
        FaceMeasure(
            frame=FIRST_POSITION + i,
            track=task.track_id,
            identity=task.identity,
            similarity_after=(0.1 if task.track_id == anna and 5 <= i < 9 else 0.6)
            if i % 2 == 0 or 5 <= i < 9
            else None,
            out_grid=(0.5,) * 48,
            plate_grid=(0.5,) * 48,
            seam=1.0,
            matte=0.9,
        )
        for i, frame in enumerate(shot.plan.tasks)
        for task in frame
    ]
    result = qc(shot, selection=SEL, refs={**refs, **sources}, measures=measures)
    (low,) = [f for f in result.flags if f.reason == "low_identity"]
    assert (low.first, low.last, low.track) == (FIRST_NUMBER + 5, FIRST_NUMBER + 8, anna)
    assert low.value == pytest.approx(0.1) and low.threshold == QcConfig().min_identity
    assert "plate's face" in low.detail
    after = result.series.similarity_after
    assert after[1] is None and after[0] == pytest.approx(0.6) and after[6] == pytest.approx(0.35)
    # Before: the plate's faces against their own person are close (they are the references' faces).
    before = [v for v in result.series.similarity_before if v is not None]
    assert before and min(before) > 0.5
    assert result.tracks[anna]["moved"] < 0  # the measured outputs (0.6) are further than the plate (> 0.5)
    assert np.isclose(
        result.tracks[anna]["similarity_before"],
        np.mean(
            [
                float(np.dot(f.embedding, sources["anna"]))
                / np.linalg.norm(f.embedding)
                / np.linalg.norm(sources["anna"])
                for t, ids in enumerate(shot.track_ids)
                for f, i in zip(faces[t], ids)
                if i in shot.plan.tracks[anna].parts and any(x.track_id == anna for x in shot.plan.tasks[t])
            ]
        ),
        atol=1e-4,
    )


def test_means_and_unit_vectors_are_numpys_to_the_bit() -> None:
    """The per-frame means and unit embeddings QC computes without numpy's call overhead equal numpy's."""
    import random

    from pipeline.qc.identity import _mean, _unit

    rng = random.Random(1)
    for n in range(1, 12):
        for _ in range(500):
            values: list = [rng.uniform(-1, 1) * 10 ** rng.randint(-5, 5) for _ in range(n)]
            if rng.random() < 0.1:
                values = [np.float32(v) for v in values]  # numpy's mean is float32 then: numpy's it stays
            if rng.random() < 0.05:
                values = [-0.0] * n
            assert repr(_mean(values)) == repr(float(np.mean(values)))
    assert _mean([]) is None
    for _ in range(200):
        v = np.random.default_rng(rng.randint(0, 10**6)).standard_normal(512).astype(np.float32)
        assert np.array_equal(_unit(v), v.astype(np.float64) / np.linalg.norm(v.astype(np.float64)))
