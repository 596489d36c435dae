"""Hand memory freed by Python back to the operating system."""

from __future__ import annotations

import ctypes
import ctypes.util


def release_freed_heap() -> None:
    """Give memory freed by Python back to the OS (glibc ``malloc_trim``; elsewhere nothing).

    Loading a rewritten model frees hundreds of MB of parsed protobuf; glibc
    keeps such holes in the heap, where they count in the process's RSS.
    """
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        trim = None
    if trim is not None:
        trim(0)
