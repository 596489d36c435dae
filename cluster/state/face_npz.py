"""A chunk's faces as one npz (the manifest's analysis records): exact dtypes kept, so a re-plan is identical."""

from __future__ import annotations

import io
import math
import re
import struct
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
    arrays = _npz_arrays(data)
    if arrays is None:  # not as numpy.savez writes (the general reader checks and refuses or reads it)
        arrays = _npz_arrays_checked(data)
    counts = arrays["counts"]
    out: list[list[Face]] = []
    if not counts.sum():
        return [[] for _ in counts]
    # Each face's arrays are rows of the chunk's arrays (read once, in their own memory).
    has = arrays["has_embedding"].tolist()
    emb = list(arrays["embeddings"]) if "embeddings" in arrays else [None] * len(has)
    faces = Face.rows(
        arrays["boxes"],
        arrays["landmarks"],
        arrays["scores"].tolist(),
        [e if h else None for e, h in zip(emb, has, strict=True)],
    )
    i = 0
    for n in counts.tolist():
        out.append(faces[i : i + n])
        i += n
    return out


def _npz_arrays_checked(data: bytes) -> dict[str, np.ndarray]:
    """Every member of the npz, each ``.npy`` header checked before numpy reads it (zipfile and np.load)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            if info.compress_type != zipfile.ZIP_STORED:
                raise ValueError(f"member {info.filename} is compressed; numpy.savez stores")
            with archive.open(info) as member:
                problem = npy_problem(member, info.file_size)
            if problem is not None:
                raise ValueError(f"member {info.filename}: {problem}")
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {name: z[name] for name in z.files}


_HEADER = re.compile(
    rb"\{'descr': '([<>|][biufc][0-9]{1,2})', 'fortran_order': False, 'shape': \(((?:[0-9]+, ?)*[0-9]*)\), \} *\n"
)
"""The ``.npy`` header ``numpy.save`` writes for a C-order array of real numbers, exactly."""


def _npz_arrays(data: bytes) -> dict[str, np.ndarray] | None:
    """Every member of an npz as ``numpy.savez`` writes it (stored, C-order ``.npy`` of real numbers),
    read straight out of ``data`` (one header parse, one copy per member); None when any member is
    not exactly that.  ValueError when the zip itself is broken or a header declares other than
    the bytes its member holds (nothing is allocated for it)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        infos = archive.infolist()
    out: dict[str, np.ndarray] = {}
    for info in infos:
        if info.compress_type != zipfile.ZIP_STORED:
            raise ValueError(f"member {info.filename} is compressed; numpy.savez stores")
        at = info.header_offset
        if data[at : at + 4] != b"PK\x03\x04" or not info.filename.endswith(".npy"):
            return None
        name_len, extra_len = struct.unpack_from("<HH", data, at + 26)
        start = at + 30 + name_len + extra_len
        member = memoryview(data)[start : start + info.file_size]
        if len(member) != info.file_size or bytes(member[:8]) != b"\x93NUMPY\x01\x00":
            return None
        (header_len,) = struct.unpack_from("<H", member, 8)
        found = _HEADER.fullmatch(member[10 : 10 + header_len])
        if found is None:
            return None
        dtype = np.dtype(found.group(1).decode())
        shape = tuple(int(v) for v in found.group(2).decode().replace(" ", "").split(",") if v)
        body = member[10 + header_len :]
        if (declared := math.prod(shape) * dtype.itemsize) != len(body):
            raise ValueError(
                f"member {info.filename}: its header says {shape} {dtype} ({declared:,} bytes) "
                f"but {len(body):,} bytes follow"
            )
        out[info.filename[: -len(".npy")]] = np.frombuffer(body, dtype=dtype).reshape(shape).copy()
    return out
