"""Streaming sha256 of files and of objects in any store."""

from __future__ import annotations

import hashlib
from typing import IO

BLOCK_BYTES = 1 << 20


def sha256_stream(fh: IO[bytes]) -> tuple[str, int]:
    """Hex sha256 and byte count of everything left in ``fh``, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    nbytes = 0
    while block := fh.read(BLOCK_BYTES):
        digest.update(block)
        nbytes += len(block)
    return digest.hexdigest(), nbytes


def sha256_file(path: str) -> str:
    """Hex sha256 of a local file."""
    with open(path, "rb") as fh:
        return sha256_stream(fh)[0]


def sha256_url(url: str) -> str:
    """Hex sha256 of the content at ``url`` (local path or any fsspec store), streamed."""
    from pipeline import storage

    with storage.open_read(url) as fh:
        return sha256_stream(fh)[0]
