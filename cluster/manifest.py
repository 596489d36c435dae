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
import io
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cluster.fingerprints import output_fingerprint
from pipeline import storage
from pipeline.errors import StorageError
from pipeline.faces.types import Face, FaceTask

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


# -- faces <-> npz ------------------------------------------------------------------------------


def faces_to_npz(faces: Sequence[Sequence[Face]]) -> bytes:
    """Faces of consecutive frames, packed into one npz (exact dtypes kept: a re-plan is identical)."""
    flat = [f for frame in faces for f in frame]
    counts = np.array([len(frame) for frame in faces], dtype=np.int32)
    arrays: dict[str, np.ndarray] = {"counts": counts}
    if flat:
        arrays["boxes"] = np.stack([np.asarray(f.box) for f in flat])
        arrays["landmarks"] = np.stack([np.asarray(f.landmarks) for f in flat])
        arrays["scores"] = np.array([f.score for f in flat], dtype=np.float64)
        has = np.array([f.embedding is not None for f in flat], dtype=bool)
        arrays["has_embedding"] = has
        if has.any():
            dim = next(np.asarray(f.embedding).shape for f in flat if f.embedding is not None)
            dtype = next(np.asarray(f.embedding).dtype for f in flat if f.embedding is not None)
            emb = np.zeros((len(flat), *dim), dtype=dtype)
            for i, f in enumerate(flat):
                if f.embedding is not None:
                    emb[i] = f.embedding
            arrays["embeddings"] = emb
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as the allow_pickle flag
    return buf.getvalue()


def faces_from_npz(data: bytes) -> list[list[Face]]:
    """The inverse of :func:`faces_to_npz`."""
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        counts = z["counts"]
        out: list[list[Face]] = []
        if not counts.sum():
            return [[] for _ in counts]
        # Each face's arrays are rows of the chunk's arrays (read once, in their own memory).
        has = z["has_embedding"].tolist()
        emb = list(z["embeddings"]) if "embeddings" in z.files else [None] * len(has)
        faces = Face.rows(
            z["boxes"],
            z["landmarks"],
            z["scores"].tolist(),
            [e if h else None for e, h in zip(emb, has, strict=True)],
        )
        i = 0
        for n in counts.tolist():
            out.append(faces[i : i + n])
            i += n
        return out


# -- the manifest -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RenderRecord:
    """A committed segment."""

    chunk: int
    key: str
    segment_url: str
    sha256: str
    bytes: int
    frames: int
    faces_swapped: int
    actor: str = ""
    frame_files: tuple[tuple[int, str, int], ...] = ()
    """Image sequences: (frame number, sha256, bytes) of every frame written (``segment_url`` is then
    the output's frame pattern)."""
    passes: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Compositing passes of the chunk: video, pass -> [segment URL, bytes, sha256]; image sequence,
    pass -> [pattern URL, [[frame, sha256, bytes], ...]]."""
    qc: tuple[dict[str, Any], ...] = ()
    """QC measures of the chunk's replaced faces (:class:`pipeline.qc.records.FaceMeasure` dicts)."""
    watermark: dict[str, Any] | None = None
    """The chunk's watermark: payload, step and the marked frames' runs (:class:`actors.marking.FrameMarker`)."""

    def files_intact(self) -> bool:
        """The segment (or every frame written), and every pass's, is there with the size the actor wrote."""
        if not self.frame_files:
            if storage.size(self.segment_url) != self.bytes:
                return False
        elif not _frames_intact(self.segment_url, self.frame_files):
            return False
        for entry in self.passes.values():
            url, written = entry[0], entry[1]
            if isinstance(written, int):
                if storage.size(url) != written:
                    return False
            elif not _frames_intact(url, [tuple(f) for f in written]):
                return False
        return True


def _frames_intact(pattern: str, files: Sequence[Sequence[Any]]) -> bool:
    from pipeline.plates.sequence import list_frames, parse_sequence_url

    sizes = {f.number: f.size for f in list_frames(parse_sequence_url(pattern))}
    return all(sizes.get(int(number)) == int(size) for number, _, size in files)


class JobManifest:
    """Reads and commits the records of one job's work area (``<work_url>/manifest``)."""

    def __init__(self, work_url: str) -> None:
        self.work_url = work_url
        self.root = storage.join(work_url, MANIFEST_DIR)

    # -- paths
    def _url(self, *parts: str) -> str:
        return storage.join(self.root, *parts)

    @staticmethod
    def _chunk_name(kind: str, index: int, ext: str = "json") -> str:
        return f"{kind}-{index:05d}.{ext}"

    def _read_json(self, url: str) -> dict[str, Any] | None:
        try:
            data = json.loads(storage.read_bytes(url))
        except StorageError as exc:
            if exc.reason != "not found":
                logger.warning("manifest record %s unreadable (%s); treated as missing", url, exc.reason)
            return None
        except ValueError:
            logger.warning("manifest record %s is not JSON; treated as missing", url)
            return None
        if not isinstance(data, dict) or data.get("version") != MANIFEST_VERSION:
            return None
        return data

    def _write_json(self, url: str, record: Mapping[str, Any]) -> None:
        storage.write_bytes(
            url, json.dumps({"version": MANIFEST_VERSION, **record}, indent=1, default=str).encode()
        )

    # -- job
    def exists(self) -> bool:
        """True when a job has written its manifest here."""
        return storage.exists(self._url("job.json"))

    def read_job(self) -> dict[str, Any] | None:
        return self._read_json(self._url("job.json"))

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
            data = storage.read_bytes(self._url(shot, self._chunk_name("analysis", index, "npz")))
        except StorageError:
            return None
        if hashlib.sha256(data).hexdigest() != record.get("sha256"):
            logger.warning("analysis npz of %s chunk %d does not match its record; redone", shot, index)
            return None
        return faces_from_npz(data)

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
    def read_render(self, shot: str, index: int, key: str) -> RenderRecord | None:
        """The committed segment of chunk ``index`` if its key matches and the segment is still there, intact."""
        record = self._read_json(self._url(shot, self._chunk_name("render", index)))
        if record is None or record.get("key") != key:
            return None
        found = RenderRecord(
            chunk=index,
            key=key,
            segment_url=record["segment_url"],
            sha256=record["sha256"],
            bytes=int(record["bytes"]),
            frames=int(record["frames"]),
            faces_swapped=int(record.get("faces_swapped", 0)),
            actor=str(record.get("actor", "")),
            frame_files=tuple((int(n), str(h), int(b)) for n, h, b in record.get("frame_files", ())),
            passes=dict(record.get("passes", {})),
            qc=tuple(record.get("qc", ())),
            watermark=record.get("watermark"),
        )
        try:
            if not found.files_intact():
                return None
        except StorageError:
            return None  # segments are deleted once the shot is published
        return found

    def write_render(self, shot: str, record: RenderRecord) -> None:
        self._write_json(
            self._url(shot, self._chunk_name("render", record.chunk)),
            {
                "chunk": record.chunk,
                "key": record.key,
                "segment_url": record.segment_url,
                "sha256": record.sha256,
                "bytes": record.bytes,
                "frames": record.frames,
                "faces_swapped": record.faces_swapped,
                "actor": record.actor,
                **({"frame_files": [list(f) for f in record.frame_files]} if record.frame_files else {}),
                **({"passes": record.passes} if record.passes else {}),
                **({"qc": list(record.qc)} if record.qc else {}),
                **({"watermark": record.watermark} if record.watermark is not None else {}),
            },
        )

    def published_output(self, shot: str, spec_key: str, output_url: str) -> dict[str, Any] | None:
        """The shot record if this job published ``output_url`` for ``spec_key`` and it is unchanged since."""
        record = self.read_shot(shot)
        if (
            record is None
            or record.get("status") != "published"
            or record.get("spec_key") != spec_key
            or record.get("output_url") != output_url
        ):
            return None
        try:
            if output_fingerprint(output_url) != record.get("output_fingerprint"):
                return None
        except StorageError:
            return None
        return record
