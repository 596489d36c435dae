"""Fixes through a whole job on a local Ray: a finished job resubmitted with a ``keep_plate`` fix inside one
chunk renders that chunk again and nothing else (no analysis, the other segments byte for byte), the
fixed frames show the plate's face, and the summary says which chunk and why; a fix naming a track that is
not on its frames fails the shot naming the fix.  (The units: ``tests/pipeline/tracking/test_fixes.py``.)
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from cluster.driver import run_job
from cluster.spec.job import parse_spec
from tests.faultjobs import decode_frames, job_spec, make_media, records, rerendered_chunks

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, str]:
    return make_media(str(tmp_path_factory.mktemp("fixes-media")))


def spec(media: dict[str, str], out: str, fixes: list[dict]):
    data = job_spec(media, out, "fixes")
    data["shots"] = [{"name": "plate", "url": media["plate"], "fixes": fixes}]
    data["output"].update(if_exists="overwrite", keep_segments=True)
    return parse_spec(data)


def test_a_keep_plate_fix_renders_only_the_chunk_it_touches(media, tmp_path, ray_local) -> None:
    out = str(tmp_path / "out")
    work = os.path.join(out, ".recast-work", "fixes")
    output = os.path.join(out, "plate.mp4")
    (first,) = run_job(spec(media, out, [])).shots
    assert first.status == "published" and first.chunks_rendered == 3 and first.analyses_run == 3
    assert first.to_dict().get("fixes_rerendered") is None  # summary.json as before without fixes
    assert first.to_dict().get("fixes") is None
    before_frames = decode_frames(output)
    before_renders = records(work, "plate", "render")
    tracks = records(work, "plate", "track")
    on_screen = sorted({i for frame in tracks[1]["track_ids"] for i in frame})
    assert on_screen, tracks[1]
    track = on_screen[0]

    (second,) = run_job(spec(media, out, [{"frames": "30-40", "track": track, "action": "keep_plate"}])).shots
    assert second.status == "published", second.error
    assert (second.analyses_run, second.analyses_reused) == (0, 3)
    assert (second.chunks_rendered, second.chunks_reused) == (1, 2)
    assert [c.to_dict() for c in second.fixes_rerendered] == [
        {"chunk": 1, "frames": [24, 47], "reasons": [f"fix 0 (frames 30-40, track {track}) changed"]}
    ]
    label = f"fix 0 (frames 30-40, track {track}): keep the plate"
    assert second.to_dict()["fixes"] == [
        {"index": 0, "kind": "keep_plate", "frames": [30, 40], "track": track, "label": label}
    ]
    # The report marks the fix on the shot's strip, lists the chunk rendered again, offers the notes.
    report = json.loads(Path(work, "report.json").read_text())
    assert report["identities"] == ["hero"] and report["shots"][0]["frame_size"] == [240, 180]
    page = Path(work, "report.html").read_text()
    assert 'class="fix" data-fix="0"' in page and 'data-chunk="1"' in page and 'form class="notes"' in page
    assert rerendered_chunks(before_renders, records(work, "plate", "render")) == [1]  # 0, 2 byte for byte

    after_frames, plate = decode_frames(output), decode_frames(media["plate"])
    assert len(after_frames) == len(before_frames) == len(plate) == 72
    for f in [*range(24), *range(48, 72)]:
        assert np.array_equal(after_frames[f], before_frames[f]), f
    for f in range(30, 41):  # where the first run swapped the face, the plate within codec tolerance
        face = np.abs(before_frames[f] - plate[f]).sum(axis=2) > 60
        assert face.sum() > 200, f
        to_plate = float(np.mean(np.abs(after_frames[f] - plate[f])[face]))
        swapped = float(np.mean(np.abs(before_frames[f] - plate[f])[face]))
        assert to_plate < 8.0 and swapped > 20.0, (f, to_plate, swapped)
    for f in (29, 41):  # the frames around the fix keep the swap
        face = np.abs(before_frames[f] - plate[f]).sum(axis=2) > 60
        assert float(np.mean(np.abs(after_frames[f] - plate[f])[face])) > 20.0, f

    bad = [{"frames": "30-40", "track": track + 50, "action": "keep_plate"}]
    (third,) = run_job(spec(media, out, bad)).shots
    assert third.status == "failed"
    assert "shots[0].fixes[0]" in (third.error or "") and f"tracks there: {track}" in (third.error or "")
