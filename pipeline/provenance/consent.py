"""Consent bound to faces: an identity's pictures must show the person who consented.

The studio policy may give, per identity, reference embeddings of the consenting
person (``reference_embedding_url``: ``.npy`` files of shape (D,) or (N, D) in
the job's recognizer space).  :func:`load_references` reads and checks them on
the driver before Ray starts; :func:`picture_embeddings` embeds each identity
picture's face with the job's own recognizer (on a render actor, which has the
models loaded); :func:`check_faces` refuses a picture whose best cosine
similarity to the references is below ``min_similarity``.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pipeline.errors import InputRefused, SpecError
from pipeline.limits import EMBEDDING_MAX_BYTES
from pipeline.provenance.policy import Policy, PolicyError
from pipeline.store import storage
from pipeline.store.npycheck import npy_problem

if TYPE_CHECKING:
    from pipeline.models.loader import FaceModels


@dataclass(frozen=True, eq=False)
class FaceReference:
    """Reference embeddings of one cleared identity, L2-normalised rows, and the threshold."""

    embeddings: np.ndarray
    """(N, D) float32, each row of unit length."""
    min_similarity: float
    urls: tuple[str, ...]
    consent_ref: str


def read_embeddings(url: str, where: str) -> np.ndarray:
    """The (N, D) unit-length float32 rows of the ``.npy`` at ``url``; SpecError naming ``where``.

    At most :data:`~pipeline.limits.EMBEDDING_MAX_BYTES` are read.  The header is checked before
    any array is made: a real (not complex, not object) numeric dtype, and a shape whose size is
    exactly the bytes that follow it, so neither a pickle nor a header claiming a huge array is loaded.
    """
    try:
        data = storage.read_bytes(url, max_bytes=EMBEDDING_MAX_BYTES)
    except InputRefused as exc:
        raise SpecError(where, f"{url}: {exc.reason}") from None
    problem = npy_problem(io.BytesIO(data), len(data), kinds="fiu")
    if problem is not None:
        raise SpecError(where, f"{url}: {problem}")
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise SpecError(where, f"{url} is not a .npy array of embeddings: {exc}") from None
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or array.shape[0] < 1 or array.shape[1] < 8:
        raise SpecError(where, f"{url}: expected embeddings of shape (D,) or (N, D), got {array.shape}")
    rows = array.astype(np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    if not np.all(np.isfinite(rows)) or np.any(norms < 1e-6):
        raise SpecError(where, f"{url}: embeddings must be finite and non-zero")
    return rows / norms


def load_references(policy: Policy, names: Sequence[str], where: str) -> dict[str, FaceReference]:
    """Reference embeddings of each identity in ``names`` whose clearance has some (policy file ``where``)."""
    out: dict[str, FaceReference] = {}
    for name in sorted(set(names)):
        clearance = policy.identities.get(name)
        if clearance is None or not clearance.reference_embedding_url:
            continue
        field = f"{where}#identities.{name}.reference_embedding_url"
        rows = [read_embeddings(url, field) for url in clearance.reference_embedding_url]
        if len({r.shape[1] for r in rows}) > 1:
            raise SpecError(field, f"embeddings of different sizes: {sorted({r.shape[1] for r in rows})}")
        out[name] = FaceReference(
            embeddings=np.concatenate(rows),
            min_similarity=clearance.min_similarity,
            urls=clearance.reference_embedding_url,
            consent_ref=clearance.consent_ref,
        )
    return out


def picture_embeddings(
    image_urls: Sequence[str], models: FaceModels, face_index: int | None
) -> list[tuple[str, np.ndarray]]:
    """(URL, unit embedding) of the face each picture contributes to its identity (as ``load_identity`` picks it)."""
    from pipeline.faces.identity import pick_face, read_rgb

    out = []
    for url in image_urls:
        rgb = read_rgb(url)
        face = pick_face(models.detector.detect(rgb), url, face_index)
        embedding = np.asarray(models.recognizer.embed(rgb, [face])[0], np.float32)
        out.append((url, embedding / max(float(np.linalg.norm(embedding)), 1e-12)))
    return out


def check_faces(name: str, reference: FaceReference, pictures: Sequence[tuple[str, np.ndarray]]) -> None:
    """PolicyError naming the identity, the picture and the similarity when a face is not the consenting person."""
    for url, embedding in pictures:
        if embedding.shape[-1] != reference.embeddings.shape[1]:
            raise PolicyError(
                f"identity {name!r}",
                f"the reference embedding ({', '.join(reference.urls)}) has {reference.embeddings.shape[1]} "
                f"dimensions but the job's recognizer gives {embedding.shape[-1]}: make it with this model pack",
            )
        similarity = float(np.max(reference.embeddings @ embedding))
        if similarity < reference.min_similarity:
            raise PolicyError(
                f"identity {name!r}",
                f"the face in picture {url} does not match the person who gave consent "
                f"{reference.consent_ref} (similarity {similarity:.3f} < min_similarity "
                f"{reference.min_similarity:g})",
            )
