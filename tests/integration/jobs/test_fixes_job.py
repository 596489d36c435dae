"""Fixes through a whole job on a local Ray: a finished job resubmitted with a ``keep_plate`` fix inside one
chunk renders that chunk again and nothing else (no analysis; the other chunks, whose segments were removed
at the first publish, cut back out of the published output with their packets byte for byte), the fixed
frames show the plate's face, and the summary says which chunk and why; a fix naming a track that is not
on its frames fails the shot naming the fix.  (The units: ``tests/pipeline/tracking/test_fixes.py``;
``output.keep_segments``: ``test_fixes_crossing_job.py``.)
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import av
import numpy as np
import pytest

from cluster.driver import run_job
from cluster.spec.job import parse_spec
from tests.faultjobs import decode_frames, job_spec, make_media, records

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, str]:
    return make_media(str(tmp_path_factory.mktemp("fixes-media")))


def packets(path: str) -> list[tuple[bytes, int | None, int | None]]:
    """The video packets in decode order, with their timestamps."""
    with av.open(path) as container:
        return [(bytes(p), p.pts, p.dts) for p in container.demux(video=0) if p.size]


def tracks_pass(out: str) -> list[dict]:
    return [json.loads(line) for line in Path(out, "plate_tracks.jsonl").read_text().splitlines()]


def spec(media: dict[str, str], out: str, fixes: list[dict]):
    data = job_spec(media, out, "fixes")
    data["shots"] = [{"name": "plate", "url": media["plate"], "fixes": fixes}]
    data["output"].update(if_exists="overwrite", passes=["tracks"])  # keep_segments: false, the default
    data["output"]["review"] = {"url": os.path.join(out, "review", "{shot}_review.mp4"), "layout": "after"}
    return parse_spec(data)


def test_a_keep_plate_fix_renders_only_the_chunk_it_touches(media, tmp_path, ray_local) -> None:
    out = str(tmp_path / "out")
    work = os.path.join(out, ".recast-work", "fixes")
    output = os.path.join(out, "plate.mp4")
    (first,) = run_job(spec(media, out, [])).shots
    assert first.status == "published" and first.chunks_rendered == 3 and first.analyses_run == 3
    assert first.to_dict().get("fixes_rerendered") is None  # summary.json as before without fixes
    assert first.to_dict().get("fixes") is None
    before_frames, before_packets = decode_frames(output), packets(output)
    assert all("fix" not in line for line in tracks_pass(out))  # the tracks pass as before without fixes
    movie = os.path.join(out, "review", "plate_review.mp4")
    assert first.review is not None and first.review.frames == len(decode_frames(movie)) == 72
    # Once published only the (small) review segments stay, one per chunk.
    kept = sorted(os.listdir(os.path.join(work, "segments", "plate")))
    assert len(kept) == 3 and all(name.endswith(".review.mp4") for name in kept), kept
    before_renders = records(work, "plate", "render")
    tracks = records(work, "plate", "track")
    on_screen = sorted({i for frame in tracks[1]["track_ids"] for i in frame})
    assert on_screen, tracks[1]
    track = on_screen[0]

    (second,) = run_job(spec(media, out, [{"frames": "30-40", "track": track, "action": "keep_plate"}])).shots
    assert second.status == "published", second.error
    assert (second.analyses_run, second.analyses_reused) == (0, 3)
    assert (second.chunks_rendered, second.chunks_reused, second.chunks_recut) == (1, 2, 2)
    assert [c.to_dict() for c in second.fixes_rerendered] == [
        {"chunk": 1, "frames": [24, 47], "reasons": [f"fix 0 (frames 30-40, track {track}) changed"]}
    ]
    label = f"fix 0 (frames 30-40, track {track}): keep the plate"
    assert second.to_dict()["fixes"] == [
        {"index": 0, "kind": "keep_plate", "frames": [30, 40], "track": track, "label": label}
    ]
    # The tracks pass shows the kept frames as kept by fix 0, not as lost.
    lines = tracks_pass(out)
    fixed = [line for line in lines if "fix" in line]
    assert sorted(line["frame"] for line in fixed) == list(range(30, 41))
    assert all(line["state"] == "kept" and line["fix"] == 0 and line["track"] == track for line in fixed)
    # The report marks the fix on the shot's strip, lists the chunk rendered again, offers the notes.
    report = json.loads(Path(work, "report.json").read_text())
    assert report["identities"] == ["hero"] and report["shots"][0]["frame_size"] == [240, 180]
    page = Path(work, "report.html").read_text()
    assert 'class="fix" data-fix="0"' in page and 'data-chunk="1"' in page and 'form class="notes"' in page
    after_renders = records(work, "plate", "render")
    for index in (0, 2):  # reused: the same render, its segment cut back out of the first output
        assert after_renders[index]["key"] == before_renders[index]["key"]
        assert after_renders[index]["frames"] == 24
    assert after_renders[1]["key"] != before_renders[1]["key"]
    # The cut segments are removed again; the review segments of this run's renders stay.
    now_kept = sorted(os.listdir(os.path.join(work, "segments", "plate")))
    assert len(now_kept) == 3 and now_kept[0] == kept[0] and now_kept[2] == kept[2], (kept, now_kept)
    assert now_kept[1] != kept[1] and now_kept[1].endswith(".review.mp4")
    # The review movie is whole again: chunk 1's new review frames between the kept ones.
    assert second.review is not None and second.review.frames == len(decode_frames(movie)) == 72
    # Chunks 0 and 2 are the first run's packets byte for byte, at the same timestamps; chunk 1's differ.
    after_packets = packets(output)
    assert len(after_packets) == len(before_packets) == 72
    assert after_packets[:24] == before_packets[:24] and after_packets[48:] == before_packets[48:]
    assert after_packets[24:48] != before_packets[24:48]

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
