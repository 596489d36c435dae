"""A chunk's faces as one npz (the manifest's analysis records): exact dtypes kept, so a re-plan is identical."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence

import numpy as np

from pipeline.geometry.types import Face
from pipeline.store.npycheck import npy_problem


def faces_to_npz(faces: Sequence[Sequence[Face]]) -> bytes:
    """Faces of consecutive frames, packed into one npz (exact dtypes kept: a re-plan is identical)."""
    flat = [f for frame in faces for f in frame]
    counts = np.array([len(frame) for frame in faces], dtype=np.int32)
    arrays: dict[str, np.ndarray] = {"counts": counts}
    if flat:
        arrays["boxes"] = np.stack([np.asarray(f.box) for f in flat])
        arrays["landmarks"] = np.stack([np.asarray(f.landmarks) for f in flat])
        arrays["scores"] = np.array([f.score for f in flat], dtype=np.float64)
        has = np.array([f.embedding is not None for f in flat], dtype=bool)
        arrays["has_embedding"] = has
        if has.any():
            dim = next(np.asarray(f.embedding).shape for f in flat if f.embedding is not None)
            dtype = next(np.asarray(f.embedding).dtype for f in flat if f.embedding is not None)
            emb = np.zeros((len(flat), *dim), dtype=dtype)
            for i, f in enumerate(flat):
                if f.embedding is not None:
                    emb[i] = f.embedding
            arrays["embeddings"] = emb
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as the allow_pickle flag
    return buf.getvalue()


def faces_from_npz(data: bytes) -> list[list[Face]]:
    """The inverse of :func:`faces_to_npz`.

    ValueError, before any array is made, when a member is compressed or its ``.npy`` header
    declares other than the bytes it holds (a forged record must not make numpy allocate more)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            if info.compress_type != zipfile.ZIP_STORED:
                raise ValueError(f"member {info.filename} is compressed; numpy.savez stores")
            with archive.open(info) as member:
                problem = npy_problem(member, info.file_size)
            if problem is not None:
                raise ValueError(f"member {info.filename}: {problem}")
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        counts = z["counts"]
        out: list[list[Face]] = []
        if not counts.sum():
            return [[] for _ in counts]
        # Each face's arrays are rows of the chunk's arrays (read once, in their own memory).
        has = z["has_embedding"].tolist()
        emb = list(z["embeddings"]) if "embeddings" in z.files else [None] * len(has)
        faces = Face.rows(
            z["boxes"],
            z["landmarks"],
            z["scores"].tolist(),
            [e if h else None for e, h in zip(emb, has, strict=True)],
        )
        i = 0
        for n in counts.tolist():
            out.append(faces[i : i + n])
            i += n
        return out
