"""Face tasks packed for the trip to a render actor arrive as the same list of lists."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from pipeline.geometry.packing import PackedTasks, packed, packed_faces
from pipeline.geometry.types import Face, FaceTask
from tests.tracking_media import assert_tasks_identical


def _crowd(rng: np.random.Generator, frames: int = 48, faces: int = 12) -> list[list[FaceTask]]:
    return [
        [
            FaceTask(k, f"id{k % 3}", rng.random(4).astype(np.float32), rng.random((5, 2)).astype(np.float32))
            for k in range(faces if f % 7 else 0)  # every 7th frame has no face
        ]
        for f in range(frames)
    ]


def test_packed_tasks_unpickle_as_the_tasks() -> None:
    tasks = _crowd(np.random.default_rng(4))
    tasks[5][2] = FaceTask(2, "id2", tasks[5][2].box, tasks[5][2].landmarks, {"dense": [1, 2]})
    back = pickle.loads(pickle.dumps(packed(tasks)))
    assert type(back) is list and all(type(frame) is list for frame in back)
    assert_tasks_identical(back, tasks)
    assert back[5][2].extra == {"dense": [1, 2]}
    assert len(pickle.dumps(packed(tasks))) < len(pickle.dumps(tasks)) / 2  # arrays, not 500 dataclasses


@pytest.mark.parametrize(
    "tasks",
    [
        [],
        [[], [], []],
        # Arrays of different dtypes (or shapes) cannot be stacked: pickled as they are.
        [
            [FaceTask(1, "a", np.zeros(4, np.float32), np.zeros((5, 2), np.float32))],
            [FaceTask(1, "a", np.zeros(4, np.float64), np.zeros((5, 2), np.float32))],
        ],
    ],
)
def test_edge_cases_round_trip(tasks: list[list[FaceTask]]) -> None:
    back = pickle.loads(pickle.dumps(PackedTasks(tasks)))
    assert type(back) is list and len(back) == len(tasks)
    assert_tasks_identical(back, tasks)
    if tasks and tasks[0]:
        assert back[1][0].box.dtype == np.float64


def _faces(rng: np.random.Generator, *, embedded: bool = True) -> list[list[Face]]:
    def face(k: int) -> Face:
        emb = rng.random(8).astype(np.float32) if embedded or k % 2 else None
        return Face(
            rng.random(4).astype(np.float32), rng.random((5, 2)).astype(np.float32), 0.5 + k / 100, emb
        )

    return [[face(k) for k in range(12 if f % 5 else 0)] for f in range(30)]


@pytest.mark.parametrize("embedded", [True, False])
def test_packed_faces_unpickle_as_the_faces(embedded: bool) -> None:
    faces = _faces(np.random.default_rng(9), embedded=embedded)
    back = pickle.loads(pickle.dumps(packed_faces(faces)))
    assert type(back) is list and [len(f) for f in back] == [len(f) for f in faces]
    for fa, fb in zip(faces, back, strict=True):
        for a, b in zip(fa, fb, strict=True):
            assert a.score == b.score and a.box.dtype == b.box.dtype
            assert np.array_equal(a.box, b.box) and np.array_equal(a.landmarks, b.landmarks)
            assert (a.embedding is None) == (b.embedding is None)
            if a.embedding is not None:
                assert b.embedding is not None and a.embedding.dtype == b.embedding.dtype
                assert np.array_equal(a.embedding, b.embedding)
    assert pickle.loads(pickle.dumps(packed_faces([[], []]))) == [[], []]
