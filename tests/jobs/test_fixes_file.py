"""``jobs.render --fixes FILE``: a shot's fixes as the report downloads them, merged into the spec before it is
checked; refused (exit 2, before Ray, the destination as it was) naming the file and the shot."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cluster.spec.fixes import IdentityFix, KeepPlateFix
from cluster.spec.fixes_file import FixesFile, load_spec_with_fixes, merge_fixes
from jobs.render import EXIT_BAD_INPUT
from pipeline.errors import SpecError
from tests.faultjobs import job_spec, make_media
from tests.jobs.refusals import assert_untouched, run_main, snapshot


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, str]:
    return make_media(str(tmp_path_factory.mktemp("fixes-file-media")))


def _fixes_file(tmp_path: Path, shot: str, fixes: list[dict]) -> str:
    path = tmp_path / f"{shot}_fixes.yaml"
    path.write_text(yaml.safe_dump({"shot": shot, "fixes": fixes}))
    return str(path)


def test_the_fixes_of_a_file_are_added_to_its_shot(media, dest, tmp_path, no_ray) -> None:
    spec = job_spec(media, str(dest), "fixes-file")
    spec["shots"][0]["fixes"] = [{"frames": "1-2", "track": 0, "action": "keep_plate"}]
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(spec))
    fixes = _fixes_file(tmp_path, "plate", [{"frames": "10-20", "track": 0, "identity": "hero"}])
    loaded, merged = load_spec_with_fixes(str(tmp_path / "job.yaml"), [fixes])
    assert [type(f) for f in loaded.shots[0].fixes] == [KeepPlateFix, IdentityFix]
    assert str(loaded.shots[0].fixes[1].frames) == "10-20"
    assert merged.origins == {"shots[0].fixes[1]": (fixes, "plate", 0)}


@pytest.mark.parametrize(
    ("shot", "fix", "words"),
    [
        (
            "nope",
            {"frames": "1-2", "track": 0, "action": "keep_plate"},
            ["shot 'nope' is not a shot", "plate"],
        ),
        (
            "plate",
            {"frames": "10-20", "track": 0, "identity": "stranger"},
            ["(shot plate, fixes[0])", "stranger"],
        ),
        (
            "plate",
            {"frames": "70-80", "track": 0, "action": "keep_plate"},
            ["(shot plate, fixes[0])", "outside"],
        ),
        ("plate", {"frames": "10-20", "track": 0}, ["(shot plate, fixes[0])", "a fix needs one of"]),
    ],
)
def test_a_bad_fixes_file_is_refused_before_ray(
    media, dest, tmp_path, capsys, shot, fix, words, no_ray
) -> None:
    spec = job_spec(media, str(dest), "bad-fixes-file")
    fixes = _fixes_file(tmp_path, shot, [fix])
    before = snapshot(dest)
    assert run_main(tmp_path, spec, "--fixes", fixes) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    for word in [fixes, *words]:
        assert word in err, err
    assert_untouched(dest, before)


def test_a_fixes_file_of_another_form_is_refused(media, dest, tmp_path, capsys, no_ray) -> None:
    spec = job_spec(media, str(dest), "bad-fixes-form")
    path = tmp_path / "fixes.yaml"
    path.write_text(yaml.safe_dump({"plate": [{"frames": "1-2", "track": 0, "action": "keep_plate"}]}))
    assert run_main(tmp_path, spec, "--fixes", str(path)) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert str(path) in err and "'shot'" in err, err


def test_a_clip_of_the_cut_gets_a_name_only_entry_and_errors_name_the_file() -> None:
    """With ``edit:``, a name no ``shots:`` entry has is a clip of the cut (checked when the cut is read);
    only the merged fixes' errors are renamed, ``fixes[1]`` never taken for ``fixes[10]``."""
    fix = {"frames": "1-2", "track": 0, "action": "keep_plate"}
    data = {"edit": {"url": "cut.otio"}, "shots": [{"url": "a/sc010.mp4", "fixes": [fix] * 10}]}
    files = [FixesFile("n.yaml", "sc020", (fix,)), FixesFile("m.yaml", "sc010", (fix, fix))]
    merged_data, merged = merge_fixes(data, files)
    assert merged_data["shots"][1] == {"name": "sc020", "fixes": [fix]}
    assert len(merged_data["shots"][0]["fixes"]) == 12 and len(data["shots"][0]["fixes"]) == 10
    renamed = merged.rename(SpecError("shots[0].fixes[11].frames", "bad"))
    assert (renamed.field, renamed.reason) == ("m.yaml (shot sc010, fixes[1])", "bad")
    assert merged.rename(SpecError("shots[0].fixes[1]", "own")).field == "shots[0].fixes[1]"
    assert merged.rename(SpecError("shots[1].fixes[0]", "x")).field == "n.yaml (shot sc020, fixes[0])"
