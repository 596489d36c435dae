"""Check a ``.npy`` header against the bytes that follow it, before numpy allocates the array.

``np.load`` allocates the array its header declares before reading the data, so a file of a
few bytes claiming shape (10**9, 512) would allocate terabytes.  :func:`npy_problem` reads the
header only (formats 1.0 and 2.0, which ``numpy.save`` writes) and says what is wrong.
"""

from __future__ import annotations

import math
from typing import IO

import numpy as np

_READERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def npy_problem(stream: IO[bytes], size: int, *, kinds: str = "biufc") -> str | None:
    """Why the ``.npy`` of ``size`` bytes at ``stream``'s position must not be loaded (None: it may).

    Refused: not a ``.npy`` of format 1.0 or 2.0, a dtype kind outside ``kinds`` (object arrays
    and pickles always), a declared array larger or smaller than the bytes after the header.
    ``stream`` is left just after the header."""
    start = stream.tell()
    head = stream.read(8)
    stream.seek(start)
    reader = _READERS.get((head[6], head[7])) if head[:6] == b"\x93NUMPY" and len(head) == 8 else None
    if reader is None:
        return "not a .npy file (numpy.save, format 1.0 or 2.0)"
    try:
        np.lib.format.read_magic(stream)
        shape, _, dtype = reader(stream)
    except (ValueError, OSError, EOFError, SyntaxError, TypeError) as exc:
        return f"not a .npy file (numpy.save): {exc}"
    if dtype.hasobject or dtype.kind not in kinds:
        return f"holds {dtype}, not real numbers"
    declared, left = math.prod(shape) * dtype.itemsize, size - (stream.tell() - start)
    if declared != left:
        return f"its header says {shape} {dtype} ({declared:,} bytes) but {left:,} bytes follow"
    return None
