"""Face tasks packed for the trip to a render actor arrive as the same list of lists."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from pipeline.geometry.task_pack import PackedTasks, packed
from pipeline.geometry.types import FaceTask
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
