"""The tracks pass: JSON lines per track and frame, and Nuke .chan files that match the face's transform."""

from __future__ import annotations

import json
import math

import numpy as np

from pipeline.geometry.align import template_points
from pipeline.geometry.types import Face, FaceTask
from pipeline.passes.naming import chan_url, pass_url
from pipeline.passes.tracks import TEMPLATE_SIZE, chan, face_transform, jsonl, track_frames

HEIGHT = 720


def _placed(tx: float, ty_image: float, degrees: float, scale: float) -> np.ndarray:
    """The ArcFace template's five points rotated, scaled and moved so its centre is at (tx, ty_image)."""
    points = template_points(TEMPLATE_SIZE, "arcface") - TEMPLATE_SIZE / 2
    theta = math.radians(-degrees)  # image rotation is the negative of Nuke's
    rotation = np.array([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]])
    return (points @ rotation.T) * scale + np.array([tx, ty_image])


def test_chan_transform_matches_the_placed_face() -> None:
    for tx, ty, deg, scale in [
        (640.0, 300.0, 0.0, 1.0),
        (200.5, 500.25, 17.0, 2.5),
        (900.0, 100.0, -30.0, 0.6),
    ]:
        marks = _placed(tx, ty, deg, scale)
        got = face_transform(marks, HEIGHT)
        assert np.allclose(got, (tx, HEIGHT - ty, deg, scale), atol=1e-3), (got, (tx, ty, deg, scale))


def test_records_states_and_chan_lines() -> None:
    numbers = list(range(1001, 1007))
    marks = [_placed(300 + 5 * i, 360, 2.0 * i, 1.5) for i in range(6)]
    box = np.array([200, 260, 400, 460], np.float32)
    faces = [[Face(box, m.astype(np.float32), 0.9)] if i != 3 else [] for i, m in enumerate(marks)]
    track_ids = [[7] if f else [] for f in faces]
    # frame 3: not detected but bridged (a task); frame 5: detected but not replaced
    tasks = [[FaceTask(1, "hero", box, m.astype(np.float32))] if i != 5 else [] for i, m in enumerate(marks)]
    records = list(
        track_frames(
            numbers,
            faces,
            track_ids,
            tasks,
            parts={1: (7,)},
            identities={1: "hero"},
            similarity={(1, 2): 0.71},
        )
    )
    assert [r.frame for r in records] == numbers
    assert [r.state for r in records] == ["detected"] * 3 + ["bridged", "detected", "missing"]
    assert records[2].similarity == 0.71 and records[3].landmarks_raw is None
    lines = [json.loads(line) for line in jsonl(records).decode().splitlines()]
    assert lines[0]["track"] == 1 and lines[0]["identity"] == "hero" and len(lines[0]["landmarks"]) == 5
    rows = [list(map(float, line.split())) for line in chan(records, HEIGHT).decode().splitlines()]
    assert [int(r[0]) for r in rows] == numbers  # frame 5 falls back to the detector's landmarks
    for i, row in enumerate(rows):
        assert len(row) == 10 and row[3:6] == [0.0, 0.0, 0.0] and row[9] == 1.0
        assert np.allclose(row[1:3], (300 + 5 * i, HEIGHT - 360), atol=0.01)
        assert math.isclose(row[6], 2.0 * i, abs_tol=0.01) and math.isclose(row[7], 1.5, abs_tol=1e-4)


def test_pass_urls() -> None:
    # A video's matte and face are EXR sequences too (its frames from 0), the face in scene-linear.
    assert pass_url("s3://d/ep/sc010.mp4", "matte") == "s3://d/ep/sc010_matte.####.exr"
    assert pass_url("/d/sc010.mov", "face", "/c/{shot}_{pass}", shot="sc010") == "/c/sc010_face.####.exr"
    assert pass_url("/d/sc010_recast.####.exr", "face") == "/d/sc010_recast_face.####.exr"
    assert pass_url("/d/sc010_recast.####.dpx", "matte") == "/d/sc010_recast_matte.####.exr"
    assert pass_url("/d/sc010.mov", "tracks") == "/d/sc010_tracks.jsonl"
    assert chan_url("/d/sc010_tracks.jsonl", 4) == "/d/sc010_tracks.track4.chan"
    templated = pass_url("/d/sc010.####.exr", "matte", "s3://c/{shot}/{pass}/{shot}_{pass}", shot="sc010")
    assert templated == "s3://c/sc010/matte/sc010_matte.####.exr"
