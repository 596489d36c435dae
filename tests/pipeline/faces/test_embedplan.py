"""Embedding per track (``faces.embed: track``): fewer recognizer calls, the same decisions.

The synthetic shots of the tracking and plan tests (crossing faces with a hidden
stretch, three people entering and leaving, gaps, reappearance) and real pixel clips
(two real faces crossing, carphone, three people) are planned twice: with every
face embedded, and with only the faces the schedule chooses.  Track ids, identities,
boxes and landmarks of every task must be identical, and the schedule must save
recognizer calls.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from pydantic import ValidationError

from pipeline.faces.config import FaceConfig
from pipeline.faces.embedplan import EmbedSchedule
from pipeline.geometry.types import Face
from tests.tracking_media import (
    assert_tasks_identical,
    chunk_bounds,
    chunked_plan_from_faces,
    crossing_shot,
    gap_shot,
    moving_shot,
    multi_face_shot,
    selection,
)


def scheduled(faces: list[list[Face]], n_chunks: int, stride: int = 8) -> tuple[list[list[Face]], int]:
    """``faces`` with the embeddings the schedule skips removed (a fresh schedule per chunk, as
    on the actors); and how many faces kept theirs."""
    out: list[list[Face]] = []
    kept = 0
    for start, end in chunk_bounds(len(faces), n_chunks):
        schedule = EmbedSchedule(stride)
        for t in range(start, end):
            chosen = schedule.choose(t, faces[t])
            out.append([f if w else dataclasses.replace(f, embedding=None) for f, w in zip(faces[t], chosen)])
        kept += schedule.faces_chosen
    return out, kept


def assert_same_decisions(faces: list[list[Face]], sel, refs, n_chunks: int = 3) -> float:
    """Plans with every embedding and with the scheduled ones are identical; returns the share saved."""
    every = chunked_plan_from_faces(faces, n_chunks, sel, refs)
    fewer, kept = scheduled(faces, n_chunks)
    track = chunked_plan_from_faces(fewer, n_chunks, sel, refs)
    assert_tasks_identical(every.tasks, track.tasks)
    assert {k: v.identity for k, v in every.tracks.items()} == {
        k: v.identity for k, v in track.tracks.items()
    }
    total = sum(len(f) for f in faces)
    return 1.0 - kept / total


SHOTS = {
    "crossing_hidden": lambda: crossing_shot(hidden=(30, 31, 32)),
    "crossing": lambda: crossing_shot(),
    "multi_face": lambda: multi_face_shot(),
    "gap": lambda: gap_shot(),
    "gap_leaves": lambda: gap_shot(leaves_at=45),
    "moving": lambda: moving_shot(kind="linear", speed_px=6.0, noise_px=1.0),
}


@pytest.mark.parametrize("name", sorted(SHOTS))
@pytest.mark.parametrize("n_chunks", [1, 4])
def test_synthetic_shots_decide_the_same_with_fewer_embeddings(name: str, n_chunks: int) -> None:
    shot = SHOTS[name]()
    refs = {f"ref{i}": emb for i, emb in enumerate(shot.identities)}
    names = ["anna", "ben", "cleo"][: len(shot.identities)]
    sel = selection(mode="reference", references={f"ref{i}": n for i, n in enumerate(names)}, threshold=0.5)
    saved = assert_same_decisions(shot.faces, sel, refs, n_chunks)
    assert_same_decisions(shot.faces, selection(mode="all", source="anna"), {}, n_chunks)
    print(f"{name} chunks={n_chunks}: {saved:.0%} of embeddings saved")
    least = 0.15 if name.startswith("crossing") else 0.25 if name == "multi_face" else 0.4
    assert saved > least, saved


def test_schedule_embeds_starts_strides_jumps_and_crowds() -> None:
    shot = crossing_shot(hidden=(30, 31, 32))
    schedule = EmbedSchedule(8)
    chosen = [schedule.choose(t, f) for t, f in enumerate(shot.faces)]
    assert all(chosen[0]) and all(chosen[8]) and all(chosen[16])  # start, strides
    crossing = [t for t, f in enumerate(shot.faces) if len(f) == 2 and _apart(f) < 2.0]
    assert crossing and all(all(chosen[t]) for t in crossing)  # faces near each other
    assert all(all(chosen[t]) for t in range(33, 33 + 3))  # back from behind the other face
    # a jump: the same face moved far between two frames
    face = shot.faces[1][0]
    moved = dataclasses.replace(face, box=face.box + 200, landmarks=face.landmarks + 200)
    fresh = EmbedSchedule(8)
    assert fresh.choose(1, [face]) == [True] and fresh.choose(2, [face]) == [False]
    assert fresh.choose(3, [moved]) == [True]
    # every_frame embeds everything
    every = EmbedSchedule.of(FaceConfig(embed="every_frame"))
    assert all(all(every.choose(t, f)) for t, f in enumerate(shot.faces))


def _apart(faces: list[Face]) -> float:
    """Distance between two faces' centres in face widths."""
    a, b = (np.asarray(f.box, np.float64) for f in faces)
    width = float(a[2] - a[0])
    return float(np.abs((a[:2] + a[2:]) / 2 - (b[:2] + b[2:]) / 2).max()) / width


def test_embed_settings_are_validated() -> None:
    assert FaceConfig().embed == "track" and FaceConfig().embed_stride == 8
    with pytest.raises(ValidationError, match="embed_stride"):
        FaceConfig(embed_stride=0)
    with pytest.raises(ValidationError, match="embed"):
        FaceConfig(embed="sometimes")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def models():
    from pipeline.models.loader import load_face_models
    from pipeline.models.pack import load_pack
    from pipeline.models.runtime.settings import ExecutionConfig

    return load_face_models(load_pack("builtin:default"), ExecutionConfig())


def analyse(
    models, frames: list[np.ndarray], n_chunks: int, every_frame: bool
) -> tuple[list[list[Face]], int]:
    """The actor's path: one schedule per chunk, batches of 8 frames."""
    from pipeline.faces.analyze import FaceAnalyzer

    analyzer = FaceAnalyzer(models)
    out: list[list[Face]] = []
    for start, end in chunk_bounds(len(frames), n_chunks):
        schedule = EmbedSchedule(8, every_frame=every_frame)
        for b in range(start, end, 8):
            stop = min(b + 8, end)
            out.extend(analyzer.analyze(frames[b:stop], schedule=schedule, numbers=list(range(b, stop))))
    return out, analyzer.embedded


def test_real_clips_decide_the_same_with_fewer_recognizer_calls(models) -> None:
    from tests.faces_data import carphone_frames, crossing_clip, multi_face_clip

    clips = {
        "crossing": crossing_clip(30).frames,
        "carphone": carphone_frames(limit=36),
        "multi_face": multi_face_clip(30).frames,
    }
    for name, frames in clips.items():
        every, calls_every = analyse(models, frames, 3, every_frame=True)
        fewer, calls_track = analyse(models, frames, 3, every_frame=False)
        assert calls_every == sum(len(f) for f in every)
        assert calls_track < calls_every, name
        # detections are the same; only embeddings are left out
        for a, b in zip(every, fewer, strict=True):
            assert [f.box.tolist() for f in a] == [f.box.tolist() for f in b]
            for fa, fb in zip(a, b):
                if fb.embedding is not None:
                    assert np.array_equal(fa.embedding, fb.embedding)
        first = every[0]
        refs = {f"ref{i}": f.embedding for i, f in enumerate(first)}
        sel = selection(
            mode="reference", references={f"ref{i}": f"who{i}" for i in range(len(first))}, threshold=0.5
        )
        a = chunked_plan_from_faces(every, 3, sel, refs)
        b = chunked_plan_from_faces(fewer, 3, sel, refs)
        assert_tasks_identical(a.tasks, b.tasks)
        assert sum(len(t) for t in a.tasks) > 0, name
        print(f"{name}: recognizer calls {calls_track} of {calls_every}")
