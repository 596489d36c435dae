"""Source identities: who a target face becomes.

An identity is one or more images of one person.  Its embedding is the normalised mean
of the embeddings of its faces (one face per image).  An image without a face is an
error; an image with several faces needs ``face_index`` (faces are numbered left to
right by the left edge of their box, from 0).  The first image's face is the one the
weight-free built-in swapper pastes.

An identity may carry a LoRA adapter for the swapper (:mod:`pipeline.lora`): load it
with an ``AdapterCache`` built from ``FaceModels.lora_slots`` and pass it as
``adapter=`` (or attach it later with :func:`with_adapter`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from pipeline.errors import FaceError
from pipeline.faces.pictures import load_picture
from pipeline.geometry.types import Face, Identity
from pipeline.limits import InputLimits

if TYPE_CHECKING:
    from pipeline.lora.adapter import LoadedAdapter
    from pipeline.models.loader import FaceModels
    from pipeline.models.roles import Swapper

log = logging.getLogger(__name__)


def with_adapter(identity: Identity, adapter: LoadedAdapter | None) -> Identity:
    """A copy of ``identity`` that swaps with ``adapter`` (None: the base model)."""
    if identity.prepared is not None:
        raise ValueError(f"identity {identity.name} is already prepared for a swapper; attach adapters first")
    return dataclasses.replace(identity, adapter=adapter)


def prepared_for(identity: Identity, swapper: Swapper) -> Identity:
    """``identity`` with ``swapper.prepare`` done once and the full source picture dropped.

    A render actor keeps its identities for its whole life: what it needs of a picture is
    the aligned source face (or a latent), not a picture of up to ``limits.max_image_pixels``.
    """
    prepared = swapper.prepare(identity)
    return dataclasses.replace(identity, prepared=prepared, source_rgb=np.zeros((0, 0, 3), np.uint8))


def load_identity(
    name: str,
    image_urls: Sequence[str],
    models: FaceModels,
    *,
    face_index: int | None = None,
    adapter: LoadedAdapter | None = None,
    limits: InputLimits | None = None,
) -> Identity:
    """Read the images at ``image_urls`` (any storage URL) and build the identity ``name``.

    ``adapter``: a verified LoRA adapter for the pack's swapper (``AdapterCache.get``).
    Raises :class:`FaceError` naming the image when it has no face, or several faces and
    no ``face_index``; :class:`StorageError` when an image cannot be read or decoded, or is
    larger than ``limits`` (file size or pixels).
    """
    if not image_urls:
        raise FaceError(name, "an identity needs at least one image")
    images = [(url, read_rgb(url, limits)) for url in image_urls]
    return identity_from_images(name, images, models, face_index=face_index, adapter=adapter)


def identity_from_images(
    name: str,
    images: Sequence[tuple[str, np.ndarray]],
    models: FaceModels,
    *,
    face_index: int | None = None,
    adapter: LoadedAdapter | None = None,
) -> Identity:
    """Like :func:`load_identity` for images already in memory: ``(where, rgb uint8)`` pairs."""
    if not images:
        raise FaceError(name, "an identity needs at least one image")
    embeddings, first = [], None
    for where, rgb in images:
        face = pick_face(models.detector.detect(rgb), where, face_index)
        embeddings.append(models.recognizer.embed(rgb, [face])[0])
        if first is None:
            first = (rgb, face)
    assert first is not None
    mean = np.mean(np.stack(embeddings), axis=0)
    norm = float(np.linalg.norm(mean))
    if norm < 1e-6:
        raise FaceError(name, "the faces of this identity's images cancel out (no common identity)")
    rgb, face = first
    log.info(
        "identity %s from %d image(s)%s",
        name,
        len(images),
        f", adapter {adapter.url}" if adapter is not None else "",
    )
    return Identity(
        name=name,
        embedding=(mean / norm).astype(np.float32),
        source_rgb=rgb,
        source_landmarks=np.asarray(face.landmarks, dtype=np.float32),
        source_box=np.asarray(face.box, dtype=np.float32),
        adapter=adapter,
    )


def in_face_index_order(faces: Sequence[Face]) -> list[Face]:
    """``faces`` as ``face_index`` numbers them: left to right by their boxes' left edges."""
    return sorted(faces, key=lambda f: float(f.box[0]))


def pick_face(faces: Sequence[Face], where: str, face_index: int | None) -> Face:
    """The face of a source image: the only one, or ``face_index`` counted left to right."""
    if not faces:
        raise FaceError(where, "no face found in this source image")
    ordered = in_face_index_order(faces)
    if face_index is None:
        if len(ordered) > 1:
            raise FaceError(where, f"{len(ordered)} faces found; choose one with face_index (0 = leftmost)")
        return ordered[0]
    if not 0 <= face_index < len(ordered):
        raise FaceError(where, f"face_index {face_index} out of range: {len(ordered)} face(s) found")
    return ordered[face_index]


def read_rgb(url: str, limits: InputLimits | None = None) -> np.ndarray:
    """Decode an image file at a storage URL to RGB uint8 (within ``limits``, see :mod:`pipeline.faces.pictures`)."""
    return load_picture(url, limits)
