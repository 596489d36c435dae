"""One chunk's batches: frames whose tasks carry a fix's ``faces`` settings render with their own
renderer, the others with the shot's (no Ray: the batch renderer is a plain object)."""

from __future__ import annotations

import numpy as np

from actors.batches import BatchRenderer
from pipeline.geometry.types import FaceTask
from pipeline.video.chunking import Chunk
from pipeline.video.decode import Frame


class Stamp:
    """A renderer that writes its own value into every frame with tasks."""

    def __init__(self, value: int) -> None:
        self.value = value
        self.calls: list[int] = []

    def render(self, frames, tasks):
        self.calls.append(len(frames))
        return [np.full_like(f, self.value) for f in frames]


def task(**extra) -> FaceTask:
    return FaceTask(
        track_id=0,
        identity="hero",
        box=np.zeros(4, np.float32),
        landmarks=np.zeros((5, 2), np.float32),
        extra=extra,
    )


def test_frames_with_a_fix_faces_settings_render_with_their_own_renderer() -> None:
    shot, made = Stamp(1), {}

    def renderer_for(overrides):
        key = tuple(sorted(overrides.items()))
        return made.setdefault(key, Stamp(10 + len(made)))

    tasks = [
        [task()],
        [],
        [task(faces={"enhance": True})],
        [task(faces={"enhance": True})],
        [task(faces={"mask_blur": 0.2})],
    ]
    batches = BatchRenderer(
        shot,
        Chunk(0, 0, 5, 0, 5),
        tasks,
        mark=None,
        mattes=False,
        qc=None,
        identity=None,
        renderer_for=renderer_for,
    )
    frames = [Frame(index=i, pts=i, rgb=np.zeros((4, 4, 3), np.uint8)) for i in range(5)]
    rendered = batches(frames)
    assert [int(r.pixels[0, 0, 0]) for r in rendered] == [1, 0, 10, 10, 11]
    assert rendered[1].out is None  # no task: the frame as decoded
    assert shot.calls == [1] and [s.calls for s in made.values()] == [[2], [1]]
