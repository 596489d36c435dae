"""Names the job will write, checked against what the file system or store can hold, before Ray.

A shot name of 200 characters is a plain name, but ``<name>_matte.mov`` beside it,
or the ``.<name>.recast-tmp-<hex>`` a local publish writes first, may be longer
than the file system allows (255 bytes a name on most), and an S3 or GCS key is
at most 1,024 bytes.  A destination that is an existing folder cannot be
replaced by a file.  Both used to fail after hours of rendering; here they are a
SpecError naming the field, before anything is written.
"""

from __future__ import annotations

import os

from pipeline.errors import SpecError
from pipeline.plates.sequence import is_sequence_url, parse_sequence_url
from pipeline.store import storage, urls

OBJECT_KEY_MAX_BYTES = 1024
"""The longest key S3 and GCS accept, in UTF-8 bytes."""
DEFAULT_NAME_MAX, DEFAULT_PATH_MAX = 255, 4096
FRAME_DIGITS = 9
"""A sequence's frame names are checked with frame numbers this long (or the padding, if longer)."""
WORK_AREA_ROOM = 300
"""Bytes the work area's own files add under its folder (``segments/<shot>/<key>.<ext>``, shot names
being at most 200 characters)."""


def check_names(written: list[tuple[str, str]], work_url: str) -> None:
    """SpecError naming the field when a place in ``written`` ((url, field) pairs, the work area
    last) cannot be written: a name or path too long, or a file destination that is a folder."""
    for url, field in written:
        is_work = url == work_url
        name = _file_name(url)
        if storage.is_local(url):
            _check_local(storage.local_path(url), name, field, is_work)
        else:
            _check_key(url, field, room=WORK_AREA_ROOM if is_work else 0)


def _file_name(url: str) -> str:
    """The longest file name ``url`` stands for (a sequence's frame with a long frame number)."""
    if is_sequence_url(url):
        seq = parse_sequence_url(url)
        return f"{seq.head}{'0' * max(seq.padding, FRAME_DIGITS)}{seq.tail}"
    return url.rstrip("/").rsplit("/", 1)[-1]


def _limits(path: str) -> tuple[int, int]:
    """NAME_MAX and PATH_MAX of the file system that holds (or will hold) ``path``."""
    folder = os.path.abspath(path)
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    try:
        return os.pathconf(folder, "PC_NAME_MAX"), os.pathconf(folder, "PC_PATH_MAX")
    except (OSError, ValueError):
        return DEFAULT_NAME_MAX, DEFAULT_PATH_MAX


def _check_local(path: str, name: str, field: str, is_work: bool) -> None:
    path = urls.canonical_path(path)
    name_max, path_max = _limits(path)
    folders = path.split("/")[:-1] if not is_work else path.split("/")
    for part in folders:
        if len(part.encode()) > name_max:
            raise SpecError(
                field, f"{path}: the folder name {part[:40]!r}... is longer than {name_max} bytes"
            )
    if not is_work:
        longest = len(name.encode()) + storage.TEMPORARY_EXTRA
        if longest > name_max:
            raise SpecError(
                field,
                f"{path}: the file name {name[:40]!r}... is {len(name.encode())} bytes; with the "
                f"temporary name it is published through ({storage.TEMPORARY_EXTRA} more) the file "
                f"system's limit of {name_max} bytes is exceeded: use a shorter shot name or template",
            )
        if not is_sequence_url(path) and os.path.isdir(path):
            raise SpecError(field, f"{path} is a folder: an output must name a file")
    total = len(path.encode()) + (WORK_AREA_ROOM if is_work else storage.TEMPORARY_EXTRA)
    if total > path_max:
        raise SpecError(field, f"{path[:60]}...: the path is longer than the file system's {path_max} bytes")


def _check_key(url: str, field: str, *, room: int) -> None:
    key = url.split("://", 1)[-1].split("/", 1)[-1].split("?", 1)[0]
    if len(key.encode()) + room > OBJECT_KEY_MAX_BYTES:
        raise SpecError(
            field, f"{url[:80]}...: the object key is longer than the store's {OBJECT_KEY_MAX_BYTES} bytes"
        )
