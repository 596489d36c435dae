"""A shot's ``fixes:``: parsed into one model per kind, refused naming the fix, turned into the plan's
operations in shot frame indices; what of them enters a chunk's render key, and why a chunk renders again."""

from __future__ import annotations

import dataclasses
import re

import pytest

from cluster.checks.prepare import probed_shot
from cluster.spec.fixes import (
    BoxFix,
    FacesFix,
    IdentityFix,
    KeepPlateFix,
    contradicting_fixes,
    fix_ops,
    fix_records,
    fixes_of_chunk,
    rerender_reasons,
)
from cluster.spec.job import parse_spec
from cluster.spec.shot_refs import expand_shots
from pipeline.errors import SpecError
from pipeline.tracking.fixes import AddBox, FaceSettings, KeepPlate, SwitchIdentity
from tests.clips import info_from_timestamps

FIXES = [
    {"frames": "13-28", "track": 2, "action": "keep_plate"},
    {"frames": "40-60", "track": 1, "identity": "lead"},
    {"frames": "70-80", "box": {70: [10, 20, 60, 80], 80: [20, 20, 70, 80]}},
    {"frames": "81-90", "faces": {"enhance": True, "mask_blur": 0.12}},
]


def spec(tmp_path, fixes: list[dict], **shot) -> dict:
    return {
        "job_id": "f",
        "shots": [{"url": "/p/a.mov", "fixes": fixes, **shot}],
        "identities": {"hero": {"images": [str(tmp_path / "hero.jpg")]}, "lead": {"images": ["x.jpg"]}},
        "selection": {"mode": "all", "source": "hero"},
        "output": {"url": str(tmp_path / "{shot}.mov")},
    }


def test_each_kind_of_fix_is_its_own_model(tmp_path) -> None:
    job = parse_spec(spec(tmp_path, FIXES))
    fixes = job.shots[0].fixes
    assert [type(f) for f in fixes] == [KeepPlateFix, IdentityFix, BoxFix, FacesFix]
    assert str(fixes[0].frames) == "13-28" and fixes[0].track == 2
    assert fixes[2].box == {70: (10.0, 20.0, 60.0, 80.0), 80: (20.0, 20.0, 70.0, 80.0)}
    assert fixes[3].faces.model_fields_set == {"enhance", "mask_blur"}


@pytest.mark.parametrize(
    ("fix", "message"),
    [
        ({"frames": "1-2", "track": 1, "identity": "nobody"}, "identity 'nobody' is not in identities"),
        (
            {"frames": "1-2", "box": {1: [0, 0, 10, 10]}, "identity": "nobody"},
            "'nobody' is not in identities",
        ),
        ({"frames": "1-2", "track": 1}, "a fix needs one of"),
        ({"frames": "1-2", "faces": {"batch_size": 2}}, "applies to the whole shot"),
        ({"frames": "1-2", "box": {1: [10, 0, 5, 10]}}, "x1 > x0"),
        ({"frames": "5-2", "track": 1, "action": "keep_plate"}, "before first frame"),
        ({"frames": "1-2", "track": 1, "action": "blur"}, "keep_plate"),
    ],
)
def test_a_bad_fix_is_refused_naming_it(tmp_path, fix: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message) as err:
        parse_spec(spec(tmp_path, [FIXES[0], fix]))
    assert err.value.field.startswith("shots[0].fixes[1]")


def test_fixes_belong_to_one_shot_not_a_pattern(tmp_path) -> None:
    data = spec(tmp_path, FIXES)
    data["shots"] = [{"pattern": "/p/*.mov", "fixes": FIXES[:1]}]
    with pytest.raises(SpecError, match="apply to a single 'url'") as err:
        parse_spec(data)
    assert err.value.field == "shots[0]"


def plate(width: int = 240, height: int = 180, frames: int = 100):
    """A probed video of ``frames`` frames (0 .. frames - 1) and ``width`` x ``height`` pixels."""
    info = info_from_timestamps([i * 40 for i in range(frames)], [0, frames // 2])
    return dataclasses.replace(info, width=width, height=height)


def test_a_fix_outside_the_rendered_frames_is_refused_before_ray(tmp_path) -> None:
    info = plate()
    job = parse_spec(
        spec(tmp_path, [FIXES[0], {"frames": "95-99", "track": 1, "action": "keep_plate"}], frames="10-90")
    )
    (ref,) = expand_shots(job)
    with pytest.raises(SpecError, match="outside the shot, which renders frames 10-90") as err:
        probed_shot(job, ref, info)
    assert err.value.field == "shots[0].fixes[1]"
    job = parse_spec(spec(tmp_path, FIXES, frames="10-90"))
    (ref,) = expand_shots(job)
    assert probed_shot(job, ref, info).settings.fixes == job.shots[0].fixes


def test_fix_ops_are_in_shot_frame_indices(tmp_path) -> None:
    fixes = parse_spec(spec(tmp_path, FIXES)).shots[0].fixes
    ops = fix_ops(fixes, first_number=10, default_identity="hero", field="shots[0]")
    assert [type(o) for o in ops] == [KeepPlate, SwitchIdentity, AddBox, FaceSettings]
    assert [(o.span.start, o.span.end) for o in ops] == [(3, 19), (30, 51), (60, 71), (71, 81)]
    assert ops[0].span.name == "shots[0].fixes[0]" and ops[0].span.label == "fix 0 (frames 13-28, track 2)"
    assert isinstance(ops[2], AddBox) and ops[2].identity == "hero" and sorted(ops[2].keys) == [60, 70]
    assert isinstance(ops[3], FaceSettings) and ops[3].faces == {"enhance": True, "mask_blur": 0.12}


def test_a_chunk_key_takes_only_the_fixes_on_its_frames(tmp_path) -> None:
    fixes = parse_spec(spec(tmp_path, FIXES)).shots[0].fixes
    assert fixes_of_chunk(fixes, 0, 12) == []
    assert [f["kind"] for f in fixes_of_chunk(fixes, 0, 13)] == ["keep_plate"]
    assert [f["kind"] for f in fixes_of_chunk(fixes, 29, 75)] == ["identity", "box"]
    changed = (
        parse_spec(spec(tmp_path, [*FIXES[:3], {"frames": "81-90", "faces": {"enhance": False}}]))
        .shots[0]
        .fixes
    )
    assert fixes_of_chunk(changed, 0, 80) == fixes_of_chunk(fixes, 0, 80)
    assert fixes_of_chunk(changed, 81, 99) != fixes_of_chunk(fixes, 81, 99)


def test_rerender_reasons_name_the_changed_and_removed_fixes(tmp_path) -> None:
    before = fix_records(parse_spec(spec(tmp_path, FIXES[:2])).shots[0].fixes)
    after = fix_records(parse_spec(spec(tmp_path, [FIXES[0], FIXES[3]])).shots[0].fixes)
    assert rerender_reasons(after, before, 0, 30) == []
    assert rerender_reasons(after, before, 31, 70) == [
        "fix 1 (frames 40-60, track 1) of the earlier run removed"
    ]
    assert rerender_reasons(after, before, 80, 99) == ["fix 1 (frames 81-90) changed"]
    assert rerender_reasons(after, after, 0, 99) == []


@pytest.mark.parametrize(
    ("box", "field", "message"),
    [
        ({70: [10, 20, 241, 80]}, "box", "not within the plate, which is 240x180 pixels"),
        ({70: [10, 20, 60, 181]}, "box", "(10, 20, 60, 181) is not within the plate"),
        ({70: [10, 20, 60, 80], 100: [10, 20, 60, 80]}, "box", "key frame 100 is not a frame of the shot"),
        ({-1: [10, 20, 60, 80]}, "box", "key frame -1 is not a frame of the shot, whose frames are 0-99"),
    ],
)
def test_a_box_outside_the_plate_is_refused_once_probed(tmp_path, box, field, message) -> None:
    job = parse_spec(spec(tmp_path, [FIXES[0], {"frames": "70-80", "box": box}]))
    (ref,) = expand_shots(job)
    with pytest.raises(SpecError, match=re.escape(message)) as err:
        probed_shot(job, ref, plate())
    assert err.value.field == f"shots[0].fixes[1].{field}"
    edge = parse_spec(spec(tmp_path, [{"frames": "0-99", "box": {0: [0, 0, 240, 180], 99: [1, 1, 2, 2]}}]))
    (ref,) = expand_shots(edge)
    assert probed_shot(edge, ref, plate()).settings.fixes == edge.shots[0].fixes  # the plate's edges


@pytest.mark.parametrize(
    ("fix", "where", "message"),
    [
        ({"frames": "1-2", "box": {1: [0, 0, float("inf"), 10]}}, "box", "finite number"),
        ({"frames": "1-2", "box": {1: [0, 0, float("nan"), 10]}}, "box", "finite number"),
        ({"frames": "1-2", "box": {1: [0, 0, 1e308, 10]}}, "box", "less than or equal to 65536"),
        ({"frames": "1-2", "box": {1: [-5, 0, 10, 10]}}, "box", "greater than or equal to 0"),
        ({"frames": "1-2", "box": {99_999_999_999: [0, 0, 10, 10]}}, "box", "less than 1000000000"),
        ({"frames": "1-2", "box": {i: [0, 0, 10, 10] for i in range(1001)}}, "box", "at most 1000 items"),
        ({"frames": "1-99999999999", "track": 1, "action": "keep_plate"}, "frames", "1,000,000,000"),
        ({"frames": [-(10**9), 1], "faces": {"enhance": True}}, "frames", "frame numbers must lie"),
        ({"frames": "1-2", "track": 1_000_000, "identity": "lead"}, "track", "less than 1000000"),
        ({"frames": "1-2", "faces": {"mask_blur": float("nan")}}, "faces", "mask_blur"),
        ({"frames": "1-2", "faces": {"enhance_blend": float("inf")}}, "faces", "enhance_blend"),
    ],
)
def test_numbers_of_a_fix_are_finite_and_bounded_when_read(tmp_path, fix, where, message) -> None:
    with pytest.raises(SpecError, match=message) as err:
        parse_spec(spec(tmp_path, [FIXES[0], fix]))
    assert err.value.field.startswith("shots[0].fixes[1]") and where in err.value.field, err.value.field


@pytest.mark.parametrize(
    ("fixes", "pair"),
    [
        (  # the audit's: the plate kept, and two identities, for one track on overlapping frames
            [
                {"frames": "10-20", "track": 0, "action": "keep_plate"},
                {"frames": "1-5", "faces": {"enhance": True}},
                {"frames": "15-30", "track": 0, "identity": "lead"},
                {"frames": "25-40", "track": 0, "identity": "hero"},
            ],
            (0, 2),
        ),
        (
            [
                {"frames": "40-60", "track": 3, "identity": "lead"},
                {"frames": "10-20", "track": 3, "identity": "lead"},
                {"frames": "60-60", "track": 3, "identity": "hero"},
            ],
            (0, 2),
        ),
        (  # a short fix inside a long one: found through the furthest-reaching fix, not the last one
            [
                {"frames": "0-90", "track": 1, "action": "keep_plate"},
                {"frames": "5-6", "track": 1, "action": "keep_plate"},
                {"frames": "80-80", "track": 1, "identity": "lead"},
            ],
            (0, 2),
        ),
        (  # the furthest of another outcome: two identities, then the plate kept past the first
            [
                {"frames": "0-50", "track": 1, "identity": "lead"},
                {"frames": "10-90", "track": 1, "identity": "hero"},
                {"frames": "60-70", "track": 1, "identity": "hero"},
                {"frames": "40-45", "track": 2, "action": "keep_plate"},
            ],
            (0, 1),
        ),
    ],
)
def test_contradicting_fixes_are_refused_naming_both(tmp_path, fixes, pair) -> None:
    assert contradicting_fixes(tuple(parse_spec(spec(tmp_path, [])).shots[0].fixes)) is None
    with pytest.raises(SpecError, match="must agree") as err:
        parse_spec(spec(tmp_path, fixes))
    assert err.value.field == f"shots[0].fixes[{pair[1]}]"
    assert f"shots[0].fixes[{pair[0]}] says" in err.value.reason


def test_fixes_that_combine_are_accepted(tmp_path) -> None:
    fixes = [
        {"frames": "10-20", "track": 0, "action": "keep_plate"},
        {"frames": "15-20", "track": 0, "action": "keep_plate"},  # the same outcome twice
        {"frames": "21-30", "track": 0, "identity": "lead"},  # the next frames: no overlap
        {"frames": "25-40", "track": 0, "identity": "lead"},
        {"frames": "10-40", "track": 1, "identity": "hero"},  # another track
        {"frames": "10-40", "box": {10: [0, 0, 5, 5]}},  # boxes add faces of their own
        {"frames": "10-40", "box": {10: [5, 5, 9, 9]}, "identity": "lead"},
        {"frames": "10-40", "faces": {"enhance": True}},  # settings apply to whatever is rendered
        {"frames": "12-13", "faces": {"enhance": False}},  # a later fix's keys over an earlier one's
    ]
    assert len(parse_spec(spec(tmp_path, fixes)).shots[0].fixes) == len(fixes)


def test_contradictions_are_found_in_one_sorted_pass() -> None:
    """Thousands of fixes of one track that agree, then one that does not: found, without comparing
    every pair (the rule's own pass, on models built without a spec)."""
    agree = tuple(
        KeepPlateFix(frames={"first": i, "last": i + 3}, track=7, action="keep_plate") for i in range(5000)
    )
    assert contradicting_fixes(agree) is None
    late = IdentityFix(frames={"first": 4100, "last": 4100}, track=7, identity="lead")
    assert contradicting_fixes((*agree, late)) == (4100, 5000)  # the furthest-reaching of those before
    elsewhere = IdentityFix(frames={"first": 4100, "last": 4100}, track=8, identity="lead")
    assert contradicting_fixes((*agree, elsewhere)) is None


@pytest.mark.parametrize(
    ("shots", "field", "message"),
    [
        ([1001], "shots[0].fixes", "1,001 fixes; a shot takes at most 1,000"),
        ([3, 1001], "shots[1].fixes", "1,001 fixes"),
        ([1000] * 10 + [1], "shots", "more than 10,000 fixes in the job (by shots[10])"),
    ],
)
def test_fixes_are_bounded_per_shot_and_per_job(tmp_path, shots, field, message) -> None:
    data = spec(tmp_path, [])
    data["shots"] = [
        {"name": f"s{i}", "url": "/p/a.mov", "fixes": [{"frames": "1-2", "faces": {"enhance": True}}] * n}
        for i, n in enumerate(shots)
    ]
    with pytest.raises(SpecError, match=re.escape(message)) as err:
        parse_spec(data)
    assert err.value.field == field
    data["shots"] = [{**shot, "fixes": shot["fixes"][:1000]} for shot in data["shots"][:10]]
    assert sum(len(s.fixes) for s in parse_spec(data).shots) == sum(min(n, 1000) for n in shots[:10])
