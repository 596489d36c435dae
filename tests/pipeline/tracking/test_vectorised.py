"""The array tracker and smoother equal the per-face, per-frame code they replaced (issue 33), bit for bit.

The old code is kept in :mod:`tests.tracking_reference`.  Both run on the seeded
synthetic shots (the randomised shots of the other tracking tests), a crowd of
twelve faces per frame crossing and missed now and then, empty frames, a single
face, faces without embeddings, and chunk chains with the state passed through
JSON at every boundary.  Track ids, tracker states (their JSON, so every float
to the last bit), plan tasks and summaries must be identical.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from pipeline.geometry.types import Face
from pipeline.tracking.faceplan import plan_shot
from pipeline.tracking.smoothing import OneEuro, one_euro, smooth_track, smooth_tracks
from pipeline.tracking.tracker import Tracker, TrackerState, TrackingConfig, track_chunk
from tests.tracking_media import (
    TRACKING,
    assert_tasks_identical,
    chunk_bounds,
    crossing_shot,
    crowd_shot,
    frame_times_for,
    gap_shot,
    moving_shot,
    multi_face_shot,
    selection,
    shot_from_paths,
    still_shot,
)
from tests.tracking_reference import (
    ReferenceTracker,
    reference_one_euro,
    reference_plan_shot,
    reference_smooth_track,
    reference_track_chunk,
)


def _with_empty_frames(faces: list[list[Face]], every: int) -> list[list[Face]]:
    """The shot with every ``every``-th frame's detections dropped, and a run of empty frames."""
    out = [[] if t % every == 0 else list(f) for t, f in enumerate(faces)]
    for t in range(len(out) // 3, len(out) // 3 + 9):
        out[t] = []
    return out


def _mixed_embeddings(faces: list[list[Face]]) -> list[list[Face]]:
    """Some faces without an embedding, some with a shorter one (another recognizer): the odd cases."""
    out: list[list[Face]] = []
    k = 0
    for frame in faces:
        row = []
        for face in frame:
            k += 1
            if k % 5 == 0:
                face = dataclasses.replace(face, embedding=None)
            elif k % 7 == 0 and face.embedding is not None:
                short = face.embedding[:128]
                face = dataclasses.replace(face, embedding=(short / np.linalg.norm(short)).astype(np.float32))
            row.append(face)
        out.append(row)
    return out


def _shots() -> dict[str, list[list[Face]]]:
    crowd = crowd_shot(240)
    return {
        "multi_face": multi_face_shot().faces,
        "crossing": crossing_shot(hidden=(30, 31, 32)).faces,
        "crossing_no_embeddings": shot_from_paths(
            [lambda t: (60.0 + 4 * t, 120.0), lambda t: (300.0 - 4 * t, 122.0)],
            60,
            noise_px=1.0,
            seed=8,
            with_embeddings=False,
        ).faces,
        "gap": gap_shot(leaves_at=45).faces,
        "still": still_shot().faces,
        "single_face_linear": moving_shot(kind="linear", noise_px=1.0).faces,
        "single_face_sine": moving_shot(kind="sine", noise_px=1.0).faces,
        "crowd": crowd.faces,
        "crowd_empty_frames": _with_empty_frames(crowd.faces, 7),
        "crowd_mixed_embeddings": _mixed_embeddings(crowd.faces),
        "all_empty": [[] for _ in range(20)],
    }


SHOTS = _shots()
CONFIGS = {
    "default": TRACKING,
    "no_gap": TrackingConfig(max_gap_frames=0),
    "iou_only": TrackingConfig(embedding_weight=0.0, embedding_threshold=1.0),
}


def _chain(track, faces: Sequence[Sequence[Face]], n_chunks: int, config: TrackingConfig):
    """Track ``faces`` chunk by chunk with ``track``, the state through JSON at every boundary."""
    ids: list[list[int]] = []
    states: list[str] = []
    state: TrackerState | None = None
    for start, end in chunk_bounds(len(faces), n_chunks):
        chunk_ids, state = track(faces[start:end], start, config, state)
        ids.extend(chunk_ids)
        states.append(json.dumps(state.to_dict()))
        state = TrackerState.from_dict(json.loads(states[-1]))
    return ids, states


@pytest.mark.parametrize("config", list(CONFIGS), ids=list(CONFIGS))
@pytest.mark.parametrize("n_chunks", [1, 4, 9])
@pytest.mark.parametrize("name", list(SHOTS))
def test_track_chunk_equals_the_reference(name: str, n_chunks: int, config: str) -> None:
    faces = SHOTS[name]
    ids, states = _chain(track_chunk, faces, n_chunks, CONFIGS[config])
    ref_ids, ref_states = _chain(reference_track_chunk, faces, n_chunks, CONFIGS[config])
    assert ids == ref_ids
    assert states == ref_states  # every box, velocity, landmark and embedding sum to the last bit


def test_crowd_shot_is_a_crowd() -> None:
    """The crowd really has up to twelve faces per frame (most frames ten or more), crossing, with tracks ending and starting."""
    faces = SHOTS["crowd"]
    counts = [len(f) for f in faces]
    assert max(counts) == 12 and np.median(counts) >= 10
    ids, _ = _chain(track_chunk, faces, 1, TRACKING)
    assert len({i for frame in ids for i in frame}) > 12


def test_frame_by_frame_update_equals_the_reference() -> None:
    faces = SHOTS["crowd_empty_frames"]
    tracker, reference = Tracker(TRACKING), ReferenceTracker(TRACKING)
    for t, frame in enumerate(faces):
        if t % 5 == 3:
            continue  # a skipped frame: expiry is computed from frame indices
        assert tracker.update(t, frame) == reference.update(t, frame)
    assert tracker.state().to_dict() == reference.state().to_dict()
    with pytest.raises(ValueError, match="greater than the last frame"):
        tracker.update(len(faces) - 1, [])


def _assert_plans_equal(faces: list[list[Face]], ids: list[list[int]], config: TrackingConfig) -> None:
    sel = selection(mode="all", source="anna")
    times = frame_times_for(faces)
    plan = plan_shot(faces, ids, sel, {}, config, frame_times=times)
    reference = reference_plan_shot(faces, ids, sel, {}, config, frame_times=times)
    assert_tasks_identical(plan.tasks, reference.tasks)
    assert plan.tracks == reference.tracks


@pytest.mark.parametrize("smoothing", [True, False])
@pytest.mark.parametrize("name", ["multi_face", "crossing", "gap", "still", "crowd", "crowd_empty_frames"])
def test_plan_equals_the_reference(name: str, smoothing: bool) -> None:
    faces = SHOTS[name]
    config = TrackingConfig(smoothing=smoothing)
    ids, _ = _chain(track_chunk, faces, 4, config)
    _assert_plans_equal(faces, ids, config)


def _random_series(rng: np.random.Generator, n: int, k: int = 14) -> tuple[np.ndarray, np.ndarray, float]:
    values = np.cumsum(rng.standard_normal((n, k)) * rng.uniform(0.1, 5.0), axis=0) + 200.0
    times = np.cumsum(rng.choice([1 / 24, 1 / 25, 1 / 30, 1 / 60], size=n))
    return values, times, float(rng.uniform(20.0, 300.0))


SMOOTHING = OneEuro(min_cutoff_hz=0.96, beta=8.0, derivative_cutoff_hz=2.4)
KW: dict[str, Any] = dataclasses.asdict(SMOOTHING)


def test_smoothing_many_at_once_equals_the_reference_one_by_one() -> None:
    rng = np.random.default_rng(21)
    lengths = [1, 2, 3, 4, 15, 16, 17, 31, 90, 400, 3, 90]
    series = [_random_series(rng, n) for n in lengths] + [_random_series(rng, 50, k=3)]
    together = smooth_tracks(series, SMOOTHING)
    for (values, times, scale), out in zip(series, together, strict=True):
        assert np.array_equal(out, reference_smooth_track(values, times, scale, **KW))
        assert np.array_equal(smooth_track(values, times, scale, **KW), out)
        assert np.array_equal(
            one_euro(values, times, scale, **KW), reference_one_euro(values, times, scale, **KW)
        )
    assert smooth_tracks([], SMOOTHING) == []
    assert one_euro(np.zeros((0, 14)), np.zeros(0), 1.0, **KW).shape == (0, 14)


def test_full_length_crowd_shot_tracks_and_plans_as_the_reference() -> None:
    """720 frames of twelve faces, 24 chunks (what the scale scenario's crowd case has the driver do)."""
    faces = crowd_shot(720).faces
    ids, states = _chain(track_chunk, faces, 24, TRACKING)
    ref_ids, ref_states = _chain(reference_track_chunk, faces, 24, TRACKING)
    assert ids == ref_ids
    assert states == ref_states
    _assert_plans_equal(faces, ids, TRACKING)
