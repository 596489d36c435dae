"""A shot's ``fixes:``: parsed into one model per kind, refused naming the fix, turned into the plan's
operations in shot frame indices; what of them enters a chunk's render key, and why a chunk renders again."""

from __future__ import annotations

import pytest

from cluster.checks.prepare import probed_shot
from cluster.spec.fixes import (
    BoxFix,
    FacesFix,
    IdentityFix,
    KeepPlateFix,
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


def test_a_fix_outside_the_rendered_frames_is_refused_before_ray(tmp_path) -> None:
    info = info_from_timestamps([i * 40 for i in range(100)], [0, 50])
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
