"""The store operations behind a work area's lease: read, create-if-absent, replace, compare-and-swap, remove.

Every write returns the *version* it left (S3's ETag where the store gives one, else the sha256 of
the bytes), and :meth:`LeaseStore.swap` / :meth:`LeaseStore.remove_if` act only while the object is
still the version the caller last wrote or read: that is how a driver's heartbeat and release never
touch a lease another driver has taken over meanwhile.

Create-if-absent is atomic where the store offers it: on a local disk a
complete temporary file is hard-linked to the name (``os.link`` fails when the
name exists, and a reader never sees a half-written lease); on S3 it is one
conditional PUT (``If-None-Match: *``; S3 answers 412 to every writer but the
first).  Elsewhere (other fsspec stores, an S3-compatible endpoint that rejects
the header) it is a check, a write, a pause of ``settle_seconds`` and a
read-back: of writers that raced, each one that wrote before the last sees the
last one's object when it reads back, so only the last keeps the lease.  That
holds as long as a writer's check and its write are less than
``settle_seconds`` apart, which a PUT of a few hundred bytes is; a writer whose
check and write took longer (a retried PUT on a flaky store) may have
overwritten a writer that already kept its object, so it removes its own again
and takes nothing: the driver looks again, and the other writer's next
heartbeat finds its lease gone and stops (never two holders).

Compare-and-swap: on S3 a conditional PUT (``If-Match: <ETag>``; 412 when the
object changed) and a conditional DELETE; the ETag comes from the response of
the PUT that wrote the object, or from the same GET that read its bytes.  On a
local disk the read-compare-rename runs under an exclusive ``flock`` on the
work area's folder, which every replace and conditional removal of the lease
takes too (advisory, so only between Recast's drivers, and only where the
filesystem honours ``flock``: a local disk, not every network filesystem).
Elsewhere, and on an endpoint that answers 501 to ``If-Match``, it is a read, a
compare and a write: a writer that lands between them is overwritten (the gap
the conditional operations close).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import fsspec
from fsspec.asyn import sync

from pipeline.errors import InputRefused, StorageError
from pipeline.limits import LEASE_MAX_BYTES
from pipeline.store import storage
from pipeline.store.storage import describe_bytes

logger = logging.getLogger(__name__)

SETTLE_SECONDS = 1.0
CONDITIONAL_PROTOCOLS = ("s3", "s3a")
"""Remote stores whose PUT takes ``If-None-Match: *`` and ``If-Match: <ETag>``."""
CONDITION_FAILED = ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey", "InvalidRange")
"""S3 error codes meaning "the object is not the version named" (412, 409, 404; 416: an empty object)."""


@dataclass(frozen=True)
class Stored:
    """An object's bytes and the version they are (S3: its ETag; elsewhere their sha256)."""

    data: bytes
    version: str


def digest(data: bytes) -> str:
    """The version of ``data`` on a store without ETags."""
    return hashlib.sha256(data).hexdigest()


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

    def read_versioned(self, url: str) -> Stored | None:
        """:meth:`read`, with the version of the bytes read (on S3 the ETag of the same GET)."""
        if self.local or not self.conditional:
            data = self.read(url)
            return None if data is None else Stored(data, digest(data))
        fs, path = storage.filesystem(url)
        try:
            data, etag = _get_with_etag(fs, path)
        except FileNotFoundError:
            return None
        except Exception as exc:
            if _s3_code(exc) != "InvalidRange":  # an empty object: no byte range to read
                raise StorageError(url, f"{type(exc).__name__}: {exc}") from exc
            data, etag = b"", ""
        if len(data) > LEASE_MAX_BYTES:
            raise InputRefused(url, f"larger than {describe_bytes(LEASE_MAX_BYTES)}")
        return Stored(data, etag)

    def create(self, url: str, data: bytes) -> str | None:
        """Write ``data`` at ``url`` only if nothing is there: the version written when this call's
        object is the one there, None when another was."""
        if self.local:
            return digest(data) if _create_local(storage.local_path(url), data) else None
        if self.conditional:
            fs, path = storage.filesystem(url)
            try:
                return str(fs.pipe_file(path, data, mode="create")["ETag"])
            except FileExistsError:
                return None
            except OSError as exc:
                if exc.errno != errno.ENOSYS:  # an endpoint without conditional writes answers 501
                    raise StorageError(url, f"{type(exc).__name__}: {exc}") from exc
                logger.warning("%s: the store does not take conditional writes; checking by read-back", url)
                self.conditional = False  # and versions are sha256 digests from here on
        return self._create_by_read_back(url, data)

    def _create_by_read_back(self, url: str, data: bytes) -> str | None:
        checked = time.monotonic()
        if self.read(url) is not None:
            return None
        storage.write_bytes(url, data)
        late = time.monotonic() - checked
        time.sleep(self.settle_seconds)  # a writer that raced us has written by now: the last one stays
        stored = self.read_versioned(url)
        if stored is None or stored.data != data:
            return None
        if late > self.settle_seconds:
            # Our write may have landed on a writer that already read its own back and kept it:
            # take ours away again (that writer's next heartbeat finds its lease gone) and say none.
            logger.warning(
                "%s: the check and the write took %.2f s, more than the %.2f s a racing writer waits; "
                "not taking it",
                url, late, self.settle_seconds,
            )  # fmt: skip
            self.remove_if(url, stored.version)
            return None
        return stored.version

    def replace(self, url: str, data: bytes) -> str:
        """Write ``data`` at ``url`` whatever is there (atomically); the version written."""
        if self.local:
            with _folder_locked(url):
                storage.write_bytes(url, data)
            return digest(data)
        if self.conditional:
            return self._put(url, data)
        storage.write_bytes(url, data)
        return digest(data)

    def swap(self, url: str, data: bytes, expected: str) -> str | None:
        """Write ``data`` at ``url`` only if the object there is still version ``expected``: the
        version written, or None when it is another (or none)."""
        if self.local:
            with _folder_locked(url):
                return self._swap_by_reading(url, data, expected)
        if self.conditional:
            try:
                return self._put(url, data, IfMatch=expected)
            except _ConditionFailed:
                return None
            except _NotSupported:
                logger.warning("%s: the store does not take If-Match; compare and swap by reading", url)
                self.conditional = False
        return self._swap_by_reading(url, data, expected)

    def _swap_by_reading(self, url: str, data: bytes, expected: str) -> str | None:
        current = self.read(url)
        if current is None or not _is_version(current, expected):
            return None
        storage.write_bytes(url, data)
        return digest(data)

    def remove_if(self, url: str, expected: str) -> bool:
        """Remove ``url`` only if it is still version ``expected``; False when it is another (or none)."""
        if self.local:
            with _folder_locked(url):
                current = self.read(url)
                if current is None or digest(current) != expected:
                    return False
                storage.remove(url)
                return True
        if self.conditional:
            fs, path = storage.filesystem(url)
            bucket, key, _ = fs.split_path(path)
            try:
                _s3_call(url, fs, "delete_object", Bucket=bucket, Key=key, IfMatch=expected)
                return True
            except _ConditionFailed:
                return False
            except _NotSupported:
                logger.warning("%s: the store does not take a conditional DELETE; comparing first", url)
        current = self.read(url)
        if current is None or not _is_version(current, expected):
            return False
        storage.remove(url)
        return True

    def remove(self, url: str) -> None:
        storage.remove(url)

    def _put(self, url: str, data: bytes, **condition: str) -> str:
        fs, path = storage.filesystem(url)
        bucket, key, _ = fs.split_path(path)
        written = _s3_call(url, fs, "put_object", Bucket=bucket, Key=key, Body=data, **condition)
        fs.invalidate_cache(path)
        return str(written["ETag"])


def _is_version(data: bytes, version: str) -> bool:
    """Whether ``data`` is ``version``: its sha256, or (an ETag from before the store turned out to
    refuse conditional requests) the MD5 that S3 and most compatible stores give a plain PUT."""
    return version in (digest(data), f'"{hashlib.md5(data, usedforsecurity=False).hexdigest()}"')


class _ConditionFailed(Exception):
    """The S3 object is not the version named (412, 409, or not there)."""


class _NotSupported(Exception):
    """The endpoint answered 501 to the conditional request."""


def _s3_code(exc: BaseException) -> str | None:
    """The S3 error code behind an error s3fs raised (it keeps botocore's ClientError as the cause)."""
    response = getattr(exc.__cause__, "response", None) or getattr(exc, "response", None) or {}
    code = response.get("Error", {}).get("Code")
    return str(code) if code else None


def _s3_call(url: str, fs: fsspec.AbstractFileSystem, method: str, **kwargs: Any) -> dict[str, Any]:
    """One S3 request through s3fs (its retries and its error translation)."""
    try:
        return dict(fs.call_s3(method, **kwargs))
    except FileNotFoundError as exc:
        raise _ConditionFailed from exc
    except Exception as exc:
        if _s3_code(exc) in CONDITION_FAILED:
            raise _ConditionFailed from exc
        if isinstance(exc, OSError) and exc.errno == errno.ENOSYS:
            raise _NotSupported from exc
        raise StorageError(url, f"{type(exc).__name__}: {exc}") from exc


def _get_with_etag(fs: Any, path: str) -> tuple[bytes, str]:
    """The first ``LEASE_MAX_BYTES + 1`` bytes of an S3 object and the ETag of the same GET."""
    bucket, key, _ = fs.split_path(path)

    async def get() -> tuple[bytes, str]:
        # s3fs's coroutine, for a response whose body and ETag are read together (its sync
        # wrappers give one or the other, from two requests that another writer may come between).
        got = await fs._call_s3("get_object", Bucket=bucket, Key=key, Range=f"bytes=0-{LEASE_MAX_BYTES}")
        try:
            body = await got["Body"].read()
        finally:
            got["Body"].close()
        return bytes(body), str(got["ETag"])

    return sync(fs.loop, get)


@contextlib.contextmanager
def _folder_locked(url: str) -> Iterator[None]:
    """An exclusive ``flock`` on the folder of the local ``url`` (created if missing)."""
    folder = os.path.dirname(os.path.abspath(storage.local_path(url)))
    try:
        os.makedirs(folder, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise StorageError(folder, exc.strerror or str(exc)) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


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
