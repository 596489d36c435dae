"""A committed segment (a chunk's render record) and how a resumed job checks it before reusing it.

A record is only as good as what it points at.  Before a segment an earlier run
committed is reused, the driver checks that its URLs are where this job writes
segments (``<work_url>/segments/<shot>/<file>``, or an image sequence's own
output and pass patterns) and that every file it names is there with the size
and sha256 recorded.  Anything else: the chunk is rendered again, and why is
returned so the summary can say it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from actors.results import ChunkPass, ChunkWatermark, FrameFile, SequencePass, VideoPass, pass_sha256
from pipeline.errors import StorageError
from pipeline.qc.records import FaceMeasure
from pipeline.store import storage
from pipeline.store.hashing import sha256_url


@dataclass(frozen=True)
class SegmentHome:
    """Where the segments of one shot may be: a folder (video), or the output's own patterns (sequence)."""

    folder: str | None = None
    """``<work_url>/segments/<shot>``: a video's segments and pass segments are files directly in it
    (an image sequence's review segments too)."""
    frames_url: str | None = None
    """An image sequence's output pattern (its frames are written straight there)."""
    pass_urls: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """An image sequence's pass -> pattern URL."""


@dataclass(frozen=True)
class RenderRecord:
    """A committed segment (the manifest's ``render-<chunk>.json``: :meth:`from_json`, :meth:`to_json`)."""

    chunk: int
    key: str
    segment_url: str
    sha256: str
    bytes: int
    frames: int
    faces_swapped: int
    actor: str = ""
    frame_files: tuple[FrameFile, ...] = ()
    """Image sequences: every frame written (``segment_url`` is then the output's frame pattern)."""
    passes: dict[str, ChunkPass] = dataclasses.field(default_factory=dict)
    """Compositing passes of the chunk: a segment each (video) or their frames (image sequence)."""
    qc: tuple[FaceMeasure, ...] = ()
    """QC measures of the chunk's replaced faces."""
    watermark: ChunkWatermark | None = None
    """The chunk's watermark: payload, step and the marked frames' runs (:class:`actors.marking.FrameMarker`)."""
    replaced_frames: tuple[tuple[int, int], ...] = ()
    """Runs ``(first, last)`` of the source frame numbers whose faces were replaced."""

    @classmethod
    def from_json(cls, index: int, key: str, record: Mapping[str, Any]) -> RenderRecord:
        """Parse a stored record; a missing field or a wrong type raises (KeyError, TypeError, ValueError)."""
        passes, qc = record.get("passes", {}), record.get("qc", ())
        if not isinstance(passes, dict) or not isinstance(qc, (list, tuple)):
            raise TypeError("passes must be a mapping and qc a list")
        return cls(
            chunk=index,
            key=key,
            segment_url=_text(record["segment_url"]),
            sha256=_text(record["sha256"]),
            bytes=int(record["bytes"]),
            frames=int(record["frames"]),
            faces_swapped=int(record.get("faces_swapped", 0)),
            actor=str(record.get("actor", "")),
            frame_files=_frame_files(record.get("frame_files", ())),
            passes={str(name): _pass_entry(entry) for name, entry in passes.items()},
            qc=tuple(_measure(m) for m in qc),
            watermark=_watermark(record.get("watermark")),
            replaced_frames=_runs(record.get("replaced_frames", ())),
        )

    def to_json(self) -> dict[str, Any]:
        """The stored record (without ``version``): optional parts only when there are any."""
        out: dict[str, Any] = {
            "chunk": self.chunk,
            "key": self.key,
            "segment_url": self.segment_url,
            "sha256": self.sha256,
            "bytes": self.bytes,
            "frames": self.frames,
            "faces_swapped": self.faces_swapped,
            "actor": self.actor,
        }
        if self.frame_files:
            out["frame_files"] = [list(f) for f in self.frame_files]
        if self.passes:
            out["passes"] = {name: _pass_json(entry) for name, entry in self.passes.items()}
        if self.qc:
            out["qc"] = [m.to_dict() for m in self.qc]
        if self.watermark is not None:
            w = self.watermark
            out["watermark"] = {"payload": w.payload, "step": w.step, "frames": [list(r) for r in w.frames]}
        if self.replaced_frames:
            out["replaced_frames"] = [list(r) for r in self.replaced_frames]
        return out

    def files_intact(self) -> bool:
        """The segment (or every frame written), and every pass's, is there with the size the actor wrote."""
        if not self.frame_files:
            if storage.size(self.segment_url) != self.bytes:
                return False
        elif not frames_intact(self.segment_url, self.frame_files):
            return False
        for entry in self.passes.values():
            if isinstance(entry, VideoPass):
                if storage.size(entry.url) != entry.bytes:
                    return False
            elif not frames_intact(entry.url, entry.frames):
                return False
        return True

    def misplaced(self, home: SegmentHome) -> str | None:
        """The first URL of the record that is not where this job writes the chunk's files (None: all are)."""
        if home.frames_url is not None:
            if self.segment_url != home.frames_url:
                return self.segment_url
            for name, entry in self.passes.items():
                in_folder = home.folder is not None and is_file_in(entry.url, home.folder)
                if entry.url != home.pass_urls.get(name) and not (isinstance(entry, VideoPass) and in_folder):
                    return entry.url
            return None
        if home.folder is None or self.frame_files:
            return self.segment_url
        if not is_file_in(self.segment_url, home.folder):
            return self.segment_url
        for name, entry in self.passes.items():
            # A video's pass frames are written where they are published; its segments in the folder.
            if isinstance(entry, SequencePass) and entry.url != home.pass_urls.get(name):
                return entry.url
            if isinstance(entry, VideoPass) and not is_file_in(entry.url, home.folder):
                return entry.url
        return None

    def content_mismatch(self) -> str | None:
        """The first file of the record whose sha256 is not the recorded one (None: all match).

        Reads every byte of the chunk's files; call it after :meth:`files_intact` (sizes first)."""
        if not self.frame_files:
            if sha256_url(self.segment_url) != self.sha256:
                return self.segment_url
        elif (bad := _frames_mismatch(self.segment_url, self.frame_files)) is not None:
            return bad
        for entry in self.passes.values():
            if isinstance(entry, VideoPass):
                if sha256_url(entry.url) != entry.sha256:
                    return entry.url
            elif (bad := _frames_mismatch(entry.url, entry.frames)) is not None:
                return bad
        return None

    def file_sha256(self) -> dict[str, str]:
        """URL -> recorded sha256 of the segment and each pass segment (videos)."""
        return {self.segment_url: self.sha256, **pass_sha256(self.passes)}


def is_file_in(url: str, folder: str) -> bool:
    """True when ``url`` names a file directly inside ``folder``: the exact prefix ``folder/`` and then one
    plain name (no ``/``, not ``.`` or ``..``, no ``%``-escapes), so no spelling of the URL reaches out."""
    prefix = folder.rstrip("/") + "/"
    if not url.startswith(prefix):
        return False
    name = url[len(prefix) :]
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\%\0")


def _frame_files(files: Any) -> tuple[FrameFile, ...]:
    """Stored ``[[number, sha256, bytes], ...]``, checked."""
    return tuple(FrameFile(int(n), _text(h), int(b)) for n, h, b in files)


def _pass_entry(entry: Any) -> ChunkPass:
    """A pass's stored entry, checked: [segment URL, bytes, sha256] (video) or [pattern URL, [[frame, sha256,
    bytes], ...]] (image sequence)."""
    if isinstance(entry, list) and len(entry) == 3:
        return VideoPass(url=_text(entry[0]), bytes=int(entry[1]), sha256=_text(entry[2]))
    if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], list):
        return SequencePass(url=_text(entry[0]), frames=_frame_files(entry[1]))
    raise TypeError("a pass entry is [url, bytes, sha256] or [pattern, frames]")


def _pass_json(entry: ChunkPass) -> list[Any]:
    """A pass's stored entry (the inverse of :func:`_pass_entry`)."""
    if isinstance(entry, VideoPass):
        return [entry.url, entry.bytes, entry.sha256]
    return [entry.url, [list(f) for f in entry.frames]]


def _measure(value: Any) -> FaceMeasure:
    if not isinstance(value, Mapping):
        raise TypeError("a QC measure must be a mapping")
    return FaceMeasure.from_dict(dict(value))


def _runs(value: Any) -> tuple[tuple[int, int], ...]:
    if not isinstance(value, (list, tuple)):
        raise TypeError("replaced_frames must be a list of [first, last] runs")
    runs = []
    for run in value:
        if not isinstance(run, (list, tuple)) or len(run) != 2:
            raise TypeError("replaced_frames must be a list of [first, last] runs")
        runs.append((int(run[0]), int(run[1])))
    return tuple(runs)


def _watermark(value: Any) -> ChunkWatermark | None:
    """A stored ``{"payload", "step", "frames": [[first, last], ...]}``, checked (None: none)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise TypeError("watermark must be a mapping")
    step = value["step"]
    if isinstance(step, bool) or not isinstance(step, (int, float)):
        raise TypeError("watermark step must be a number")
    frames = tuple((int(first), int(last)) for first, last in value["frames"])
    return ChunkWatermark(payload=_text(value["payload"]), step=step, frames=frames)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, found {type(value).__name__}")
    return value


def frames_intact(pattern: str, files: Sequence[FrameFile]) -> bool:
    from pipeline.plates.sequence import list_frames, parse_sequence_url

    sizes = {f.number: f.size for f in list_frames(parse_sequence_url(pattern))}
    return all(sizes.get(f.number) == f.bytes for f in files)


def _frames_mismatch(pattern: str, files: Sequence[FrameFile]) -> str | None:
    from pipeline.plates.sequence import parse_sequence_url

    seq = parse_sequence_url(pattern)
    for f in files:
        url = seq.frame_url(f.number)
        try:
            if sha256_url(url) != f.sha256:
                return url
        except StorageError:
            return url
    return None
