"""From the cut to delivery on Ray: a small OTIO cut of a real EXR plate and a real 30 fps movie
is rendered by the driver, and the cut comes back with each clip pointing at its output."""

from __future__ import annotations

import os

import opentimelineio as otio
import pytest

from cluster.driver import run_job
from cluster.spec.job import parse_spec
from jobs.demo_media import write_source_image
from pipeline.plates.sequence import list_frames, parse_sequence_url
from pipeline.video.probe import probe
from tests.cluster.edit.cut_media import (
    RATE,
    RT,
    TR,
    clip,
    gap,
    timeline,
    track,
    write_movie,
    write_otio,
    write_plate,
)

pytestmark = pytest.mark.ray

SIZE = (160, 90)


def test_a_cut_is_rendered_and_written_back_relinked(ray_local, tmp_path) -> None:
    plate = write_plate(tmp_path, "A001C003", count=12, size=SIZE)  # frames 1001-1012 at 01:00:00:00
    movie = write_movie(tmp_path / "M30.mp4", frames=45, size=SIZE)  # 1.5 s at 30 fps, from 01:00:00:00
    movie_start = otio.opentime.from_timecode("01:00:00:00", 30)
    reference = otio.schema.ExternalReference(target_url=movie, available_range=TR(movie_start, RT(45, 30)))
    cut = timeline(
        "ep101",
        track(
            "V1",
            clip("sc010", plate.reference(), plate.source(1003, 1010)),  # with 2 handles: the whole plate
            gap(4),
            # 0.5 s into the movie, 0.5 s long in a 24 fps cut: the movie's frames 15-29.
            clip("mov30", reference, TR(movie_start.rescaled_to(RATE) + RT(12, RATE), RT(12, RATE))),
            clip("offline", None, TR(RT(0, RATE), RT(6, RATE))),
        ),
    )
    out = tmp_path / "out"
    back_url = str(out / "ep101_recast.otio")
    data = {
        "job_id": "cut-job",
        "edit": {"url": write_otio(cut, tmp_path / "ep101.otio"), "handles": 2, "offline": "skip"},
        "shots": [{"name": "mov30", "output": str(out / "mov30.mp4")}],
        "identities": {
            "hero": {"images": [write_source_image(str(tmp_path / "source.jpg"))], "face_index": 0}
        },
        "output": {
            "url": str(out / "{shot}" / "{shot}.####.{ext}"),
            "preset": "ultrafast",
            "timeline_url": back_url,
        },
        "chunking": {"seconds": 1, "min_seconds": 1},
        "resources": {"cpus_per_actor": 0.5, "max_actors": 2, "max_inflight_per_actor": 2},
        "faces": {"batch_size": 4},
    }
    summary = run_job(parse_spec(data))
    assert summary.ok, summary.table()
    assert {s.name: s.status for s in summary.shots} == {"sc010": "published", "mov30": "published"}
    assert summary.edit is not None and summary.edit["timeline_written"] is True
    assert [s["clip"] for s in summary.edit["skipped"]] == ["offline"]
    assert any("'offline'" in w and "skipped" in w for w in summary.warnings)

    back = otio.adapters.read_from_file(back_url)
    clips = {c.name: c for c in back.find_clips()}
    assert isinstance(clips["offline"].media_reference, otio.schema.MissingReference)
    assert [type(i).__name__ for i in back.tracks[0]] == ["Clip", "Gap", "Clip", "Clip"]
    # The plate's clip: its output sequence, frames 1003-1010 plus 2 handles each side, same numbers.
    seq = clips["sc010"].media_reference
    assert isinstance(seq, otio.schema.ImageSequenceReference)
    output = seq.target_url_base + seq.name_prefix + "####" + seq.name_suffix
    assert output == str(out / "sc010" / "sc010.####.exr")
    assert [f.number for f in list_frames(parse_sequence_url(output))] == list(range(1001, 1013))
    assert seq.frame_for_time(clips["sc010"].source_range.start_time) == 1003
    # The movie's clip: its output holds the clip's 15 frames and 2 handles each side, at 30 fps.
    mov = clips["mov30"].media_reference
    assert isinstance(mov, otio.schema.ExternalReference) and mov.target_url == str(out / "mov30.mp4")
    info = probe(mov.target_url)
    assert info.frame_count == 19 and info.frame_rate == 30
    assert mov.available_range.duration == RT(19, 30)
    offset = clips["mov30"].source_range.start_time - mov.available_range.start_time
    assert offset.rescaled_to(30).value == pytest.approx(2)  # the clip starts after the 2 handle frames
    assert os.path.getsize(back_url) > 0
