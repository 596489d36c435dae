"""Every input and output is a URL: local path, ``file://``, ``s3://``, ``gs://``,
``memory://``.  This module is the one place that talks to fsspec.

S3 endpoints and credentials come from the environment (``AWS_ENDPOINT_URL``,
instance roles, ``AWS_PROFILE``...), never from job specs.

Publishing is atomic: a reader of a destination sees either nothing (or the
previous object) or the complete new object, never a partial one.  For object
stores a single PUT / completed multipart upload already has that property;
for local paths we write a hidden temporary file beside the destination, fsync
it, ``os.replace`` it and fsync the folder.  ``overwrite=False`` publishes only
if the destination is absent, atomically (a local hard link; on S3 a
conditional PUT, ``If-None-Match: *``), and never replaces what is there.

Object-store requests are retried by the client itself (botocore's retry mode, s3fs's re-reads) as
the process's :class:`~pipeline.store.retries.StorageConfig` says (:func:`configure`; the spec's
``storage:``), each operation below bounded in time and its retries counted (:func:`store_client`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
import uuid
from collections.abc import Callable, Iterator
from typing import IO

import fsspec
import fsspec.config
from fsspec.core import url_to_fs

from pipeline.errors import InputRefused, StorageError
from pipeline.store import urls
from pipeline.store.atomic import (  # noqa: F401 - part of this module's interface
    ALREADY_EXISTS,
    TEMPORARY_EXTRA,
    TEMPORARY_MARK,
    create_atomically,
    replace_atomically,
    temporary_of,
)
from pipeline.store.retries import StorageConfig, StoreClient

READ_BLOCK_BYTES = 16 * 1024 * 1024
"""Block size of the read cache for remote files: demuxers read mostly sequentially
(measured on loopback S3: 220 MB/s with 16 MiB blocks, 85 MB/s with 4 MiB)."""


def is_local(url: str) -> bool:
    """True for every spelling fsspec maps to the local disk (:func:`pipeline.store.urls.is_local`)."""
    return urls.is_local(url)


def local_path(url: str) -> str:
    """The filesystem path of a local URL (``file://``, ``local://``, ``file:`` stripped as fsspec does)."""
    return urls.local_path(url)


def configure(settings: StorageConfig) -> StoreClient:
    """Make ``settings`` this process's object-store settings and return its :class:`StoreClient`.

    The client is handed to fsspec's own configuration (``fsspec.config.conf["s3"]``: the options every
    ``s3://`` filesystem of the process is made with), so every store call made after this, whoever makes
    it, retries and counts as configured.  The same settings again keep the client (and its count)."""
    current = _configured()
    if current is not None and current.settings == settings:
        return current
    client = StoreClient(settings)
    fsspec.config.conf["s3"] = {**fsspec.config.conf.get("s3", {}), **client.s3_options()}
    return client


def _configured() -> StoreClient | None:
    session = fsspec.config.conf.get("s3", {}).get("session")
    client = getattr(session, "recast_client", None)
    return client if isinstance(client, StoreClient) else None


def store_client() -> StoreClient:
    """This process's :class:`StoreClient` (made with the default settings on first use)."""
    return _configured() or configure(StorageConfig())


def filesystem(url: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """The fsspec filesystem for ``url`` and the path inside it; chained URLs and stores other
    than :data:`pipeline.store.urls.REMOTE_SCHEMES` are refused (StorageError naming ``url``)."""
    reason = urls.problem(url)
    if reason is not None:
        raise InputRefused(url, reason)
    found = urls.scheme(url)
    if found is not None and found not in urls.LOCAL_SCHEMES:
        url = urls.REMOTE_SCHEMES[found] + url[len(found) :]
    client = store_client()
    try:
        fs, path = url_to_fs(url)
    except (ImportError, ValueError) as exc:
        raise StorageError(url, f"unsupported URL ({exc})") from exc
    if getattr(fs, "session", None) is client.session:
        fs.retries = client.settings.body_tries  # s3fs's re-reads: an attribute, not a constructor option
    return fs, path


def join(base: str, *parts: str) -> str:
    """Join URL path parts with ``/`` (works for local paths too)."""
    out = base.rstrip("/")
    for part in parts:
        out = f"{out}/{part.strip('/')}"
    return out


NO_SPACE = "no space left on device"
"""The reason of the StorageError a write into a full filesystem (or over a disk quota) raises."""


def no_space(exc: BaseException) -> bool:
    """Whether ``exc`` is the StorageError of a write that found its filesystem full."""
    return isinstance(exc, StorageError) and exc.reason.startswith(NO_SPACE)


def _translate(url: str, exc: BaseException) -> StorageError:
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, FileNotFoundError):
        return StorageError(url, "not found")
    if isinstance(exc, NotADirectoryError):
        return StorageError(url, "not found (a part of the path is a file, not a folder)")
    if isinstance(exc, PermissionError):
        return StorageError(url, "permission denied")
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return StorageError(url, NO_SPACE)
    if isinstance(exc, OSError) and exc.errno == errno.EDQUOT:
        return StorageError(url, f"{NO_SPACE} (disk quota exceeded)")
    return StorageError(url, f"{type(exc).__name__}: {exc}")


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(path: str) -> str | None:
    """What the local ``path`` is when it is not a regular file (None: a regular file).

    Uses ``os.stat`` only: a FIFO or a device is never opened, so asking cannot block.
    Raises FileNotFoundError / PermissionError like ``os.stat``.
    """
    mode = os.stat(path).st_mode
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def check_regular(url: str) -> None:
    """StorageError naming ``url`` unless it is a regular file (local URLs; object stores hold
    only objects, so remote URLs pass).  Call it before anything opens the file."""
    if not is_local(url):
        return
    try:
        kind = file_kind(local_path(url))
    except Exception as exc:
        raise _translate(url, exc) from exc
    if kind is not None:
        raise InputRefused(url, f"is {kind}, expected a regular file")


def describe_bytes(n: int) -> str:
    """``1048576`` -> ``1 MiB``; ``1536`` -> ``1.5 KiB``."""
    value = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:g} {unit}" if unit != "bytes" else f"{n} bytes"
        value /= 1024
    raise AssertionError("unreachable")


@contextlib.contextmanager
def open_read(url: str) -> Iterator[IO[bytes]]:
    """Open ``url`` for reading; remote files go through a block read cache.

    A local path that is not a regular file (a folder, FIFO, device, socket) is refused
    before it is opened."""
    try:
        if is_local(url):
            path = local_path(url)
            check_regular(url)
            fh: IO[bytes] = open(path, "rb")  # noqa: SIM115 - closed in the finally below
        else:
            fs, path = filesystem(url)
            with store_client().operation(url):
                fh = fs.open(path, "rb", cache_type="blockcache", block_size=READ_BLOCK_BYTES)
    except Exception as exc:
        raise _translate(url, exc) from exc
    try:
        with contextlib.nullcontext() if is_local(url) else store_client().operation(url):
            yield fh
    finally:
        fh.close()


def _on[T](url: str, local: Callable[[str], T], remote: Callable[[fsspec.AbstractFileSystem, str], T]) -> T:
    """``local(path)`` for a local ``url``, else ``remote(fs, path)``; any error is a StorageError naming it."""
    try:
        if is_local(url):
            return local(local_path(url))
        fs, path = filesystem(url)
        client = store_client()
        with client.operation(url):
            try:
                return remote(fs, path)
            except Exception as exc:
                raise _with_last_error(_translate(url, exc), client.last_error()) from exc
    except Exception as exc:
        raise _translate(url, exc) from exc


def _with_last_error(error: StorageError, last: str | None) -> StorageError:
    """``error`` naming the last failed attempt too, when the store client's own retries ran out first (the
    client then raises only a bare status, e.g. ``OSError: [Errno 16] Service Unavailable``)."""
    known = (NO_SPACE, ALREADY_EXISTS, "not found", "permission denied")
    if (
        last is None
        or type(error) is not StorageError
        or last in error.reason
        or error.reason.startswith(known)
    ):
        return error
    return StorageError(error.url, f"{error.reason} (retries exhausted; last error: {last})")


def read_bytes(url: str, *, max_bytes: int | None = None) -> bytes:
    """The whole content of ``url``; with ``max_bytes``, at most that much.

    A larger file is a StorageError ("larger than 1 MiB"), found after reading at
    most ``max_bytes + 1`` bytes (a ranged read on object stores), whatever the file
    claims its size is.  Local paths must be regular files (checked before opening:
    a FIFO or ``/dev/zero`` is refused, never read).  Every read of a file a job spec
    names passes a limit.
    """

    def local(path: str) -> bytes:
        check_regular(path)
        with open(path, "rb") as fh:
            return fh.read() if max_bytes is None else fh.read(max_bytes + 1)

    def remote(fs: fsspec.AbstractFileSystem, path: str) -> bytes:
        if max_bytes is None:
            return bytes(fs.cat_file(path))
        return bytes(fs.cat_file(path, start=0, end=max_bytes + 1))

    data = _on(url, local, remote)
    if max_bytes is not None and len(data) > max_bytes:
        raise InputRefused(url, f"larger than {describe_bytes(max_bytes)}")
    return data


def exists(url: str) -> bool:
    return _on(url, os.path.exists, lambda fs, p: bool(fs.exists(p)))


def size(url: str) -> int:
    return _on(url, os.path.getsize, lambda fs, p: int(fs.size(p)))


def remove(url: str, *, recursive: bool = False, missing_ok: bool = True) -> None:
    """Delete ``url`` (a file, or a folder with ``recursive``)."""

    def local(path: str) -> None:
        if os.path.isdir(path) and recursive:
            shutil.rmtree(path)
        else:
            os.remove(path)

    try:
        _on(url, local, lambda fs, p: fs.rm(p, recursive=recursive))
    except StorageError as exc:
        if exc.reason != "not found" or not missing_ok:
            raise


def listdir(url: str) -> list[str]:
    """URLs of the entries directly under ``url`` (empty if it does not exist)."""

    def local(path: str) -> list[str]:
        return sorted(join(url, name) for name in os.listdir(path)) if os.path.isdir(path) else []

    def remote(fs: fsspec.AbstractFileSystem, path: str) -> list[str]:
        if not fs.exists(path):
            return []
        return sorted(
            f"{urls.REMOTE_SCHEMES[urls.scheme(url) or '']}://{p}" for p in fs.ls(path, detail=False)
        )

    return _on(url, local, remote)


def listdir_stamps(url: str) -> dict[str, str]:
    """The plain files directly under ``url`` (empty if it does not exist), by name: a stamp that
    changes whenever the file is rewritten (size and modification time in nanoseconds on a local
    disk; size and ETag, else size and modification time, on object stores).  One listing call."""

    def local(path: str) -> dict[str, str]:
        if not os.path.isdir(path):
            return {}
        out = {}
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    out[entry.name] = f"{st.st_size}:{st.st_mtime_ns}"
        return out

    def remote(fs: fsspec.AbstractFileSystem, path: str) -> dict[str, str]:
        try:
            listing = fs.ls(path, detail=True, refresh=True)
        except FileNotFoundError:
            return {}
        out = {}
        for info in listing:
            if info.get("type") != "file":
                continue
            mark = next(
                (
                    info[k]
                    for k in ("ETag", "etag", "md5Hash", "LastModified", "mtime", "updated")
                    if info.get(k)
                ),
                None,
            )
            if mark is not None:
                out[str(info["name"]).rstrip("/").rsplit("/", 1)[-1]] = f"{info.get('size')}:{mark}"
        return out

    return _on(url, local, remote)


def _write_local(dest: str, write: Callable[[str], object], overwrite: bool) -> None:
    (replace_atomically if overwrite else create_atomically)(dest, write)


def _create_remote(fs: fsspec.AbstractFileSystem, path: str, url: str, put: Callable[[], object]) -> None:
    """``put()`` with ``mode="create"``: S3 sends ``If-None-Match: *`` (refused when the key exists).

    The existence check before it only spares an upload; the conditional PUT is the guarantee
    (and the check is all a store without conditional writes has).
    """
    if fs.exists(path):
        raise StorageError(url, ALREADY_EXISTS)
    try:
        put()
    except FileExistsError:
        raise StorageError(url, ALREADY_EXISTS) from None


def publish_file(src_path: str | os.PathLike[str], url: str, *, overwrite: bool = True) -> None:
    """Copy the local file ``src_path`` to ``url`` atomically.

    Object stores: a single PUT or a completed multipart upload is atomic.
    ``overwrite=False``: create only; StorageError (:data:`ALREADY_EXISTS`) when
    ``url`` exists, which is then left untouched (a local hard link, an S3
    conditional PUT ``If-None-Match: *``).
    """
    if not os.path.isfile(src_path):
        raise StorageError(os.fspath(src_path), "not found (nothing to publish)")
    src = os.fspath(src_path)

    def remote(fs: fsspec.AbstractFileSystem, p: str) -> None:
        if overwrite:
            fs.put_file(src, p)
        else:
            _create_remote(fs, p, url, lambda: fs.put_file(src, p, mode="create"))

    _on(url, lambda dest: _write_local(dest, lambda tmp: shutil.copyfile(src, tmp), overwrite), remote)


def write_bytes(url: str, data: bytes, *, overwrite: bool = True) -> None:
    """Write ``data`` to ``url`` atomically (``overwrite=False``: as :func:`publish_file`)."""

    def write(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            fh.write(data)

    def remote(fs: fsspec.AbstractFileSystem, p: str) -> None:
        if overwrite:
            fs.pipe_file(p, data)
        else:
            _create_remote(fs, p, url, lambda: fs.pipe_file(p, data, mode="create"))

    _on(url, lambda dest: _write_local(dest, write, overwrite), remote)


@contextlib.contextmanager
def fetched(url: str, suffix: str = "") -> Iterator[str]:
    """A local path holding the content of ``url`` (the path itself if local)."""
    if is_local(url):
        path = local_path(url)
        if not os.path.exists(path):
            raise StorageError(url, "not found")
        check_regular(url)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="recast-fetch-") as tmp:
        dest = os.path.join(tmp, "data" + suffix)
        try:
            fs, path = filesystem(url)
            with store_client().operation(url):
                fs.get_file(path, dest)
        except Exception as exc:
            raise _translate(url, exc) from exc
        yield dest


def check_writable(url: str) -> None:
    """Raise StorageError unless a small object can be written and removed under ``url``.

    Leaves nothing behind: local folders this check had to create are removed
    again (only those, and only while empty), so a job refused later leaves no
    empty folders.
    """
    probe = join(url, f".recast-write-check-{uuid.uuid4().hex[:12]}")
    created = _missing_folders(local_path(url)) if is_local(url) else []
    try:
        write_bytes(probe, b"ok")
        remove(probe)
    finally:
        for folder in reversed(created):
            with contextlib.suppress(OSError):
                os.rmdir(folder)


def _missing_folders(path: str) -> list[str]:
    """The folders of ``path`` (itself included) that do not exist yet, outermost first."""
    missing = []
    folder = os.path.abspath(path)
    while not os.path.lexists(folder) and os.path.dirname(folder) != folder:
        missing.append(folder)
        folder = os.path.dirname(folder)
    return missing[::-1]
