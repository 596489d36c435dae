"""Reuse by key through real jobs on a local Ray: resubmitting with a changed render setting redoes
every render but no analysis; a changed source redoes exactly that shot; the unchanged shot's
published output is kept.  (The manifest's units: ``tests/cluster/state/test_manifest.py``.)
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from cluster.driver import run_job
from cluster.spec.job import parse_spec
from jobs.demo_media import make_face_clip
from tests.faultjobs import job_spec, make_media, records


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("manifest-media")
    out = make_media(str(root))
    out["other"] = make_face_clip(str(root / "other.mp4"), seconds=2.0, width=240, height=180, gop=24)
    return out


@pytest.mark.ray
def test_changed_spec_or_source_redoes_exactly_the_affected_work(media, tmp_path, ray_session) -> None:
    out = str(tmp_path / "out")
    work = os.path.join(out, ".recast-work", "invalidate")
    shot_b = str(tmp_path / "b.mp4")
    shutil.copyfile(media["other"], shot_b)

    def spec(**faces):
        data = job_spec(media, out, "invalidate")
        data["shots"] = [{"name": "a", "url": media["other"]}, {"name": "b", "url": shot_b}]
        data["output"]["if_exists"] = "overwrite"
        data["faces"] = {"batch_size": 4, **faces}
        return parse_spec(data)

    with ray_session.use():
        first = {s.name: s for s in run_job(spec()).shots}
        assert all(
            s.status == "published" and s.analyses_run == 2 and s.chunks_rendered == 2 for s in first.values()
        )
        output_a = Path(out, "a.mp4").read_bytes()

        # A render-only setting: every segment again, no analysis again.
        second = {s.name: s for s in run_job(spec(mask_blur=0.2)).shots}
        for s in second.values():
            assert (s.analyses_reused, s.analyses_run, s.chunks_reused, s.chunks_rendered) == (2, 0, 0, 2), s
        assert Path(out, "a.mp4").read_bytes() != output_a
        output_a = Path(out, "a.mp4").read_bytes()
        renders = {k: v["key"] for k, v in records(work, "a", "render").items()}

        # Shot b's source is replaced: b is redone from analysis, a is kept as published.
        make_face_clip(shot_b, seconds=2.0, width=240, height=180, gop=24, timecode="02:00:00:00")
        third = {s.name: s for s in run_job(spec(mask_blur=0.2)).shots}
    assert third["a"].reused and third["a"].status == "published" and third["a"].chunks_rendered == 0
    assert Path(out, "a.mp4").read_bytes() == output_a
    assert {k: v["key"] for k, v in records(work, "a", "render").items()} == renders
    b = third["b"]
    assert b.status == "published" and not b.reused
    assert (b.analyses_reused, b.analyses_run, b.chunks_reused, b.chunks_rendered) == (0, 2, 0, 2)
