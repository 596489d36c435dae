"""Identities and face selection on real faces (SFace embeddings of the default pack)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pydantic
import pytest

from pipeline.errors import FaceError, SpecError
from pipeline.faces.analyze import FaceAnalyzer
from pipeline.faces.config import SelectionConfig
from pipeline.faces.identity import identity_from_images, load_identity
from pipeline.faces.select import check_selection, select_faces
from tests.faces_data import astronaut, carphone_frames, t1, t1_path


@pytest.fixture(scope="module")
def identities(default_models):
    frames = carphone_frames(step=8)
    caller = identity_from_images("caller", [("carphone#0", frames[0])], default_models)
    astro = identity_from_images("astro", [("astronaut", astronaut())], default_models)
    return {"caller": caller, "astro": astro}


def test_reference_selection_follows_the_caller_through_the_clip(default_models, identities) -> None:
    frames = carphone_frames(step=8)  # 15 frames over the whole clip
    analyzer = FaceAnalyzer(default_models)
    faces = analyzer.analyze(frames)
    selection = SelectionConfig(mode="reference", references={"caller": "astro", "astro": "caller"})
    sims = []
    for per_frame in faces:
        chosen = select_faces(per_frame, selection, identities)
        assert [source for _, source in chosen] == ["astro"]  # the caller, every frame, never "astro"
        sims.append(float(chosen[0][0].embedding @ identities["caller"].embedding))
    assert min(sims) >= 0.65, sims
    assert analyzer.stage_seconds["detect"] > 0 and analyzer.stage_seconds["recognize"] > 0


def test_nobody_in_t1_is_the_astronaut(default_models, identities) -> None:
    faces = FaceAnalyzer(default_models).analyze([t1()])[0]
    assert len(faces) == 6
    selection = SelectionConfig(mode="reference", references={"astro": "caller"})
    assert select_faces(faces, selection, identities) == []
    assert max(float(f.embedding @ identities["astro"].embedding) for f in faces) < 0.3


def test_several_people_in_one_shot_each_get_their_source(default_models, identities) -> None:
    group = t1()
    a = identity_from_images("a", [("t1", group)], default_models, face_index=0)
    d = identity_from_images("d", [("t1", group)], default_models, face_index=3)
    known = {**identities, "a": a, "d": d}
    faces = FaceAnalyzer(default_models).analyze([group])[0]
    selection = SelectionConfig(mode="reference", references={"a": "astro", "d": "caller"})
    chosen = select_faces(faces, selection, known)
    assert len(chosen) == 2
    by_source = {source: face for face, source in chosen}
    np.testing.assert_allclose(by_source["astro"].box, a.source_box, atol=1)
    np.testing.assert_allclose(by_source["caller"].box, d.source_box, atol=1)
    left_to_right = sorted(faces, key=lambda f: float(f.box[0]))
    assert by_source["astro"] is left_to_right[0] and by_source["caller"] is left_to_right[3]


def test_all_and_largest(identities) -> None:
    faces = []
    from pipeline.geometry.types import Face

    for size in (40, 90, 60):
        faces.append(
            Face(
                box=np.array([0, 0, size, size], np.float32),
                landmarks=np.zeros((5, 2), np.float32),
                score=0.9,
            )
        )
    every = select_faces(faces, SelectionConfig(mode="all", source="astro"), identities)
    assert [f for f, _ in every] == faces and {s for _, s in every} == {"astro"}
    largest = select_faces(faces, SelectionConfig(mode="largest", source="caller"), identities)
    assert largest == [(faces[1], "caller")]
    assert select_faces([], SelectionConfig(mode="largest", source="caller"), identities) == []


def test_selection_config_is_checked(identities) -> None:
    with pytest.raises(SpecError, match="selection.source.*needs a source"):
        check_selection(SelectionConfig(mode="all"), identities)
    with pytest.raises(pydantic.ValidationError, match="needs 'references'"):
        SelectionConfig(mode="reference")
    with pytest.raises(SpecError, match="nobody"):
        check_selection(SelectionConfig(mode="reference", references={"nobody": "astro"}), identities)


def test_identity_from_files_is_the_normalised_mean(default_models, tmp_path: Path) -> None:
    image = astronaut()
    first, second = tmp_path / "astro.png", tmp_path / "astro_mirror.jpg"
    cv2.imwrite(str(first), cv2.cvtColor(image, cv2.COLOR_RGB2BGR))
    cv2.imwrite(str(second), cv2.cvtColor(np.ascontiguousarray(image[:, ::-1]), cv2.COLOR_RGB2BGR))
    both = load_identity("astro", [str(first), str(second)], default_models)
    one = load_identity("astro", [str(first)], default_models)
    mirror = load_identity("astro", [str(second)], default_models)
    expected = one.embedding + mirror.embedding
    np.testing.assert_allclose(both.embedding, expected / np.linalg.norm(expected), atol=1e-5)
    assert abs(float(np.linalg.norm(both.embedding)) - 1.0) < 1e-5
    assert both.source_rgb.shape == image.shape and both.source_landmarks.shape == (5, 2)
    assert float(one.embedding @ mirror.embedding) > 0.6


def test_identity_errors_name_the_image(default_models, tmp_path: Path) -> None:
    blank = tmp_path / "blank.png"
    cv2.imwrite(str(blank), np.full((240, 320, 3), 128, np.uint8))
    with pytest.raises(FaceError, match="blank.png.*no face"):
        load_identity("x", [str(blank)], default_models)
    with pytest.raises(FaceError, match="t1.jpg.*6 faces.*face_index"):
        load_identity("x", [str(t1_path())], default_models)
    with pytest.raises(FaceError, match="face_index 9 out of range"):
        load_identity("x", [str(t1_path())], default_models, face_index=9)
    third = load_identity("x", [str(t1_path())], default_models, face_index=2)
    assert third.source_box[0] > 300
