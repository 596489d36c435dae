"""Atomic writes of local files: a hidden temporary file beside the destination, fsynced, then
renamed over it (or hard-linked to it when it must not exist yet), and the folder fsynced.

A reader sees the old file or the complete new one, never a partial one; a killed writer
leaves only ``.<name>.recast-tmp-<12 hex>``, which :func:`temporary_of` recognises and
nothing else does.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import uuid
from collections.abc import Callable

from pipeline.errors import StorageError

ALREADY_EXISTS = "already exists; left untouched (not overwritten)"
"""The reason of the StorageError a create-if-absent publish raises when the destination exists."""


def _fsync(path: str, *, directory: bool = False) -> None:
    """Flush ``path`` (a file, or a folder's entries) to disk: a rename is only as durable as this."""
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: str) -> None:
    # Some filesystems (and platforms) cannot fsync a folder: the file itself is already on disk.
    with contextlib.suppress(OSError):
        _fsync(path, directory=True)


TEMPORARY_MARK = ".recast-tmp-"
"""A local publish writes ``.<name>.recast-tmp-<12 hex>`` beside ``<name>`` first; clean-up removes
only names of exactly that form (:func:`temporary_of`), never a user's ``.x.tmp-keep``."""
TEMPORARY_EXTRA = 1 + len(TEMPORARY_MARK) + 12
"""How much longer than the destination's own name its temporary file's name is."""


def temporary_of(name: str) -> re.Pattern[str]:
    """The temporary files a local publish of ``name`` (a regular expression for sequences) leaves."""
    return re.compile(rf"\.{name}{re.escape(TEMPORARY_MARK)}[0-9a-f]{{12}}")


def _temporary_beside(dest: str) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
    head, tail = os.path.split(dest)
    return os.path.join(head, f".{tail}{TEMPORARY_MARK}{uuid.uuid4().hex[:12]}")


def replace_atomically(dest: str, write: Callable[[str], object]) -> None:
    """``write`` a hidden temporary file beside ``dest``, fsync it, rename it over ``dest``, fsync the folder."""
    tmp = _temporary_beside(dest)
    try:
        write(tmp)
        _fsync(tmp)
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise
    _fsync_dir(os.path.dirname(os.path.abspath(dest)))


def create_atomically(dest: str, write: Callable[[str], object]) -> None:
    """Like :func:`replace_atomically`, but ``dest`` must not exist: it is never overwritten.

    The complete temporary file is hard-linked to ``dest`` (``link`` fails when
    ``dest`` exists, atomically); on a filesystem without hard links an
    exclusively created ``dest`` is renamed over instead (a reader may then see
    it empty for a moment, never partly written).
    """
    tmp = _temporary_beside(dest)
    try:
        write(tmp)
        _fsync(tmp)
        try:
            os.link(tmp, dest)
        except FileExistsError:
            raise StorageError(dest, ALREADY_EXISTS) from None
        except OSError as exc:
            if exc.errno not in _NO_HARD_LINKS:
                raise
            try:
                os.close(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            except FileExistsError:
                raise StorageError(dest, ALREADY_EXISTS) from None
            os.replace(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
    _fsync_dir(os.path.dirname(os.path.abspath(dest)))


_NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV, errno.EMLINK, errno.ENOSYS}
"""``link`` errors meaning "this filesystem has no hard links here" (FAT, some network mounts)."""
