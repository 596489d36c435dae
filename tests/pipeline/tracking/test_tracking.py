"""Face association: chunked == one pass, crossing faces stay apart, gaps bridged, tracks end."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from pipeline.geometry.boxes import box_iou
from pipeline.geometry.types import Face
from pipeline.tracking.tracker import Tracker, TrackerState, TrackingConfig, track_chunk
from tests.tracking_media import (
    SyntheticShot,
    chunk_bounds,
    crossing_shot,
    gap_shot,
    multi_face_shot,
    shot_from_paths,
)

CONFIG = TrackingConfig()


def chunked_ids(shot: SyntheticShot, bounds: list[tuple[int, int]], config: TrackingConfig = CONFIG):
    """Track chunk by chunk, passing the state through JSON as a resumed job would."""
    ids: list[list[int]] = []
    state: TrackerState | None = None
    for start, end in bounds:
        chunk_ids, state = track_chunk(shot.faces[start:end], start, config, state)
        ids.extend(chunk_ids)
        state = TrackerState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert state is not None
    return ids, state


def tracks_of_person(shot: SyntheticShot, ids: list[list[int]]) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for persons, frame_ids in zip(shot.person, ids):
        for p, tid in zip(persons, frame_ids):
            out.setdefault(p, set()).add(tid)
    return out


@pytest.mark.parametrize(
    "shot",
    [multi_face_shot(), crossing_shot(hidden=(30, 31, 32)), gap_shot(leaves_at=45)],
    ids=["multi_face", "crossing", "gap"],
)
@pytest.mark.parametrize("n_chunks", [3, 4, 7])
def test_chunked_tracking_equals_one_pass(shot: SyntheticShot, n_chunks: int) -> None:
    one_ids, one_state = track_chunk(shot.faces, 0, CONFIG, None)
    ids, state = chunked_ids(shot, chunk_bounds(len(shot), n_chunks))
    assert ids == one_ids
    assert state.to_dict() == one_state.to_dict()


def test_chunk_boundary_inside_a_gap_and_at_every_frame() -> None:
    """Boundaries at every possible frame, including inside a miss, give the one-pass ids."""
    shot = gap_shot(n_frames=40, hidden=range(20, 24))
    one_ids, _ = track_chunk(shot.faces, 0, CONFIG, None)
    for cut in range(1, len(shot)):
        ids, _ = chunked_ids(shot, [(0, cut), (cut, len(shot))])
        assert ids == one_ids, f"boundary at frame {cut}"


def test_multi_face_tracks_are_per_person() -> None:
    shot = multi_face_shot()
    ids, _ = track_chunk(shot.faces, 0, CONFIG, None)
    per_person = tracks_of_person(shot, ids)
    assert all(len(t) == 1 for t in per_person.values()), per_person
    assert len(set().union(*per_person.values())) == 3


def test_crossing_faces_keep_their_tracks() -> None:
    """Boxes overlap completely at the crossing and one face is occluded for 3 frames."""
    shot = crossing_shot(hidden=(30, 31, 32))
    # The boxes really do overlap at the crossing.
    overlap = max(box_iou(f[0].box, f[1].box)[0, 0] for f in shot.faces if len(f) == 2)
    assert overlap > 0.75
    ids, _ = track_chunk(shot.faces, 0, CONFIG, None)
    per_person = tracks_of_person(shot, ids)
    assert per_person[0] != per_person[1]
    assert all(len(t) == 1 for t in per_person.values()), per_person


def _bounce_shot(with_embeddings: bool) -> SyntheticShot:
    """Two faces meet, overlap, and both turn back: motion prediction alone points the wrong way."""

    # a goes right and b left until both are at x=200 at frame 20, then both turn back.
    def a2(t: int) -> tuple[float, float]:
        return (80.0 + 6.0 * (t if t <= 20 else 40 - t), 120.0)

    def b2(t: int) -> tuple[float, float]:
        return (320.0 - 6.0 * (t if t <= 20 else 40 - t), 121.0)

    return shot_from_paths([a2, b2], 41, noise_px=0.5, seed=7, with_embeddings=with_embeddings)


def test_embeddings_disambiguate_faces_that_turn_back() -> None:
    with_emb = _bounce_shot(True)
    ids, _ = track_chunk(with_emb.faces, 0, CONFIG, None)
    per_person = tracks_of_person(with_emb, ids)
    assert all(len(t) == 1 for t in per_person.values()) and per_person[0] != per_person[1], per_person
    # Control: the same motion without embeddings swaps them, so the embeddings are what decided.
    no_emb = _bounce_shot(False)
    ids, _ = track_chunk(no_emb.faces, 0, CONFIG, None)
    per_person = tracks_of_person(no_emb, ids)
    assert any(len(t) > 1 for t in per_person.values()), per_person


def test_gap_within_max_keeps_track_id() -> None:
    shot = gap_shot(hidden=range(20, 25))  # 5 missed frames == max_gap_frames
    ids, _ = track_chunk(shot.faces, 0, CONFIG, None)
    assert len({i for frame in ids for i in frame}) == 1


def test_gap_longer_than_max_starts_new_track() -> None:
    shot = gap_shot(hidden=range(20, 26))  # 6 missed frames > max_gap_frames (5)
    ids, _ = track_chunk(shot.faces, 0, CONFIG, None)
    assert {i for frame in ids[:20] for i in frame} == {0}
    assert {i for frame in ids[26:] for i in frame} == {1}


def test_face_that_leaves_ends_its_track() -> None:
    shot = gap_shot(hidden=range(0), leaves_at=30)
    tracker = Tracker(CONFIG)
    for t, faces in enumerate(shot.faces):
        tracker.update(t, faces)
        live = [tr.track_id for tr in tracker.state().tracks]
        # Kept while a re-detection could still bridge the miss, dropped after.
        assert live == ([0] if t <= 29 + CONFIG.max_gap_frames + 1 else []), t


def test_reappearing_elsewhere_matches_by_embedding_not_box() -> None:
    """A face missed for 2 frames that reappears far away (no overlap) keeps its id by embedding;
    a different person at that spot gets a new id."""

    def jumper(t: int) -> tuple[float, float] | None:
        return None if t in (10, 11) else ((100.0, 100.0) if t < 10 else (400.0, 300.0))

    shot = shot_from_paths([jumper], 20, seed=11)
    ids, _ = track_chunk(shot.faces, 0, CONFIG, None)
    assert len({i for frame in ids for i in frame}) == 1

    stranger = shot_from_paths([lambda t: None, lambda t: (400.0, 300.0)], 1, seed=12).faces[0]
    tracker = Tracker(CONFIG)
    for t in range(10):
        tracker.update(t, shot.faces[t])
    assert tracker.update(12, stranger) == [1]


def test_state_round_trips_exactly_and_is_small() -> None:
    shot = multi_face_shot()
    _, state = track_chunk(shot.faces[:50], 0, CONFIG, None)
    text = json.dumps(state.to_dict())
    again = TrackerState.from_dict(json.loads(text))
    assert again.to_dict() == state.to_dict()
    for a, b in zip(state.tracks, again.tracks):
        for f in dataclasses.fields(a):
            va, vb = getattr(a, f.name), getattr(b, f.name)
            assert np.array_equal(va, vb) if isinstance(va, np.ndarray) else va == vb
    assert len(text) < 20_000 * max(1, len(state.tracks))


def test_update_rejects_frames_out_of_order() -> None:
    tracker = Tracker(CONFIG)
    tracker.update(5, [])
    with pytest.raises(ValueError, match="frame_index 5"):
        tracker.update(5, [])


def test_faces_without_embeddings_track_by_overlap() -> None:
    shot = multi_face_shot()
    bare = [[Face(f.box, f.landmarks, f.score, None) for f in frame] for frame in shot.faces]
    ids, _ = track_chunk(bare, 0, CONFIG, None)
    per_person = tracks_of_person(dataclasses.replace(shot, faces=bare), ids)
    assert all(len(t) == 1 for t in per_person.values()), per_person
