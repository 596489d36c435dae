"""The checks before Ray with an edit: the cut's clips planned as shots, and the written-back cut
(``output.timeline_url``) refused before anything is written when it cannot be written."""

from __future__ import annotations

import os

import pytest

from cluster.checks.prepare import prepare_job
from cluster.spec.job import parse_spec
from pipeline.errors import SpecError
from tests.cluster.edit.cut_media import Media, job, the_cut, write_otio


def test_prepare_checks_the_written_cut_before_ray(media: Media, tmp_path, no_ray) -> None:
    data = job(
        media, write_otio(the_cut(media), tmp_path / "ep101_v3.otio"), str(tmp_path), edit={"offline": "skip"}
    )
    data["chunking"] = {"seconds": 1, "min_seconds": 1}
    # An EDL holds one video track: refused before anything is written.
    data["output"]["timeline_url"] = str(tmp_path / "back" / "cut.edl")
    with pytest.raises(SpecError) as err:
        prepare_job(parse_spec(data), resume=False)
    assert err.value.field == "output.timeline_url" and "cmx_3600" in err.value.reason
    assert not os.path.exists(tmp_path / "back") and not os.path.exists(tmp_path / "out")
    # Written over the timeline it reads: refused.
    data["output"]["timeline_url"] = data["edit"]["url"]
    with pytest.raises(SpecError) as err:
        prepare_job(parse_spec(data), resume=False)
    assert (
        err.value.field == "output.timeline_url" and "would replace the edit's timeline" in err.value.reason
    )
    # An .otio: the job is planned, its shots the cut's, the plan kept for the write-back.
    data["output"]["timeline_url"] = str(tmp_path / "back" / "cut.otio")
    prepared = prepare_job(parse_spec(data), resume=False)
    assert prepared.edit is not None and prepared.edit.timeline_url == data["output"]["timeline_url"]
    windows = {
        p.ref.name: (p.info.frame_numbers(*p.window.analysed), p.window.delivered) for p in prepared.planned
    }
    assert windows["sc010"][0][0] == 1001 and windows["sc010"][0][-1] == 1020  # 4 handles before, 8 after
    assert windows["mov30"][1] == (22, 68)
    assert windows["grade_dpx"][0] == list(range(1001, 1011))
    # It already exists, and the job is not resuming: if_exists fail refuses it.
    os.makedirs(tmp_path / "back", exist_ok=True)
    (tmp_path / "back" / "cut.otio").write_text("{}")
    with pytest.raises(SpecError) as err:
        prepare_job(parse_spec(data), resume=False)
    assert err.value.field == "output.if_exists" and "cut.otio" in err.value.reason


def test_an_offline_clip_refuses_the_job_with_exit_2_and_nothing_written(
    media: Media, tmp_path, capsys, no_ray
) -> None:
    import yaml

    from jobs.render import EXIT_BAD_INPUT, main

    data = job(media, write_otio(the_cut(media), tmp_path / "ep101_v3.otio"), str(tmp_path))
    data["output"]["timeline_url"] = str(tmp_path / "back" / "cut.otio")
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump(data))
    assert main([str(spec)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "edit.offline" in err and "clip 'offline_a' at 01:00:02:01 on V1" in err and "'nest'" in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "back").exists()
