"""Which faces of a frame are replaced, and by which source identity."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from pipeline.errors import SpecError
from pipeline.faces.config import SelectionConfig
from pipeline.geometry.types import Face, Identity


def check_selection(selection: SelectionConfig, identities: Mapping[str, Identity]) -> None:
    """SpecError when the selection lacks a source or names an identity that was not loaded."""
    if selection.mode in ("all", "largest") and not selection.source:
        raise SpecError("selection.source", f"mode {selection.mode!r} needs a source identity")
    missing = sorted(selection.identity_names() - set(identities))
    if missing:
        field = "selection.references" if selection.mode == "reference" else "selection.source"
        raise SpecError(field, f"unknown identities {missing} (loaded: {sorted(identities)})")


def select_faces(
    faces: Sequence[Face], selection: SelectionConfig, identities: Mapping[str, Identity]
) -> list[tuple[Face, str]]:
    """The faces of one frame to replace, each with the name of its source identity.

    ``reference`` mode needs embeddings on the faces (``FaceAnalyzer.analyze``).  Each
    reference goes to at most one face per frame: the assignment maximising total
    similarity among pairs at or above ``selection.threshold``.
    """
    if not faces:
        return []
    if selection.mode in ("all", "largest") and not selection.source:
        raise SpecError("selection.source", f"mode {selection.mode!r} needs a source identity")
    if selection.mode == "all":
        assert selection.source is not None
        return [(f, selection.source) for f in faces]
    if selection.mode == "largest":
        assert selection.source is not None
        return [(max(faces, key=lambda f: f.area), selection.source)]

    names = list(selection.references)
    refs = np.stack([_identity(identities, n).embedding for n in names]).astype(np.float32)
    if any(f.embedding is None for f in faces):
        raise ValueError(
            "reference selection needs face embeddings (run FaceAnalyzer.analyze with embed=True)"
        )
    embs = np.stack([np.asarray(f.embedding, dtype=np.float32) for f in faces])
    if embs.shape[1] != refs.shape[1]:
        raise SpecError(
            "selection.references",
            f"face embeddings are {embs.shape[1]}-d but references are {refs.shape[1]}-d "
            "(identities built with another recognizer?)",
        )
    sims = embs @ refs.T
    # pairs below the threshold must never be chosen: make them worse than any real pair
    cost = np.where(sims >= selection.threshold, -sims, 10.0)
    rows, cols = linear_sum_assignment(cost)
    chosen = sorted((int(r), int(c)) for r, c in zip(rows, cols) if sims[r, c] >= selection.threshold)
    return [(faces[r], selection.references[names[c]]) for r, c in chosen]


def _identity(identities: Mapping[str, Identity], name: str) -> Identity:
    try:
        return identities[name]
    except KeyError:
        raise SpecError("selection.references", f"unknown reference identity {name!r}") from None
