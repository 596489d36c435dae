"""The job manifest: what a job has durably finished, so a resubmitted job redoes nothing else.

It lives in the job's work area in the output store, one small object per
committed step, each written atomically (``storage.write_bytes``)::

    <work_url>/manifest/job.json                       job id, spec hash, pack hash
    <work_url>/manifest/<shot>/analysis-00003.npz      faces of every frame of chunk 3
    <work_url>/manifest/<shot>/analysis-00003.json     its key + the npz's sha256   (= commit)
    <work_url>/manifest/<shot>/track-00003.json        tracker state in/out, track ids
    <work_url>/manifest/<shot>/render-00003.json       key, segment URL, sha256, size (= commit)
    <work_url>/manifest/<shot>/shot.json               merge status, output sha256 and fingerprint
    <work_url>/manifest/<shot>/compact.bin             a published shot's chunk records, copied in one
                                                       object (:mod:`cluster.state.compact`)

A record is only ever written after the thing it describes is complete (the
npz, the uploaded segment, the published output), so a job killed at any
moment leaves a consistent manifest: every record describes finished work, and
anything without a record is ignored and redone (an unrecorded segment is
simply overwritten).  There is one writer, the driver; object stores need no
locking or renames for this.

Every record carries a *key*: the digest of exactly the inputs its work
depends on (see :func:`digest`).  A changed spec or model pack changes the keys
of exactly the affected steps; a record whose key differs is ignored.

Longer than 500 lines because every read and write of the records, their trust checks and the
shot folders' compacted copies and read-ahead (:mod:`cluster.state.compact`) belong together.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import threading
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from cluster.state.compact import CHUNK_FILE, COMPACT_NAME, ShotFolder, ShotFolders, pack, unpack
from cluster.state.face_npz import faces_from_npz, faces_to_npz
from cluster.state.fingerprints import output_fingerprint
from cluster.state.manifest_sign import MAC_FIELD, sign, signed_by
from cluster.state.segment_record import RenderRecord, SegmentHome
from pipeline.errors import InputRefused, RecastError, SpecError, StorageError
from pipeline.geometry.types import Face, FaceTask
from pipeline.limits import ANALYSIS_MAX_BYTES, COMPACT_MAX_BYTES, WORK_RECORD_MAX_BYTES
from pipeline.store import jsonload, storage

__all__ = [
    "MANIFEST_DIR",
    "MANIFEST_VERSION",
    "READABLE_VERSIONS",
    "JobManifest",
    "RenderRecord",
    "SegmentHome",
    "digest",
    "faces_from_npz",
    "faces_to_npz",
    "tasks_digest",
]

logger = logging.getLogger(__name__)

MANIFEST_VERSION = 2
"""The version every record is written with.  2 (issue 43): render records may carry
``replaced_frames``, shot records ``content_sha256`` and ``credentials_url``."""
READABLE_VERSIONS = (1, 2)
"""Versions a work area may have been written with and still be resumed: a version 1 record reads
as version 2 without the fields it did not have (a reused chunk's frames are then not stated
AI-modified in a sequence's sidecar; its render key changed with issue 43's marks anyway, so only
analyses and tracks are reused from it).  A newer version is refused (:meth:`JobManifest.check_version`)."""
MANIFEST_DIR = "manifest"


def digest(value: Any) -> str:
    """sha256 of ``value`` as canonical JSON (sorted keys; arrays by dtype, shape and bytes)."""
    return hashlib.sha256(
        json.dumps(_canonical(value), sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


_PLAIN = (str, int, float, bool, type(None))


def _canonical(value: Any) -> Any:
    # Exact built-in types first (most values): the same results as the general branches below.
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is dict:
        return {str(k): _canonical(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        return [_canonical(v) for v in value]
    if isinstance(value, np.ndarray):
        return _array_canonical(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _canonical(dataclasses.asdict(value))
    if hasattr(value, "model_dump"):
        return _canonical(value.model_dump(mode="json"))
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def tasks_digest(tasks_per_frame: Sequence[Sequence[FaceTask]]) -> str:
    """Digest of the planned face tasks of a chunk: a render depends on nothing else of the plan.

    Equal to ``digest`` of ``[[{"t", "i", "b", "l", "x"} per task] per frame]``, built
    directly (a chunk has hundreds of tasks; the general canonical walk costs more than the hashing).
    """
    names: dict[np.dtype, str] = {}  # str(dtype) is slow; a chunk has a few dtypes and ~1,000 arrays
    frames = [
        [
            {
                "b": _array_canonical(np.asarray(t.box), names),
                "i": t.identity,
                "l": _array_canonical(np.asarray(t.landmarks), names),
                "t": _canonical(t.track_id),
                "x": _canonical(t.extra),
            }
            for t in frame
        ]
        for frame in tasks_per_frame
    ]
    return hashlib.sha256(json.dumps(frames, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _array_canonical(value: np.ndarray, names: dict[np.dtype, str] | None = None) -> dict[str, Any]:
    """An array as its dtype, shape and sha256 (``names``: dtype names already made, filled in)."""
    dtype = value.dtype
    known = None if names is None else names.get(dtype)
    name = known if known is not None else str(dtype)
    if names is not None and known is None:
        names[dtype] = name
    return {"dtype": name, "shape": list(value.shape), "sha256": hashlib.sha256(value.tobytes()).hexdigest()}


# -- the manifest -------------------------------------------------------------------------------


class JobManifest:
    """Reads and commits the records of one job's work area (``<work_url>/manifest``).

    ``key``: sign every record written and trust only records signed with it
    (:mod:`cluster.state.manifest_sign`); None: records are neither signed nor checked.
    A record that cannot be trusted or parsed is treated as absent (its work is
    redone); :meth:`take_warnings` says what was set aside, for the summary.
    """

    def __init__(self, work_url: str, key: bytes | None = None) -> None:
        self.work_url = work_url
        self.root = storage.join(work_url, MANIFEST_DIR)
        self._key = key
        self._lock = threading.Lock()  # records are read on the planner thread too
        self._warnings: list[str] = []
        self._distrusted: list[str] = []
        self._folders: ShotFolders | None = None  # built when first read (never pickled)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_lock"]
        state["_folders"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # -- shot folders: listed once, compacted records, read ahead (cluster.state.compact)
    def _shot_folders(self) -> ShotFolders:
        with self._lock:
            if self._folders is None:
                self._folders = ShotFolders(self._load_folder)
            return self._folders

    def prefetch(self, shots: Iterable[str]) -> None:
        """Read the records of these shots ahead, in this order, on a thread pool (a resume reads them all)."""
        self._shot_folders().prefetch(list(shots))

    def close(self) -> None:
        """Stop reading ahead and drop what was read (reads go on, one folder at a time)."""
        with self._lock:
            folders, self._folders = self._folders, None
        if folders is not None:
            folders.close()

    def _load_folder(self, shot: str, fetch: bool) -> ShotFolder:
        """``shot``'s folder: listed, its compacted copies still current, and with ``fetch`` every
        other file read too."""
        url = self._url(shot)
        stamps = storage.listdir_stamps(url)
        folder = ShotFolder(stamps)
        if COMPACT_NAME in stamps:
            try:
                members = unpack(shot, self._read_compact(shot, stamps[COMPACT_NAME]))
            except (ValueError, InputRefused) as exc:
                self.set_aside(
                    f"manifest record {shot}/{COMPACT_NAME} is unusable ({exc}); its files are read"
                )
                members = {}
            except StorageError:
                members = {}
            folder.compacted = {n: data for n, (stamp, data) in members.items() if stamps.get(n) == stamp}
        if fetch:
            names = [n for n in stamps if n != COMPACT_NAME and n not in folder.compacted]
            for name in names:  # on a prefetch thread: shots are read side by side
                if (data := self._fetch(shot, name)) is not None:
                    folder.fetched[name] = data
        return folder

    def _read_compact(self, shot: str, stamp: str) -> bytes:
        """``<shot>/compact.bin`` of the size its listing ``stamp`` says (StorageError: none there, or
        larger than :data:`~pipeline.limits.COMPACT_MAX_BYTES`)."""
        size = int(stamp.partition(":")[0]) if stamp.partition(":")[0].isdigit() else COMPACT_MAX_BYTES
        return storage.read_bytes(self._url(shot, COMPACT_NAME), max_bytes=min(size, COMPACT_MAX_BYTES))

    def _fetch(self, shot: str, name: str) -> bytes | None:
        limit = ANALYSIS_MAX_BYTES if name.endswith(".npz") else WORK_RECORD_MAX_BYTES
        try:
            return storage.read_bytes(self._url(shot, name), max_bytes=limit)
        except StorageError:  # InputRefused too: read again (and refused) when asked for
            return None

    def _bytes(self, url: str, max_bytes: int, *, direct: bool = False) -> tuple[bytes, bool]:
        """The bytes of the file at ``url`` and whether they are a compacted copy (StorageError as
        :func:`~pipeline.store.storage.read_bytes`); ``direct``: the file itself."""
        shot, _, name = self._name(url).rpartition("/")
        if not direct and shot and "/" not in shot:
            data, copy = self._shot_folders().get(shot).take(name)
            if data is not None:
                if len(data) > max_bytes:
                    raise InputRefused(url, f"larger than {storage.describe_bytes(max_bytes)}")
                return data, copy
        return storage.read_bytes(url, max_bytes=max_bytes), False

    def _written(self, url: str) -> None:
        shot, _, name = self._name(url).rpartition("/")
        folders = self._folders
        if folders is not None and shot:
            folder = folders.cached(shot)
            if folder is not None:
                folder.written(name)
            else:
                folders.forget(shot)

    def compact_shot(self, shot: str) -> int:
        """Copy ``shot``'s chunk records into ``<shot>/compact.bin`` (nothing is removed: the files stay
        the source of truth, a file written since is read itself); the number of files it holds.

        Called once the shot is published (its records are final); copies still current in an earlier
        ``compact.bin`` are kept, files written since are read (on a thread pool)."""
        stamps = storage.listdir_stamps(self._url(shot))
        try:
            earlier = unpack(shot, self._read_compact(shot, stamps.get(COMPACT_NAME, "")))
        except (StorageError, ValueError):
            earlier = {}
        files: dict[str, tuple[str, bytes]] = {}
        wanted = []
        for name, stamp in stamps.items():
            if not CHUNK_FILE.fullmatch(name):
                continue
            if name in earlier and earlier[name][0] == stamp:
                files[name] = (stamp, bytes(earlier[name][1]))
            else:
                wanted.append(name)
        with ThreadPoolExecutor(8, thread_name_prefix="manifest-compact") as pool:
            for name, data in zip(wanted, pool.map(lambda n: self._fetch(shot, n), wanted), strict=True):
                if data is not None:
                    files[name] = (stamps[name], data)
        storage.write_bytes(self._url(shot, COMPACT_NAME), pack(shot, files))
        folders = self._folders
        if folders is not None:
            folders.forget(shot)
        return len(files)

    # -- paths
    def _url(self, *parts: str) -> str:
        return storage.join(self.root, *parts)

    @staticmethod
    def _chunk_name(kind: str, index: int, ext: str = "json") -> str:
        return f"{kind}-{index:05d}.{ext}"

    def _name(self, url: str) -> str:
        return url[len(self.root) + 1 :]

    def _read_json(self, url: str, *, direct: bool = False) -> dict[str, Any] | None:
        """The record at ``url``; None (treated as absent, its work redone) when there is none, or it is
        unreadable, not JSON, larger than :data:`~pipeline.limits.WORK_RECORD_MAX_BYTES` (only that
        much is read; a warning is kept for the summary), of another version or not trusted.

        A compacted copy that is not a trusted record (the compact file was edited) is noted as
        such and the file itself is read (``direct``)."""
        copy = False
        try:
            raw, copy = self._bytes(url, WORK_RECORD_MAX_BYTES, direct=direct)
            data = jsonload.loads(raw)
        except InputRefused as exc:
            self.set_aside(f"manifest record {self._name(url)} is {exc.reason}; treated as missing")
            return None
        except StorageError as exc:
            if exc.reason != "not found":
                logger.warning("manifest record %s unreadable (%s); treated as missing", url, exc.reason)
            return None
        except ValueError:  # torn, too deep or a key twice (jsonload.JsonError)
            where = f" (its copy in {COMPACT_NAME})" if copy else ""
            self.set_aside(f"manifest record {self._name(url)}{where} is not JSON; treated as missing")
            return self._read_json(url, direct=True) if copy else None
        if not isinstance(data, dict) or data.get("version") not in READABLE_VERSIONS:
            return self._read_json(url, direct=True) if copy else None
        if self._key is not None and not signed_by(self._key, self._name(url), data):
            logger.info("manifest record %s is unsigned or badly signed: not trusted", self._name(url))
            with self._lock:
                self._distrusted.append(self._name(url))
            return self._read_json(url, direct=True) if copy else None
        return data

    def _write_json(self, url: str, record: Mapping[str, Any]) -> None:
        # As it will read back (``default=str`` applied): the signature is of exactly that.
        data = json.loads(json.dumps({"version": MANIFEST_VERSION, **record}, default=str))
        data.pop(MAC_FIELD, None)
        if self._key is not None:
            data[MAC_FIELD] = sign(self._key, self._name(url), data)
        storage.write_bytes(url, json.dumps(data, indent=1).encode())
        self._written(url)

    # -- what was set aside
    def set_aside(self, warning: str) -> None:
        """Note a record (or the file it names) that was not used or could not be written, and why (logged
        and kept for the summary)."""
        logger.warning("%s", warning)
        with self._lock:
            self._warnings.append(warning)

    def take_warnings(self) -> list[str]:
        """The warnings noted since the last call, with one line for every record not trusted."""
        with self._lock:
            out, self._warnings = self._warnings, []
            distrusted, self._distrusted = self._distrusted, []
        if distrusted:
            out.append(
                f"{len(distrusted)} manifest record(s) were unsigned or not signed with RECAST_MANIFEST_KEY "
                f"(e.g. {distrusted[0]}): not trusted, their work was redone"
            )
        return out

    @property
    def signing_key(self) -> bytes | None:
        """The key records are signed and checked with (for a copy of this manifest in another process)."""
        return self._key

    def take_notes(self) -> tuple[list[str], list[str]]:
        """The warnings and the names of the records not trusted since the last call, as noted (another
        process's copy hands them to the driver's, :meth:`add_notes`)."""
        with self._lock:
            out = (self._warnings, self._distrusted)
            self._warnings, self._distrusted = [], []
        return out

    def add_notes(self, warnings: Sequence[str], distrusted: Sequence[str]) -> None:
        """Notes another process's copy took (:meth:`take_notes`), for :meth:`take_warnings`."""
        with self._lock:
            self._warnings.extend(warnings)
            self._distrusted.extend(distrusted)

    # -- job
    def exists(self) -> bool:
        """True when a job has written its manifest here."""
        return storage.exists(self._url("job.json"))

    def check_version(self) -> int | None:
        """The version ``job.json`` was written with (None: none there, or unreadable: it is then
        treated as missing, as any record).  SpecError naming the file, the version found and the
        versions this Recast reads, for a work area a newer (or unknown) Recast wrote: resuming it
        would misread its records."""
        url = self._url("job.json")
        try:
            data = jsonload.loads(storage.read_bytes(url, max_bytes=WORK_RECORD_MAX_BYTES))
        except (RecastError, ValueError):
            return None
        found = data.get("version") if isinstance(data, dict) else None
        if found in READABLE_VERSIONS:
            if found != MANIFEST_VERSION:
                self.set_aside(
                    f"work area written with manifest version {found} (an earlier Recast): read as version "
                    f"{MANIFEST_VERSION}, its records rewritten as they are redone"
                )
            return int(found)
        readable = ", ".join(str(v) for v in READABLE_VERSIONS)
        raise SpecError(
            url,
            f"written with manifest version {found!r}; this Recast reads versions {readable} "
            f"(writes {MANIFEST_VERSION}): resume it with the Recast that wrote it, or start over with --fresh",
        )

    def read_job(self) -> dict[str, Any] | None:
        """``job.json`` when it is trusted and well-formed (``shots`` a mapping, ``runs`` a count)."""
        record = self._read_json(self._url("job.json"))
        if record is None:
            return None
        if not isinstance(record.get("shots", {}), dict) or not isinstance(record.get("runs", 0), int):
            self.set_aside("manifest record job.json is not in this version's format; ignored")
            return None
        return record

    def write_job(self, record: Mapping[str, Any]) -> None:
        self._write_json(self._url("job.json"), record)

    # -- shot
    def read_shot(self, shot: str) -> dict[str, Any] | None:
        return self._read_json(self._url(shot, "shot.json"))

    def write_shot(self, shot: str, record: Mapping[str, Any]) -> None:
        self._write_json(self._url(shot, "shot.json"), record)

    # -- analysis
    def read_analysis(self, shot: str, index: int, key: str) -> list[list[Face]] | None:
        """The committed faces of chunk ``index`` if its record has ``key`` and the npz is intact."""
        record = self._read_json(self._url(shot, self._chunk_name("analysis", index)))
        if record is None or record.get("key") != key:
            return None
        url = self._url(shot, self._chunk_name("analysis", index, "npz"))
        try:
            data, copy = self._bytes(url, ANALYSIS_MAX_BYTES)
            if copy and hashlib.sha256(data).hexdigest() != record.get("sha256"):
                data = storage.read_bytes(url, max_bytes=ANALYSIS_MAX_BYTES)  # the copy was edited
        except StorageError:
            return None
        if hashlib.sha256(data).hexdigest() != record.get("sha256"):
            self.set_aside(
                f"{shot} chunk {index}: the analysis npz does not match its record; analysed again"
            )
            return None
        try:
            return faces_from_npz(data)
        except (ValueError, KeyError, TypeError, IndexError, OSError, EOFError, zipfile.BadZipFile) as exc:
            self.set_aside(f"{shot} chunk {index}: the analysis npz cannot be read ({exc}); analysed again")
            return None

    def write_analysis(
        self, shot: str, index: int, key: str, faces: Sequence[Sequence[Face]], actor: str
    ) -> None:
        """Commit the faces of chunk ``index``: the npz first, then the record naming its sha256."""
        data = faces_to_npz(faces)
        npz_url = self._url(shot, self._chunk_name("analysis", index, "npz"))
        storage.write_bytes(npz_url, data)
        self._written(npz_url)
        self._write_json(
            self._url(shot, self._chunk_name("analysis", index)),
            {
                "chunk": index,
                "key": key,
                "sha256": hashlib.sha256(data).hexdigest(),
                "frames": len(faces),
                "actor": actor,
            },
        )

    # -- tracking
    def read_track(self, shot: str, index: int) -> dict[str, Any] | None:
        return self._read_json(self._url(shot, self._chunk_name("track", index)))

    def write_track(
        self,
        shot: str,
        index: int,
        *,
        key: str,
        state_in: dict[str, Any] | None,
        state_out: dict[str, Any],
        track_ids: Sequence[Sequence[int]],
    ) -> None:
        self._write_json(
            self._url(shot, self._chunk_name("track", index)),
            {
                "chunk": index,
                "key": key,
                "state_in": state_in,
                "state_out": state_out,
                "track_ids": [list(map(int, ids)) for ids in track_ids],
            },
        )

    # -- render
    def read_render(self, shot: str, index: int, key: str, home: SegmentHome) -> RenderRecord | None:
        """The committed segment of chunk ``index`` if its key matches and its files are where this job
        writes them (``home``), there, with the recorded sizes and sha256 (every byte is read)."""
        found = self.render_record(shot, index, key, home)
        if found is None:
            return None
        try:
            if not found.files_intact():
                return None
            bad = found.content_mismatch()
        except StorageError:
            return None  # segments are deleted once the shot is published
        if bad is not None:
            self.set_aside(
                f"{shot} chunk {index}: segment {bad} does not match its recorded sha256; rendered again"
            )
            return None
        return found

    def render_record(self, shot: str, index: int, key: str, home: SegmentHome) -> RenderRecord | None:
        """Chunk ``index``'s render record if its key matches and its URLs are where this job writes the
        chunk's files (``home``); whether the files are still there is not looked at."""
        url = self._url(shot, self._chunk_name("render", index))
        record = self._read_json(url)
        if record is None or record.get("key") != key:
            return None
        try:
            found = RenderRecord.from_json(index, key, record)
        except (KeyError, TypeError, ValueError) as exc:
            self.set_aside(
                f"{shot} chunk {index}: render record {self._name(url)} is malformed ({exc}); rendered again"
            )
            return None
        if (outside := found.misplaced(home)) is not None:
            self.set_aside(
                f"{shot} chunk {index}: the record's segment {outside} is not in this job's segments of "
                f"the shot; ignored, rendered again"
            )
            return None
        return found

    def write_render(self, shot: str, record: RenderRecord) -> None:
        self._write_json(self._url(shot, self._chunk_name("render", record.chunk)), record.to_json())

    def published_output(self, shot: str, spec_key: str | None, output_url: str) -> dict[str, Any] | None:
        """The shot record if this job published ``output_url`` for ``spec_key`` (None: for any spec of the
        shot) and it is unchanged since."""
        record = self.read_shot(shot)
        if (
            record is None
            or record.get("status") != "published"
            or (spec_key is not None and record.get("spec_key") != spec_key)
            or record.get("output_url") != output_url
        ):
            return None
        if not isinstance(record.get("output_fingerprint"), dict) or not isinstance(
            record.get("output_sha256"), str
        ):
            self.set_aside(f"{shot}: shot record is malformed; the output is made again")
            return None
        try:
            if output_fingerprint(output_url) != record.get("output_fingerprint"):
                return None
        except StorageError:
            return None
        return record

    def passes_changed(self, record: dict[str, Any]) -> str | None:
        """The first pass of a published shot ``record`` whose frames changed or went since it was
        published (None: none did, or the record names none)."""
        for url, fingerprint in (record.get("pass_fingerprints") or {}).items():
            try:
                if output_fingerprint(url) != fingerprint:
                    return str(url)
            except StorageError:
                return str(url)
        return None
