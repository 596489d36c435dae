"""``jobs.render --fixes FILE``: a shot's fixes as the report downloads them, merged into the spec before it is
checked; refused (exit 2, before Ray, the destination as it was) naming the file and the shot."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cluster.spec.fixes import IdentityFix, KeepPlateFix
from cluster.spec.fixes_file import load_spec_with_fixes
from jobs.render import EXIT_BAD_INPUT
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
