"""Shots from the cut: an OTIO timeline of real EXR/DPX plates and a real 30 fps movie becomes
ordinary shots (names, URLs, frames in each media's own numbering, handles), before Ray."""

from __future__ import annotations

import os
from typing import Any

import opentimelineio as otio
import pytest

from cluster.edit import with_edit_shots
from cluster.spec.job import JobSpec, parse_spec
from cluster.spec.shot_refs import expand_shots
from pipeline.errors import SpecError
from tests.cluster.edit.cut_media import Media, job, the_cut, write_otio


@pytest.fixture()
def cut_url(media: Media, tmp_path) -> str:
    return write_otio(the_cut(media), tmp_path / "ep101_v3.otio")


def expanded(data: dict[str, Any]) -> tuple[JobSpec, Any]:
    return with_edit_shots(parse_spec(data))


def test_every_clip_with_media_becomes_a_shot(media: Media, cut_url: str, tmp_path) -> None:
    spec, plan = expanded(job(media, cut_url, str(tmp_path), edit={"offline": "skip"}))
    shots = {s.name: s for s in spec.shots}
    # The overrides keep their places (shots[0], shots[1]); the other clips follow in record order.
    assert [s.name for s in spec.shots] == ["grade_dpx", "mov30", "sc010", "sc010_2"]
    a, d = media.exr, media.dpx
    assert (shots["sc010"].url, str(shots["sc010"].frames), shots["sc010"].handles) == (a.url, "1005-1012", 8)
    assert (shots["sc010_2"].url, str(shots["sc010_2"].frames)) == (a.url, "1015-1020")
    # The DPX clip: its name sanitised, its settings from the name-only override.
    grade = shots["grade_dpx"]
    assert (grade.url, str(grade.frames), grade.handles) == (d.url, "1003-1008", 2)
    assert grade.colour is not None and grade.colour.plate == "ACEScct"
    # The 30 fps movie in a 24 fps cut renders its own frames 30-59; its output from the override.
    movie = shots["mov30"]
    assert (movie.url, str(movie.frames), movie.handles) == (media.movie, "30-59", 8)
    assert movie.output == os.path.join(str(tmp_path), "out", "mov30.mp4")
    # The same frames on V2 are one shot (analysed once), relinked with it.
    assert [(c.shot, c.where.track, c.shared) for c in plan.clips] == [
        ("sc010", "V1", False),
        ("sc010", "V2", True),
        ("sc010_2", "V1", False),
        ("grade_dpx", "V1", False),
        ("mov30", "V1", False),
    ]
    summary = plan.summary()
    assert [(s["clip"], s["record"]) for s in summary["skipped"]] == [
        ("offline_a", "01:00:02:01"),
        ("lost", "01:00:02:11"),
        ("fast", "01:00:02:21"),
        ("nest", "01:00:03:01"),
    ]
    reasons = [s["reason"] for s in summary["skipped"]]
    assert "MissingReference" in reasons[0] and "lost.mov not found" in reasons[1]
    assert "LinearTimeWarp" in reasons[2] and "nested stack" in reasons[3]
    # Handles clamped to the plate (8 asked): sc010 has 4 frames before it, sc010_2 4 after it.
    clamped = {c["shot"]: c["available"] for c in summary["handles_clamped"]}
    assert clamped == {"sc010": [4, 8], "sc010_2": [8, 4]}  # grade_dpx: 2 asked, 2 and 4 there
    assert any("handles clamped" in w and "sc010_2" in w for w in plan.warnings())
    assert any("offline_a" in w and "skipped" in w for w in plan.warnings())
    # Downstream the shots are ordinary: expanded with their outputs.
    refs = {r.name: r for r in expand_shots(spec)}
    assert refs["sc010_2"].output_url == os.path.join(str(tmp_path), "out", "sc010_2", "sc010_2.####.exr")
    assert refs["grade_dpx"].output_url.endswith("grade_dpx.####.dpx")


def test_offline_fail_refuses_the_job_naming_every_clip(media: Media, cut_url: str, tmp_path) -> None:
    with pytest.raises(SpecError) as err:
        expanded(job(media, cut_url, str(tmp_path)))  # offline: fail is the default
    assert err.value.field == "edit.offline"
    for name, record in [("offline_a", "01:00:02:01"), ("lost", "01:00:02:11"), ("fast", "01:00:02:21")]:
        assert f"clip {name!r} at {record} on V1" in err.value.reason
    assert "'nest' at 01:00:03:01" in err.value.reason and "4 clip(s)" in err.value.reason


def test_tracks_choose_what_is_rendered(media: Media, cut_url: str, tmp_path) -> None:
    spec, plan = expanded(job(media, cut_url, str(tmp_path), edit={"tracks": ["V2"]}, shots=[]))
    assert [(s.name, str(s.frames)) for s in spec.shots] == [("sc010", "1005-1012")]
    assert plan is not None and not plan.skipped
    with pytest.raises(SpecError) as err:
        expanded(job(media, cut_url, str(tmp_path), edit={"tracks": ["V9"]}))
    assert err.value.field == "edit.tracks" and "V1, V2" in err.value.reason


@pytest.mark.parametrize(
    ("shots", "field", "words"),
    [
        ([{"name": "sc999", "faces": {"enhance": True}}], "shots[0].name", "no clip of"),
        ([{"name": "sc010", "frames": "1001-1002"}], "shots[0].frames", "source range"),
        ([{"name": "sc010", "url": "/plates/other.mov"}], "shots[0].name", "also a clip"),
    ],
)
def test_overrides_must_name_a_clip(media: Media, cut_url: str, tmp_path, shots, field, words) -> None:
    with pytest.raises(SpecError) as err:
        expanded(job(media, cut_url, str(tmp_path), edit={"tracks": ["V2"]}, shots=shots))
    assert err.value.field == field and words in err.value.reason


def test_the_edit_block_is_checked_when_the_spec_is_read(media: Media, tmp_path) -> None:
    base = job(media, str(tmp_path / "cut.otio"), str(tmp_path))
    cases = [
        ({**base, "edit": {"url": str(tmp_path / "cut.mov")}}, "edit.url", "no timeline Recast reads"),
        ({**base, "edit": {"url": base["edit"]["url"], "media": {"pattern": "/p/x.####.exr"}}}, "edit.media.pattern", "{reel}"),
        ({**base, "edit": {"url": base["edit"]["url"], "offline": "maybe"}}, "edit.offline", ""),
        ({**{k: v for k, v in base.items() if k != "edit"}}, "shots[0]", "exactly one of 'url' or 'pattern'"),
        ({**base, "output": {**base["output"], "timeline_url": str(tmp_path / "cut.otioz")}}, "output.timeline_url", ".otio"),
        (
            {**{k: v for k, v in base.items() if k != "edit"}, "shots": [{"url": "/p/a.mov"}],
             "output": {**base["output"], "timeline_url": str(tmp_path / "back.otio")}},
            "output.timeline_url",
            "needs an edit",
        ),
    ]  # fmt: skip
    for data, field, words in cases:
        with pytest.raises(SpecError) as err:
            parse_spec(data)
        assert err.value.field == field and words in err.value.reason, (field, err.value)
    # Neither shots nor an edit.
    with pytest.raises(SpecError) as err:
        parse_spec({k: v for k, v in base.items() if k not in ("edit", "shots")})
    assert err.value.field == "shots"


def test_unreadable_timelines_name_the_file(media: Media, tmp_path, monkeypatch) -> None:
    broken = tmp_path / "broken.otio"
    broken.write_text("{not json")
    with pytest.raises(SpecError) as err:
        expanded(job(media, str(broken), str(tmp_path)))
    assert err.value.field == "edit.url" and str(broken) in err.value.reason
    aaf = tmp_path / "cut.aaf"
    aaf.write_bytes(b"\0" * 64)
    if "AAF" in otio.adapters.available_adapter_names():  # the test extra installs the aaf extra
        with pytest.raises(SpecError) as err:
            expanded(job(media, str(aaf), str(tmp_path)))
        assert err.value.field == "edit.url" and str(aaf) in err.value.reason
    # Without the extra (its plugin not registered) the refusal says what to install.
    names = [n for n in otio.adapters.available_adapter_names() if n != "AAF"]
    monkeypatch.setattr(otio.adapters, "available_adapter_names", lambda: names)
    with pytest.raises(SpecError) as err:
        expanded(job(media, str(aaf), str(tmp_path)))
    assert err.value.field == "edit.url" and "'aaf' extra" in err.value.reason
    assert "otio-aaf-adapter" in err.value.reason and str(aaf) in err.value.reason
    with pytest.raises(SpecError) as err:
        expanded(job(media, str(tmp_path / "absent.otio"), str(tmp_path)))
    assert err.value.field == "edit.url" and "absent.otio" in err.value.reason


def test_the_studio_policy_sees_the_timeline_and_every_media_before_they_are_read(
    media: Media, cut_url: str, tmp_path
) -> None:
    from cluster.checks.trust import input_guard
    from pipeline.provenance.policy import PolicyError

    policy = tmp_path / "policy.yaml"
    allowed = [str(tmp_path), os.path.dirname(media.exr.url), media.movie]
    policy.write_text(
        f"identities: {{hero: {{consent_ref: REL-1, projects: ['*']}}}}\nallowed_input_prefixes: {allowed}\n"
    )
    data = job(media, cut_url, str(tmp_path), edit={"offline": "skip"})
    data["provenance"] = {"policy_url": str(policy), "project": "ep101"}
    spec = parse_spec(data)
    with pytest.raises(PolicyError) as err:  # the DPX plate's folder is not allowed: refused unlisted
        with_edit_shots(spec, allowed=input_guard(spec, env={}))
    assert os.path.dirname(media.dpx.url) in str(err.value)
    # A timeline outside the allowed prefixes is refused before it is read (it does not even exist).
    elsewhere = {**data, "edit": {"url": "/nowhere/cut.otio"}}
    spec = parse_spec(elsewhere)
    with pytest.raises(PolicyError) as err:
        with_edit_shots(spec, allowed=input_guard(spec, env={}))
    assert "/nowhere/cut.otio" in str(err.value)


def test_a_clip_override_carries_fixes_onto_the_clip_shot(media: Media, cut_url: str, tmp_path) -> None:
    fixes = [{"frames": "1006-1008", "track": 0, "action": "keep_plate"}]
    shots = [{"name": "sc010", "fixes": fixes}]
    spec, _ = expanded(job(media, cut_url, str(tmp_path), edit={"tracks": ["V2"]}, shots=shots))
    (shot,) = spec.shots
    assert (shot.url, str(shot.frames)) == (media.exr.url, "1005-1012")
    assert [(str(f.frames), f.track) for f in shot.fixes] == [("1006-1008", 0)]
    (ref,) = expand_shots(spec)
    assert ref.settings is not None and ref.settings.fixes == shot.fixes
