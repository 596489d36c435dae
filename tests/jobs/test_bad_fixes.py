"""A shot's bad fixes through the real entrypoint: exit 2 before Ray, naming ``shots[i].fixes[j]``, the
destination as it was.  (A track not on a fix's frames is known only after analysis:
``tests/integration/jobs/test_fixes_job.py``.)"""

from __future__ import annotations

import pytest

from jobs.render import EXIT_BAD_INPUT
from tests.faultjobs import job_spec, make_media
from tests.jobs.refusals import assert_untouched, run_main, snapshot


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, str]:
    return make_media(str(tmp_path_factory.mktemp("bad-fixes-media")))


@pytest.mark.parametrize(
    ("fix", "words"),
    [
        ({"frames": "70-80", "track": 0, "action": "keep_plate"}, ["outside the shot", "frames 0-71"]),
        ({"frames": "10-20", "track": 0, "identity": "stranger"}, ["'stranger' is not in identities"]),
        ({"frames": "10-20", "box": {10: [0, 0, 5, 5]}, "identity": "stranger"}, ["'stranger'"]),
        ({"frames": "10-20", "track": 0}, ["a fix needs one of"]),
    ],
)
def test_a_bad_fix_is_refused_before_ray(media, dest, tmp_path, capsys, fix, words, no_ray) -> None:
    spec = job_spec(media, str(dest), "bad-fix")
    spec["shots"][0]["fixes"] = [{"frames": "1-2", "faces": {"enhance": False}}, fix]
    before = snapshot(dest)
    assert run_main(tmp_path, spec) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    for word in ["shots[0].fixes[1]", *words]:
        assert word in err, err
    assert_untouched(dest, before)
