"""Detectors of the default pack on real faces (t1.jpg: 6 people, the astronaut: 1)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.geometry.types import Face
from pipeline.models.default_pack import RETINAFACE_CONTRACT, build_default_pack
from pipeline.models.detectors.retinaface import RetinaFaceDetector
from pipeline.models.loader import load_face_models
from pipeline.models.pack import ModelEntry
from pipeline.models.runtime import make_runner
from pipeline.models.runtime.settings import ExecutionConfig
from tests.faces_data import astronaut, t1


@pytest.fixture(scope="module")
def retinaface(tmp_path_factory: pytest.TempPathFactory) -> RetinaFaceDetector:
    dest = tmp_path_factory.mktemp("retina-pack")
    build_default_pack(str(dest), detector="retinaface")
    entry = ModelEntry(role="detector", kind="retinaface", file="x", contract=RETINAFACE_CONTRACT)
    from pipeline.models.default_pack import RETINAFACE_FILE

    runner = make_runner(str(dest / RETINAFACE_FILE), ExecutionConfig(providers=("CPUExecutionProvider",)))
    return RetinaFaceDetector(runner, entry)


def _check_anatomy(face: Face) -> None:
    x1, y1, x2, y2 = face.box
    pts = face.landmarks
    assert np.all(pts[:, 0] >= x1 - 1) and np.all(pts[:, 0] <= x2 + 1), (face.box, pts)
    assert np.all(pts[:, 1] >= y1 - 1) and np.all(pts[:, 1] <= y2 + 1), (face.box, pts)
    left_eye, right_eye, nose, left_mouth, right_mouth = pts
    assert left_eye[0] < right_eye[0] and left_mouth[0] < right_mouth[0]
    eyes_y = max(left_eye[1], right_eye[1])
    mouth_y = min(left_mouth[1], right_mouth[1])
    assert eyes_y < nose[1] < mouth_y
    assert face.embedding is None


@pytest.mark.parametrize("which", ["yunet", "retinaface"])
def test_finds_all_six_faces_in_t1_and_the_astronaut(which: str, default_models, retinaface) -> None:
    detector = default_models.detector if which == "yunet" else retinaface
    group = detector.detect(t1())
    assert len(group) == 6
    boxes = np.stack([f.box for f in group])
    # six different people: no two boxes overlap much
    for i in range(6):
        for j in range(i + 1, 6):
            ix = max(0.0, min(boxes[i, 2], boxes[j, 2]) - max(boxes[i, 0], boxes[j, 0]))
            iy = max(0.0, min(boxes[i, 3], boxes[j, 3]) - max(boxes[i, 1], boxes[j, 1]))
            assert ix * iy < 0.1 * min(group[i].area, group[j].area)
    for face in group:
        _check_anatomy(face)
        assert face.score > 0.5

    solo = detector.detect(astronaut())
    assert len(solo) == 1
    _check_anatomy(solo[0])
    x1, y1, x2, y2 = solo[0].box
    assert 150 < x1 < 200 and 40 < y1 < 90 and 250 < x2 < 300 and 150 < y2 < 200  # her face


def test_batched_detection_equals_single(default_models) -> None:
    frames = [t1(), astronaut(), np.full((200, 300, 3), 90, np.uint8)]
    batched = default_models.detector.detect_batch(frames)
    assert [len(b) for b in batched] == [6, 1, 0]
    for frame, faces in zip(frames, batched):
        single = default_models.detector.detect(frame)
        assert len(single) == len(faces)
        for a, b in zip(single, faces):
            np.testing.assert_allclose(a.box, b.box, atol=1e-3)
            np.testing.assert_allclose(a.landmarks, b.landmarks, atol=1e-3)


def test_default_pack_with_retinaface_loads(tmp_path) -> None:
    from pipeline.models.pack import load_pack

    build_default_pack(str(tmp_path / "pack"), detector="retinaface")
    pack = load_pack(str(tmp_path / "pack"), cache_dir=str(tmp_path / "cache"))
    models = load_face_models(pack, ExecutionConfig(providers=("CPUExecutionProvider",)))
    assert isinstance(models.detector, RetinaFaceDetector)
    assert len(models.detector.detect(astronaut())) == 1
