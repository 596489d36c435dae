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
    from pipeline.store import storage

    with storage.open_read(url) as fh:
        return sha256_stream(fh)[0]


def fetch_verified(url: str, dest: str, sha256: str) -> str:
    """Copy ``url`` to the local file ``dest``, hashing it on the way; returns ``dest``.

    Raises ChecksumError (naming ``url``) when its sha256 is not ``sha256``: what is used
    afterwards is the private copy that was hashed, never the original again.
    """
    from pipeline.errors import ChecksumError, StorageError
    from pipeline.store import storage

    digest = hashlib.sha256()
    with storage.open_read(url) as src:
        try:
            with open(dest, "wb") as out:
                while block := src.read(BLOCK_BYTES):
                    digest.update(block)
                    out.write(block)
        except OSError as exc:
            raise StorageError(url, f"cannot copy to {dest}: {exc.strerror or exc}") from exc
    if digest.hexdigest() != sha256:
        raise ChecksumError(url, f"sha256 {digest.hexdigest()[:16]}... is not the recorded {sha256[:16]}...")
    return dest
