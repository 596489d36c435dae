"""The store operations behind a work area's lease: read, create-if-absent, replace, remove.

Create-if-absent is atomic where the store offers it: on a local disk a
complete temporary file is hard-linked to the name (``os.link`` fails when the
name exists, and a reader never sees a half-written lease); on S3 it is one
conditional PUT (``If-None-Match: *``; S3 answers 412 to every writer but the
first).  Elsewhere (other fsspec stores, an S3-compatible endpoint that rejects
the header) it is a check, a write, a pause of ``settle_seconds`` and a
read-back: of writers that raced, each one that wrote before the last sees the
last one's object when it reads back, so only the last keeps the lease.  That
holds as long as a writer's check and its write are less than
``settle_seconds`` apart, which a PUT of a few hundred bytes is.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
import uuid

from pipeline.errors import StorageError
from pipeline.limits import LEASE_MAX_BYTES
from pipeline.store import storage

logger = logging.getLogger(__name__)

SETTLE_SECONDS = 1.0
CONDITIONAL_PROTOCOLS = ("s3", "s3a")
"""Remote stores whose PUT takes ``If-None-Match: *``."""


class LeaseStore:
    """Small-object operations on one store; ``conditional`` None: decided by the URL's store."""

    def __init__(self, url: str, *, conditional: bool | None = None, settle_seconds: float = SETTLE_SECONDS):
        self.local = storage.is_local(url)
        protocol = url.split("://", 1)[0] if "://" in url else "file"
        self.conditional = (
            (self.local or protocol in CONDITIONAL_PROTOCOLS) if conditional is None else conditional
        )
        self.settle_seconds = settle_seconds

    def read(self, url: str) -> bytes | None:
        """The object's bytes, None when there is none (a fresh GET, never a cached listing).

        At most :data:`~pipeline.limits.LEASE_MAX_BYTES` are read: a larger object raises
        InputRefused ("larger than 64 KiB"); :mod:`cluster.lease.acquire` treats it as a corrupt lease."""
        try:
            return storage.read_bytes(url, max_bytes=LEASE_MAX_BYTES)
        except StorageError as exc:
            if exc.reason == "not found":
                return None
            raise

    def create(self, url: str, data: bytes) -> bool:
        """Write ``data`` at ``url`` only if nothing is there; True when this call's object is the one there."""
        if self.local:
            return _create_local(storage.local_path(url), data)
        if self.conditional:
            fs, path = storage.filesystem(url)
            try:
                fs.pipe_file(path, data, mode="create")
                return True
            except FileExistsError:
                return False
            except OSError as exc:
                if exc.errno != errno.ENOSYS:  # an endpoint without conditional writes answers 501
                    raise StorageError(url, f"{type(exc).__name__}: {exc}") from exc
                logger.warning("%s: the store does not take conditional writes; checking by read-back", url)
        return self._create_by_read_back(url, data)

    def _create_by_read_back(self, url: str, data: bytes) -> bool:
        if self.read(url) is not None:
            return False
        storage.write_bytes(url, data)
        time.sleep(self.settle_seconds)  # a writer that raced us has written by now: the last one stays
        return self.read(url) == data

    def replace(self, url: str, data: bytes) -> None:
        """Write ``data`` at ``url`` whatever is there (atomically)."""
        storage.write_bytes(url, data)

    def remove(self, url: str) -> None:
        storage.remove(url)


def _create_local(path: str, data: bytes) -> bool:
    head, tail = os.path.split(path)
    try:
        os.makedirs(head or ".", exist_ok=True)
        tmp = os.path.join(head, f".{tail}.tmp-{uuid.uuid4().hex[:12]}")
        with open(tmp, "wb") as fh:
            fh.write(data)
        try:
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
                raise
            # No hard links on this filesystem: O_EXCL (a reader may see the file before its bytes,
            # reads it as unreadable and refuses: the safe side).
            return _create_exclusive(path, data)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)
    except OSError as exc:
        raise StorageError(path, exc.strerror or str(exc)) from exc


def _create_exclusive(path: str, data: bytes) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return True
