"""The job manifest: what a job has durably finished, so a resubmitted job redoes nothing else.

It lives in the job's work area in the output store, one small object per
committed step, each written atomically (``storage.write_bytes``)::

    <work_url>/manifest/job.json                       job id, spec hash, pack hash
    <work_url>/manifest/<shot>/analysis-00003.npz      faces of every frame of chunk 3
    <work_url>/manifest/<shot>/analysis-00003.json     its key + the npz's sha256   (= commit)
    <work_url>/manifest/<shot>/track-00003.json        tracker state in/out, track ids
    <work_url>/manifest/<shot>/render-00003.json       key, segment URL, sha256, size (= commit)
    <work_url>/manifest/<shot>/shot.json               merge status, output sha256 and fingerprint

A record is only ever written after the thing it describes is complete (the
npz, the uploaded segment, the published output), so a job killed at any
moment leaves a consistent manifest: every record describes finished work, and
anything without a record is ignored and redone (an unrecorded segment is
simply overwritten).  There is one writer, the driver; object stores need no
locking or renames for this.

Every record carries a *key*: the digest of exactly the inputs its work
depends on (see :func:`digest`).  A changed spec or model pack changes the keys
of exactly the affected steps; a record whose key differs is ignored.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import threading
import zipfile
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from cluster.state.face_npz import faces_from_npz, faces_to_npz
from cluster.state.fingerprints import output_fingerprint
from cluster.state.manifest_sign import MAC_FIELD, sign, signed_by
from cluster.state.segment_record import RenderRecord, SegmentHome
from pipeline.errors import InputRefused, StorageError
from pipeline.geometry.types import Face, FaceTask
from pipeline.limits import ANALYSIS_MAX_BYTES, WORK_RECORD_MAX_BYTES
from pipeline.store import jsonload, storage

__all__ = [
    "MANIFEST_DIR",
    "MANIFEST_VERSION",
    "JobManifest",
    "RenderRecord",
    "SegmentHome",
    "digest",
    "faces_from_npz",
    "faces_to_npz",
    "tasks_digest",
]

logger = logging.getLogger(__name__)

MANIFEST_VERSION = 1
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
    frames = [
        [
            {
                "b": _array_canonical(np.asarray(t.box)),
                "i": t.identity,
                "l": _array_canonical(np.asarray(t.landmarks)),
                "t": _canonical(t.track_id),
                "x": _canonical(t.extra),
            }
            for t in frame
        ]
        for frame in tasks_per_frame
    ]
    return hashlib.sha256(json.dumps(frames, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _array_canonical(value: np.ndarray) -> dict[str, Any]:
    return {
        "dtype": str(value.dtype),
        "shape": list(value.shape),
        "sha256": hashlib.sha256(value.tobytes()).hexdigest(),
    }


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

    # -- paths
    def _url(self, *parts: str) -> str:
        return storage.join(self.root, *parts)

    @staticmethod
    def _chunk_name(kind: str, index: int, ext: str = "json") -> str:
        return f"{kind}-{index:05d}.{ext}"

    def _name(self, url: str) -> str:
        return url[len(self.root) + 1 :]

    def _read_json(self, url: str) -> dict[str, Any] | None:
        """The record at ``url``; None (treated as absent, its work redone) when there is none, or it is
        unreadable, not JSON, larger than :data:`~pipeline.limits.WORK_RECORD_MAX_BYTES` (only that
        much is read; a warning is kept for the summary), of another version or not trusted."""
        try:
            data = jsonload.loads(storage.read_bytes(url, max_bytes=WORK_RECORD_MAX_BYTES))
        except InputRefused as exc:
            self.set_aside(f"manifest record {self._name(url)} is {exc.reason}; treated as missing")
            return None
        except StorageError as exc:
            if exc.reason != "not found":
                logger.warning("manifest record %s unreadable (%s); treated as missing", url, exc.reason)
            return None
        except ValueError:  # torn, too deep or a key twice (jsonload.JsonError)
            self.set_aside(f"manifest record {self._name(url)} is not JSON; treated as missing")
            return None
        if not isinstance(data, dict) or data.get("version") != MANIFEST_VERSION:
            return None
        if self._key is not None and not signed_by(self._key, self._name(url), data):
            logger.info("manifest record %s is unsigned or badly signed: not trusted", self._name(url))
            with self._lock:
                self._distrusted.append(self._name(url))
            return None
        return data

    def _write_json(self, url: str, record: Mapping[str, Any]) -> None:
        # As it will read back (``default=str`` applied): the signature is of exactly that.
        data = json.loads(json.dumps({"version": MANIFEST_VERSION, **record}, default=str))
        data.pop(MAC_FIELD, None)
        if self._key is not None:
            data[MAC_FIELD] = sign(self._key, self._name(url), data)
        storage.write_bytes(url, json.dumps(data, indent=1).encode())

    # -- what was set aside
    def set_aside(self, warning: str) -> None:
        """Note a record (or the file it names) that was not used, and why (logged and kept for the summary)."""
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
        try:
            url = self._url(shot, self._chunk_name("analysis", index, "npz"))
            data = storage.read_bytes(url, max_bytes=ANALYSIS_MAX_BYTES)
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
        storage.write_bytes(self._url(shot, self._chunk_name("analysis", index, "npz")), data)
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
