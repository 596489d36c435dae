"""A shot's manifest folder read in one go: its listing, its compacted records, prefetched in parallel.

A resumed driver asks for every chunk's records; read one file at a time that is
some 90 reads per shot (27,000 for a feature film).  Instead:

* **Compaction** (:func:`pack`, written by :meth:`JobManifest.compact_shot` once a shot is
  published): ``<shot>/compact.bin`` holds the exact bytes of the shot's per-chunk files
  (``analysis-NNNNN.json`` and ``.npz``, ``track-NNNNN.json``, ``render-NNNNN.json``), each
  with the *stamp* its file had when it was copied (size and mtime, or size and ETag:
  :func:`pipeline.store.storage.listdir_stamps`).  Nothing is removed: the manifest stays
  append-only and the per-chunk files stay the source of truth.
* **Precedence**: the folder is listed once (one call).  A file's bytes come from the
  compacted copy only when the file is listed with the very stamp it had when it was copied;
  a file written (or edited, or copied) since has another stamp and is read itself, and a
  file no longer listed is read itself too (absent: its work is redone, as without
  compaction).  So a record written after the compaction always wins.
* **Trust is unchanged**: a compacted copy is the file's bytes, parsed and verified as the
  file would be (its own ``mac`` under its own name, the npz against the sha256 its record
  names).  A copy that fails (the compact file was edited) is set aside as a distrusted record
  is and the file itself is read instead.
* **Prefetch** (:class:`ShotFolders`): the folders of the shots a resume is about to read
  are loaded on a thread pool (the reads are I/O: many at once on an object store), a few
  shots ahead of the one being read, and the per-chunk files that the compacted copy does
  not cover are read there too.  Bytes are handed out once; a later read of the same file
  goes to the store.
"""

from __future__ import annotations

import json
import re
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pipeline.store import jsonload

COMPACT_NAME = "compact.bin"
COMPACT_VERSION = 1
_MAGIC = b"RECAST-COMPACT\n"
_LENGTH = struct.Struct(">Q")
CHUNK_FILE = re.compile(r"(analysis|track|render)-[0-9]{5}\.(json|npz)")
"""The per-chunk files a compaction copies (``shot.json`` is rewritten in place: never compacted)."""


def pack(shot: str, files: dict[str, tuple[str, bytes]]) -> bytes:
    """``compact.bin`` of ``shot``: ``files`` is name -> (its stamp when read, its bytes)."""
    members: dict[str, dict[str, Any]] = {}
    offset = 0
    for name in sorted(files):
        stamp, data = files[name]
        members[name] = {"offset": offset, "length": len(data), "stamp": stamp}
        offset += len(data)
    header = json.dumps(
        {"version": COMPACT_VERSION, "shot": shot, "members": members}, separators=(",", ":")
    ).encode()
    return b"".join([_MAGIC, _LENGTH.pack(len(header)), header, *(files[n][1] for n in sorted(files))])


def unpack(shot: str, data: bytes) -> dict[str, tuple[str, memoryview]]:
    """name -> (stamp, bytes) of a ``compact.bin``; ValueError when it is not one of ``shot``."""
    if not data.startswith(_MAGIC) or len(data) < len(_MAGIC) + _LENGTH.size:
        raise ValueError("not a compacted record")
    (size,) = _LENGTH.unpack_from(data, len(_MAGIC))
    start = len(_MAGIC) + _LENGTH.size
    if size > len(data) - start:
        raise ValueError("its header is cut short")
    header = jsonload.loads(data[start : start + size])
    if not isinstance(header, dict) or header.get("version") != COMPACT_VERSION or header.get("shot") != shot:
        raise ValueError("not a compacted record of this version and shot")
    members = header.get("members")
    if not isinstance(members, dict):
        raise ValueError("it lists no members")  # noqa: TRY004 - a malformed file, as every refusal here
    body = memoryview(data)[start + size :]
    out = {}
    for name, entry in members.items():
        if not CHUNK_FILE.fullmatch(name) or not isinstance(entry, dict):
            raise ValueError(f"member {name!r} is not a chunk record")
        offset, length, stamp = entry.get("offset"), entry.get("length"), entry.get("stamp")
        if (
            type(offset) is not int
            or type(length) is not int
            or not isinstance(stamp, str)
            or offset < 0
            or length < 0
            or offset + length > len(body)
        ):
            raise ValueError(f"member {name!r} is malformed")
        out[name] = (stamp, body[offset : offset + length])
    return out


@dataclass
class ShotFolder:
    """One shot's manifest folder as listed once: where each file's bytes come from."""

    stamps: dict[str, str]
    """The files listed, name -> stamp."""
    compacted: dict[str, memoryview] = field(default_factory=dict)
    """Files listed with the stamp they had when compacted: their copy."""
    fetched: dict[str, bytes] = field(default_factory=dict)
    """Files read ahead (prefetch), handed out once."""

    def take(self, name: str) -> tuple[bytes | None, bool]:
        """The bytes of file ``name`` as listed and whether they are a compacted copy; (None, False):
        read the file itself (not listed, or already handed out)."""
        copy = self.compacted.get(name)
        if copy is not None:
            return bytes(copy), True
        return self.fetched.pop(name, None), False

    def written(self, name: str) -> None:
        """This process wrote ``name``: its file is read from now on."""
        self.compacted.pop(name, None)
        self.fetched.pop(name, None)
        self.stamps.pop(name, None)


class ShotFolders:
    """The shots' folders, loaded when first asked for or ahead of time (:meth:`prefetch`).

    ``load(shot, fetch)`` lists and loads one folder (``fetch``: read every file the
    compacted copy does not cover too).  At most ``keep`` loaded folders are kept (the least
    recently used are dropped and loaded again if asked for), and a prefetch runs ``ahead``
    shots ahead of the last one asked for, on ``workers`` threads.  Not pickled: a copy
    starts empty (:class:`~cluster.state.manifest.JobManifest` builds one lazily).
    """

    def __init__(
        self, load: Callable[[str, bool], ShotFolder], *, workers: int = 16, ahead: int = 16, keep: int = 32
    ) -> None:
        self._load = load
        self._workers, self._ahead, self._keep = workers, ahead, keep
        self._lock = threading.Lock()
        self._loaded: OrderedDict[str, ShotFolder] = OrderedDict()
        self._pending: dict[str, Future[ShotFolder]] = {}
        self._order: list[str] = []
        self._position: dict[str, int] = {}
        self._next = 0
        self._pool: ThreadPoolExecutor | None = None

    def prefetch(self, shots: Sequence[str]) -> None:
        """Load these shots' folders ahead of their reads, in this order."""
        with self._lock:
            self._order = list(dict.fromkeys(shots))
            self._position = {shot: i for i, shot in enumerate(self._order)}
            self._next = 0
            self._schedule(-1)

    def get(self, shot: str) -> ShotFolder:
        with self._lock:
            folder = self._loaded.get(shot)
            if folder is not None:
                self._loaded.move_to_end(shot)
                return folder
            pending = self._pending.get(shot)
            self._schedule(self._position.get(shot, -1))
        if pending is not None:
            try:
                folder = pending.result()
            except Exception:  # noqa: BLE001 - loaded again here, its error raised to the reader
                folder = self._load(shot, False)
        else:
            folder = self._load(shot, False)
        with self._lock:
            if self._pending.get(shot) is pending:
                self._pending.pop(shot, None)
            self._loaded[shot] = folder
            self._loaded.move_to_end(shot)
            while len(self._loaded) > self._keep:
                self._loaded.popitem(last=False)
        return folder

    def cached(self, shot: str) -> ShotFolder | None:
        """The shot's folder if it is loaded (not waiting for one being loaded)."""
        with self._lock:
            return self._loaded.get(shot)

    def forget(self, shot: str) -> None:
        with self._lock:
            self._loaded.pop(shot, None)
            self._pending.pop(shot, None)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
            self._pending.clear()
            self._order, self._position = [], {}
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def _schedule(self, position: int) -> None:
        """Start loading the shots up to ``ahead`` past ``position`` in the prefetch order (lock held);
        loads left far behind it (shots never asked for) are dropped."""
        self._next = max(self._next, position + 1)
        end = min(len(self._order), position + 1 + self._ahead)
        while self._next < end:
            shot = self._order[self._next]
            self._next += 1
            if shot in self._loaded or shot in self._pending:
                continue
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="manifest-prefetch")
            self._pending[shot] = self._pool.submit(self._load, shot, True)
        behind = [s for s in self._pending if self._position.get(s, position) < position - self._keep]
        for shot in behind:
            self._pending.pop(shot).cancel()
