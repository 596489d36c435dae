"""Review media through the whole job: the H.264 review movie with its burn-ins and QC flags, the
contact sheet and the OTIO playlist of the job's movies.

Two tiny shots, two chunks each, QC forced to flag (``min_identity: 0.99``); the movie is decoded
back and compared with reference renders of its burn-ins.
"""

from __future__ import annotations

import json

import numpy as np
import opentimelineio as otio
import pytest
from PIL import Image

from cluster.driver import run_job
from cluster.spec.job import parse_spec
from jobs.demo_media import make_face_clip, write_source_image
from pipeline.review.frames import FrameStamp, ReviewLook, stamp_box, stamp_label, timecode_of
from pipeline.review.movie import flag_labels
from pipeline.review.text import draw_labels, label_box
from pipeline.video.decode import decode_range
from pipeline.video.probe import probe

pytestmark = pytest.mark.ray

FPS = 12


def _job(tmp_path, clips: dict[str, str], source: str) -> dict:
    return {
        "job_id": "dailies",
        "shots": [{"name": name, "url": url} for name, url in clips.items()],
        "identities": {"hero": {"images": [source], "face_index": 1}},
        "output": {
            "url": str(tmp_path / "out" / "{shot}.mp4"),
            "review": {"url": str(tmp_path / "review" / "{shot}_review.mp4"), "layout": "side_by_side"},
            "review_timeline_url": str(tmp_path / "review" / "dailies.otio"),
        },
        "qc": {"min_identity": 0.99, "identity_every": 5},
        "chunking": {"seconds": 1, "min_seconds": 1, "snap_to_keyframes": False},
        "resources": {"cpus_per_actor": 0.5, "max_actors": 2},
        "faces": {"batch_size": 4},
    }


def _frames(path: str) -> list[np.ndarray]:
    info = probe(path)
    return [f.rgb for f in decode_range(path, info, 0, info.frame_count)]


def _region(rgb: np.ndarray, box: tuple[int, int, int, int]) -> np.ndarray:
    left, top, right, bottom = box
    return rgb[top:bottom, left:right].astype(np.int16)


def test_review_movie_playlist_and_contact_sheet(ray_local, tmp_path) -> None:
    source = write_source_image(str(tmp_path / "source.jpg"))
    clips = {
        name: make_face_clip(str(tmp_path / f"{name}.mp4"), seconds=2, width=160, height=90, fps=FPS)
        for name in ("sh010", "sh020")
    }
    job = _job(tmp_path, clips, source)
    job["shots"][1].update(frames="4-19", handles=2)  # delivered without its handles
    job["output"]["include_handles"] = False
    summary = run_job(parse_spec(job))
    assert summary.ok, summary.table()
    record = json.loads((tmp_path / "out" / ".recast-work" / "dailies" / "summary.json").read_text())
    shots = {s["name"]: s for s in record["shots"]}

    movie = str(tmp_path / "review" / "sh010_review.mp4")
    info, plate = probe(movie), probe(clips["sh010"])
    assert info.frame_count == plate.frame_count == 2 * FPS
    assert info.codec == "h264" and info.pix_fmt == "yuv420p" and info.colorspace == "bt709"
    look = ReviewLook.of("sh010", 160, 90, "side_by_side", 1920)
    assert (info.width, info.height) == look.size == (320, 90)

    frames = _frames(movie)
    box = stamp_box(look)
    blank = np.zeros((look.size[1], look.size[0], 3), np.uint8)
    for index in (0, 13):
        stamp = FrameStamp(index, timecode_of(plate.timecode, index, plate.frame_rate))
        reference = draw_labels(blank, [stamp_label(look, stamp)], look.text)
        error = np.abs(_region(frames[index], box) - _region(reference, box))
        assert error.mean() < 12, (index, error.mean())  # the text as drawn, through one x264 pass
    assert np.abs(_region(frames[0], box) - _region(frames[13], box)).mean() > 3

    flags = shots["sh010"]["qc"]["flags"]
    low = [f for f in flags if f["reason"] == "low_identity"]
    assert low, flags
    flagged = {n for f in flags for n in range(f["first"], f["last"] + 1)}
    unflagged = [n for n in range(len(frames)) if n not in flagged]
    assert unflagged, flagged
    first = low[0]["first"]
    corner = label_box(
        flag_labels([f"low_identity track {low[0]['track']}"], look.size, look.text)[0], look.text
    )
    inside = _region(frames[first], corner)
    outside = _region(frames[unflagged[0]], corner)
    assert np.abs(inside - outside).mean() > 10  # the flag's text in the corner of its frames only
    review = shots["sh010"]["review"]
    assert review["movie_url"] == movie and review["frames"] == 2 * FPS
    assert review["flagged_frames"] == len(flagged & set(range(len(frames))))

    # The review movie and contact sheet show AI-replaced faces too: signed like the output (issue 43).
    from pipeline.provenance.credentials import verify_video

    for signed in (movie, str(tmp_path / "review" / "sh010_review_contact.png")):
        found = verify_video(signed)
        assert found.status == "valid" and found.ai_replaced and found.job_id == "dailies", (signed, found)
    sheet = Image.open(tmp_path / "review" / "sh010_review_contact.png")
    sheet.verify()
    sheet = Image.open(tmp_path / "review" / "sh010_review_contact.png")
    assert sheet.format == "PNG" and sheet.width == 2 * 320 + 3 * 8
    rows = min(len(flags), 24)
    assert sheet.height == 2 * 14 + 3 * 8 + rows * (14 + 2 * 8 + 180) + 8

    timeline = otio.adapters.read_from_file(str(tmp_path / "review" / "dailies.otio"))
    clips_read = list(timeline.find_clips())
    assert [c.name for c in clips_read] == ["sh010", "sh020"]
    assert [c.media_reference.target_url for c in clips_read] == [
        str(tmp_path / "review" / f"{name}_review.mp4") for name in ("sh010", "sh020")
    ]
    assert [c.media_reference.available_range.duration.value for c in clips_read] == [2 * FPS, 16]
    # The report links each shot's review media and the playlist, relative to the work area.
    assert record["review_timeline_url"] == str(tmp_path / "review" / "dailies.otio")
    page = (tmp_path / "out" / ".recast-work" / "dailies" / "report.html").read_text()
    for name in ("sh010_review.mp4", "sh010_review_contact.png", "sh020_review.mp4", "dailies.otio"):
        assert f'href="../../../review/{name}"' in page, name

    # A shot delivered without its handles: its delivered frames, burnt in with their own numbers.
    windowed = str(tmp_path / "review" / "sh020_review.mp4")
    assert probe(windowed).frame_count == 16 == shots["sh020"]["review"]["frames"]
    stamp = FrameStamp(4, timecode_of(plate.timecode, 4, plate.frame_rate))
    reference = draw_labels(blank, [stamp_label(look, stamp)], look.text)
    assert np.abs(_region(_frames(windowed)[0], box) - _region(reference, box)).mean() < 12

    # A driver stopped after sh010 was published but before its review was written: the resumed job
    # keeps the output and makes the review media again from the records and the kept review segments.
    folder = tmp_path / "out" / ".recast-work" / "dailies" / "segments" / "sh010"
    kept = sorted(p.name for p in folder.iterdir())
    assert len(kept) == 2 and all(name.endswith(".review.mp4") for name in kept), kept
    (folder / "00000-leftover.mp4").write_bytes(b"a segment the stopped driver did not remove")
    (tmp_path / "review" / "sh010_review.mp4").rename(tmp_path / "first_review.mp4")
    (tmp_path / "review" / "sh010_review_contact.png").unlink()
    again = run_job(parse_spec(job))
    assert again.ok and not again.warnings, again.table()
    shot = next(s for s in again.shots if s.name == "sh010")
    assert shot.reused and shot.chunks_rendered == 0 and shot.review is not None
    assert shot.review.frames == 2 * FPS and shot.review.flagged_frames == review["flagged_frames"]
    made = _frames(movie)
    assert len(made) == len(frames)
    # The same burn-ins and flags.  Not the same bytes: libx264 is not run-to-run deterministic at
    # this tiny size (320x90: up to 6 different files from 10 encodes of the same frames, also with
    # one thread; mean differences up to ~1 code value late in the GOP), so the frames are compared
    # loosely and the flag's corner closely.
    for before, after in zip(frames, made, strict=True):
        assert np.abs(before.astype(np.int16) - after.astype(np.int16)).mean() < 2.5
    assert np.abs(_region(made[first], corner) - inside).mean() < 4
    assert np.abs(_region(made[first], corner) - _region(made[unflagged[0]], corner)).mean() > 10
    assert (tmp_path / "review" / "sh010_review_contact.png").exists()
    assert verify_video(movie).status == "valid"  # made again: signed again
    assert sorted(p.name for p in folder.iterdir()) == kept  # the leftover segment is gone


def test_an_exr_plate_review_is_shown_through_its_display_view(ray_local, tmp_path) -> None:
    import OpenImageIO as oiio

    from pipeline.plates.colour import load_config
    from pipeline.review.view import DisplayView
    from tests.plates import write_sequence

    plate = write_sequence(tmp_path / "plates", "sh030_plate", count=24, size=(160, 90), fps=FPS)
    source = write_source_image(str(tmp_path / "source.jpg"))
    job = _job(tmp_path, {"sh030": plate}, source)
    job["output"]["url"] = str(tmp_path / "out" / "{shot}" / "{shot}.####.exr")
    job["output"]["review"]["layout"] = "wipe"
    summary = run_job(parse_spec(job))
    assert summary.ok, summary.table()
    movie = str(tmp_path / "review" / "sh030_review.mp4")
    info = probe(movie)
    assert info.frame_count == 24 and (info.width, info.height) == (160, 90) and info.pix_fmt == "yuv420p"
    assert ReviewLook.of("sh030", 160, 90, "wipe", 1920).size == (160, 90)
    first = _frames(movie)[0]
    # The plate's half as the config's Rec.709 display shows the ACEScg pixels (not their raw values).
    pixels = oiio.ImageBuf(plate.replace("####", "1001")).get_pixels(oiio.FLOAT)[..., :3]
    shown = DisplayView(load_config("ocio://default"), "ACEScg")(pixels)
    region = (slice(30, 70), slice(2, 45))  # below the shot's name, left of the face and its identity
    # The plate is grainy and x264 smooths grain: compare the region's mean colour.
    mean = first[region].reshape(-1, 3).mean(axis=0)
    error = np.abs(mean - shown[region].reshape(-1, 3).mean(axis=0)).max()
    raw = np.clip(pixels[region] * 255, 0, 255).reshape(-1, 3).mean(axis=0)
    assert error < 3, (mean, error)
    assert np.abs(mean - raw).max() > 3 * error  # not the raw ACEScg values
    timeline = otio.adapters.read_from_file(str(tmp_path / "review" / "dailies.otio"))
    assert [c.name for c in timeline.find_clips()] == ["sh030"]
    assert (tmp_path / "review" / "sh030_review_contact.png").is_file()


def test_review_media_already_there_are_kept_with_skip_and_replaced_with_overwrite(
    ray_local, tmp_path
) -> None:
    """``output.if_exists`` holds for review media and the playlist (issue 41): ``skip`` leaves a review
    movie and a playlist already there as they are (the summary warns, the output is published);
    ``overwrite`` replaces them."""
    source = write_source_image(str(tmp_path / "source.jpg"))
    clip = make_face_clip(str(tmp_path / "sh010.mp4"), seconds=1, width=160, height=90, fps=FPS)
    job = _job(tmp_path, {"sh010": clip}, source)
    review = tmp_path / "review"
    review.mkdir()
    movie, sheet, playlist = (
        review / "sh010_review.mp4",
        review / "sh010_review_contact.png",
        review / "dailies.otio",
    )
    theirs = b"an editor's cut of the dailies, not this job's"
    movie.write_bytes(theirs)
    playlist.write_bytes(theirs)

    job["output"]["if_exists"] = "skip"
    kept = run_job(parse_spec(job), resume=False)
    assert kept.ok, kept.table()
    assert (tmp_path / "out" / "sh010.mp4").is_file()
    assert movie.read_bytes() == theirs and playlist.read_bytes() == theirs
    assert not sheet.exists()  # the shot's review media are left as a pair
    shot = next(s for s in kept.shots if s.name == "sh010")
    assert shot.review is None and kept.review_timeline_url is None
    assert any(str(movie) in w and "if_exists: skip" in w for w in kept.warnings), kept.warnings
    assert any(str(playlist) in w and "if_exists: skip" in w for w in kept.warnings), kept.warnings

    job["output"]["if_exists"] = "overwrite"
    replaced = run_job(parse_spec(job), resume=False)
    assert replaced.ok and not replaced.warnings, replaced.table()
    assert probe(str(movie)).frame_count == FPS and sheet.is_file()
    timeline = otio.adapters.read_from_file(str(playlist))
    assert [c.name for c in timeline.find_clips()] == ["sh010"]
