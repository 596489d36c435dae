"""A face a fix boxed by hand: the pack's detector finds its landmarks inside the box (a real face, the
default pack); where it finds none (an empty wall), the template's landmarks stay."""

from __future__ import annotations

import numpy as np

from pipeline.faces.boxfix import refine_box_tasks
from pipeline.geometry.types import FaceTask
from pipeline.tracking.fixes import template_landmarks
from tests.faces_data import astronaut


def boxed(box: list[float]) -> FaceTask:
    b = np.asarray(box, np.float32)
    return FaceTask(
        track_id=1_000_000, identity="hero", box=b, landmarks=template_landmarks(b), extra={"fix_box": True}
    )


def test_the_detector_finds_the_landmarks_inside_a_hand_drawn_box(default_models) -> None:
    picture = astronaut()
    (face, *_) = default_models.detector.detect(picture)
    x0, y0, x1, y1 = (float(v) for v in face.box)
    loose = [x0 - 6, y0 - 10, x1 + 8, y1 + 4]  # a box drawn by hand, not the detector's
    other = FaceTask(track_id=3, identity="hero", box=face.box, landmarks=face.landmarks)
    task, kept = refine_box_tasks([boxed(loose), other], picture, default_models.detector)
    assert kept is other
    assert task.extra == {"fix_box": True, "detected": True}
    size = x1 - x0  # the crop is letterboxed at another scale than the frame: a few pixels apart
    np.testing.assert_allclose(task.landmarks, face.landmarks, atol=0.06 * size)
    assert float(np.abs(task.landmarks - template_landmarks(task.box)).max()) > 1.0


def test_no_face_in_the_box_keeps_the_template_landmarks(default_models) -> None:
    wall = np.full((240, 320, 3), 128, np.uint8)
    task = boxed([100, 60, 180, 160])
    (same,) = refine_box_tasks([task], wall, default_models.detector)
    assert same is task
