"""Per-shot and per-job summaries: what was rendered, how fast, on what.

Plain dataclasses with ``to_dict`` (written as ``summary.json`` in the job's
work area), read by attribute by the report, and a fixed-width table for logs.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from actors.results import ActorInfo, ChunkWatermark
from cluster.report.marking import marking_line
from cluster.spec.fixes import BoxFix, FacesFix, IdentityFix, KeepPlateFix, fix_action, fix_kind, fix_label
from pipeline.store.redact import Redactor, plain_numbers

if TYPE_CHECKING:
    from cluster.report.qcfile import FiledQC
    from pipeline.qc.analyze import ShotQC

ShotStatus = Literal["pending", "published", "skipped", "failed"]

QcJson = Callable[[str, "ShotQC | FiledQC"], Any]
"""What a shot's QC is in ``to_dict`` (given the shot's name and its QC): by default ``qc.to_dict()``; the
driver's rewrites give text encoded once (:meth:`cluster.report.cache.ReportCache.qc_json`)."""


def reported(value: float | None) -> float | None:
    """A time or a rate as ``summary.json`` and the report give it: to 3 decimals (None stays None)."""
    return None if value is None else round(value, 3)


@dataclass(frozen=True)
class WatermarkSummary:
    """A shot's watermark: the payload (hex), the step (the strength used) and the source frames that got
    it (``frames_marked`` of them, as inclusive ``[first, last]`` runs)."""

    payload: str
    step: float
    frames_marked: int
    frame_ranges: tuple[tuple[int, int], ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "payload": self.payload,
            "step": self.step,
            "frames_marked": self.frames_marked,
            "frame_ranges": [list(r) for r in self.frame_ranges],
        }


@dataclass(frozen=True)
class RerenderedChunk:
    """A chunk this run rendered again because fixes on its frames changed: its index, its frames (the
    plate's numbers, inclusive) and why (``fix 2 (frames 1013-1028, track 2) changed``)."""

    chunk: int
    frames: tuple[int, int]
    reasons: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"chunk": self.chunk, "frames": list(self.frames), "reasons": list(self.reasons)}


@dataclass(frozen=True)
class FixMark:
    """A fix of the shot as the report draws it on the shot's timeline: its index in ``fixes:``, its kind
    (``keep_plate``, ``identity``, ``box``, ``faces``), its frames (the plate's numbers, inclusive), its
    track (None: a box or render settings) and how the summary names it."""

    index: int
    kind: str
    frames: tuple[int, int]
    track: int | None
    label: str

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "frames": list(self.frames)}


def fix_marks(fixes: tuple[KeepPlateFix | IdentityFix | BoxFix | FacesFix, ...]) -> list[FixMark]:
    """A shot's ``fixes:`` as the summary and the report show them."""
    return [
        FixMark(
            index=j,
            kind=fix_kind(fix),
            frames=(fix.frames.first, fix.frames.last),
            track=getattr(fix, "track", None),
            label=f"{fix_label(j, fix)}: {fix_action(fix)}",
        )
        for j, fix in enumerate(fixes)
    ]


@dataclass(frozen=True)
class ReviewOutputs:
    """A shot's review media (``output.review``): the movie, its contact sheet, the frames flagged in it."""

    movie_url: str
    contact_url: str
    frames: int
    flagged_frames: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ShotSummary:
    """The outcome of one shot."""

    name: str
    url: str
    output_url: str
    status: ShotStatus = "pending"
    error: str | None = None
    frames: int = 0
    chunks: int = 0
    faces_detected: int = 0
    faces_swapped: int = 0
    tracks: int = 0
    seconds: float = 0.0
    """Wall seconds from the shot's first dispatched task to its published output."""
    stage_seconds: dict[str, float] = field(default_factory=dict)
    """Summed over chunks (actor-seconds), plus ``track``, ``plan`` and ``merge`` on the driver."""
    encoder: str | None = None
    colour: dict[str, str] | None = None
    """Video outputs: the colour tags written (primaries, transfer, matrix, range; FFmpeg's names)."""
    providers: dict[str, list[str]] = field(default_factory=dict)
    chunk_actors: list[str] = field(default_factory=list)
    timeline: list[dict[str, Any]] = field(default_factory=list, metadata={"append_only": True})
    """One record per finished call: kind (analyze/render), shot, chunk, actor, attempt, ok, and its run window
    (start, end) in seconds from the job's start as seen by the driver.  Only ever appended to, a record
    never changed once there (:class:`RedactedCopies` redacts each once)."""
    output_bytes: int = 0
    output_sha256: str | None = None
    content_sha256: str | None = None
    """The output's sha256 before signing: the same every run (``output_sha256`` is not, for MP4/MOV)."""
    credentials_url: str | None = None
    """The signed sidecar manifest of an MKV or image-sequence output."""
    chunks_rendered: int = 0
    """Chunks rendered by this run of the job (the rest were committed in the manifest by an earlier run)."""
    chunks_reused: int = 0
    chunks_recut: int = 0
    """Of ``chunks_reused``, those whose segments were gone, cut back out of the published output by stream
    copy (:mod:`cluster.state.recover`)."""
    analyses_run: int = 0
    faces_analysed: int = 0
    """Faces detected by the analyses this run ran (reused analyses not counted)."""
    faces_embedded: int = 0
    """Of those, the faces the recognizer embedded (``faces.embed``: per track or every frame)."""
    analyses_reused: int = 0
    frames_rendered: int = 0
    """Frames of the chunks this run rendered."""
    frames_decoded: int = 0
    """Frames decoded by this run's analyses and renders (``frames_reused``: renders fed from their
    analysis' decoded pictures instead, ``resources.decode_cache_mb``)."""
    frames_reused: int = 0
    reused: bool = False
    """True when the published output of an earlier run of the same job was kept as it is."""
    qc: ShotQC | FiledQC | None = None
    """The frames a supervisor should look at (None: QC did not run); summary.json has its ``to_dict()``.
    The driver keeps a :class:`~cluster.report.qcfile.FiledQC`: its per-frame series are in the shot's
    QC file (``series_url``), not here."""
    qc_failed: list[str] = field(default_factory=list)
    """QC reasons of ``qc.fail_on`` found in this shot: the job exits 1, the outputs stay published."""
    watermark: WatermarkSummary | None = None
    """With ``provenance.watermark``: which frames got the mark, and at what step."""
    fixes_rerendered: list[RerenderedChunk] = field(default_factory=list)
    """Chunks rendered again because the shot's fixes on their frames changed (``summary.json`` has the
    key only when there are some)."""
    fixes: list[FixMark] = field(default_factory=list)
    """The shot's ``fixes:`` (``summary.json`` has the key only when there are some)."""
    review: ReviewOutputs | None = None
    """With ``output.review``: the review media written (in summary.json only when set)."""

    @property
    def fps(self) -> float:
        return self.frames / self.seconds if self.seconds > 0 and self.status == "published" else 0.0

    def add_stages(self, stages: dict[str, float], prefix: str = "") -> None:
        for key, value in stages.items():
            name = f"{prefix}{key}"
            self.stage_seconds[name] = self.stage_seconds.get(name, 0.0) + float(value)

    def add_watermark(self, chunk: ChunkWatermark | None) -> None:
        """Add a chunk's watermark record (``FrameMarker.record()``; None: the job has no watermark)."""
        if chunk is None:
            return
        before = self.watermark.frame_ranges if self.watermark is not None else ()
        runs = sorted([list(r) for r in chunk.frames] + [list(r) for r in before])
        merged: list[list[int]] = []
        for first, last in runs:
            if merged and first <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], last)
            else:
                merged.append([first, last])
        self.watermark = WatermarkSummary(
            payload=chunk.payload,
            step=chunk.step,
            frames_marked=sum(last - first + 1 for first, last in merged),
            frame_ranges=tuple((first, last) for first, last in merged),
        )

    def reported_stages(self) -> dict[str, float]:
        """``stage_seconds`` as ``summary.json`` and the report give them: sorted, to 4 decimals."""
        return {k: round(v, 4) for k, v in sorted(self.stage_seconds.items())}

    def to_dict(self, *, qc_json: QcJson | None = None) -> dict[str, Any]:
        """The shot in ``summary.json``: its fields in order (``fixes``, ``fixes_rerendered`` and ``review``
        at the end, when there are some), ``fps`` after them; times as :func:`reported` gives them;
        its QC as ``qc_json`` gives it (:data:`QcJson`)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in ("fixes", "fixes_rerendered", "review"):
                continue
            if f.name == "timeline":
                out[f.name] = list(map(dict, value))  # flat records: a copy of each is a deep copy
            elif f.name == "qc" and value is not None and qc_json is not None:
                out[f.name] = qc_json(self.name, value)
            elif f.name in ("qc", "watermark"):
                out[f.name] = value.to_dict() if value is not None else None
            elif f.name == "stage_seconds":
                out[f.name] = self.reported_stages()
            elif f.name == "seconds":
                out[f.name] = reported(self.seconds)
            else:
                out[f.name] = _plain(value)
        if self.fixes:
            out["fixes"] = [f.to_dict() for f in self.fixes]
        if self.fixes_rerendered:
            out["fixes_rerendered"] = [c.to_dict() for c in self.fixes_rerendered]
        if self.review is not None:
            out["review"] = self.review.to_dict()
        out["fps"] = reported(self.fps)
        return out


def _plain(value: Any) -> Any:
    """A deep copy of plain data (what :func:`dataclasses.asdict` makes of a field that holds no dataclass)."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value)
    return copy.deepcopy(value)


SUMMARY_SCHEMA = 1  # summary.json's layout (docs/reference/summary-json.md)


@dataclass
class JobSummary:
    """The outcome of a job: every shot, plus job-wide timings."""

    job_id: str
    work_url: str
    shots: list[ShotSummary]
    actors: int = 0
    actor_info: list[ActorInfo] = field(default_factory=list)
    wall_seconds: float = 0.0
    setup_seconds: float = 0.0
    """From the start of the driver to warm actors (pack loaded, identities embedded)."""
    first_analysis_seconds: float | None = None
    first_chunk_seconds: float | None = None
    """From the start of the driver to the first rendered segment uploaded."""
    first_shot_seconds: float | None = None
    """Time to first published shot: from the start of the driver to the first shot this run published
    (None: it published none; outputs an earlier run published and this one kept do not count)."""
    warnings: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    """Job-wide failures besides the shots' (an audit record a cluster policy requires, not written)."""
    started_at_epoch: float = 0.0
    """Wall-clock time (``time.time()``) the driver started; the ``*_seconds`` offsets count from it."""
    lease: dict[str, Any] | None = None
    """The work area's lease: this driver's holder, and whose lease it took over and why (``Lease.record``)."""
    edit: dict[str, Any] | None = None
    """With ``edit:``, what the cut gave (``EditPlan.summary``): clips, skipped clips and why, clamped
    handles, whether ``output.timeline_url`` was written."""
    review_timeline_url: str | None = None
    """The playlist of the job's review movies (``output.review_timeline_url``), once written."""
    preempted_calls: int = 0
    """Analyses and renders handed to another actor because theirs was lost mid-call (its node
    ended: a reclaimed spot instance, a node killed at its drain deadline, a crash)."""
    drained_actors: int = 0
    """Actors retired because their node was being drained (a reclaim notice): they took no new work
    and were released once their calls were done."""
    storage_retries: int = 0
    """Object-store requests sent again and bodies read again (:mod:`pipeline.store.retries`): the driver's
    and those the actors' results reported (a call that failed takes its count with it)."""
    marking: dict[str, Any] | None = None
    """How the outputs are marked as AI-made (:meth:`cluster.checks.provenance.JobProvenance.marking`)."""

    @property
    def ok(self) -> bool:
        return not self.failures and all(
            s.status in ("published", "skipped") and not s.qc_failed for s in self.shots
        )

    @property
    def frames(self) -> int:
        return sum(s.frames for s in self.shots if s.status == "published")

    @property
    def fps(self) -> float:
        return self.frames / self.wall_seconds if self.wall_seconds > 0 else 0.0

    @property
    def decode_calls_per_frame(self) -> float | None:
        """Decodes (analyses + renders) per rendered frame: 2.0 without reuse, 1.0 when every render reused."""
        rendered = sum(s.frames_rendered for s in self.shots)
        return sum(s.frames_decoded for s in self.shots) / rendered if rendered else None

    def redacted(self) -> JobSummary:
        """A copy, every credential-looking string redacted as :func:`~pipeline.store.redact.redact` does
        (its ``to_dict()`` is ``redact(self.to_dict())``): for the report, built while the job goes on."""
        return RedactedCopies().copy(self)

    def to_dict(self, *, qc_json: QcJson | None = None) -> dict[str, Any]:
        """``summary.json``: the job's figures and its shots (their QC as ``qc_json`` gives it)."""
        return {**self.job_dict(), "shots": [s.to_dict(qc_json=qc_json) for s in self.shots]}

    def job_dict(self) -> dict[str, Any]:
        """:meth:`to_dict` without ``shots`` (the job's own figures: the report's ``job``)."""
        out = {
            "schema_version": SUMMARY_SCHEMA,
            "job_id": self.job_id,
            "ok": self.ok,
            "work_url": self.work_url,
            "actors": self.actors,
            "frames": self.frames,
            "fps": reported(self.fps),
            "wall_seconds": reported(self.wall_seconds),
            "setup_seconds": reported(self.setup_seconds),
            "first_analysis_seconds": reported(self.first_analysis_seconds),
            "first_chunk_seconds": reported(self.first_chunk_seconds),
            "decode_calls_per_frame": reported(self.decode_calls_per_frame),
            "first_shot_seconds": reported(self.first_shot_seconds),
            "storage_retries": self.storage_retries,
            "started_at_epoch": self.started_at_epoch,
            "warnings": self.warnings,
            "failures": self.failures,
            "lease": self.lease,
            "preempted_calls": self.preempted_calls,
            "drained_actors": self.drained_actors,
            "actor_info": [a.to_dict() for a in self.actor_info],
        }
        named = {"edit": self.edit, "review_timeline_url": self.review_timeline_url, "marking": self.marking}
        return out | {key: value for key, value in named.items() if value is not None}

    def table(self) -> str:
        """A human-readable table, one line per shot, then the job line."""
        lines = [
            f"{'shot':<20} {'status':<10} {'frames':>7} {'faces':>7} {'fps':>7} {'seconds':>8}  encoder / providers",
        ]
        for s in self.shots:
            providers = ",".join(sorted({p for ps in s.providers.values() for p in ps[:1]}))
            lines.append(
                f"{s.name[:20]:<20} {s.status:<10} {s.frames:>7} {s.faces_swapped:>7} {s.fps:>7.1f} "
                f"{s.seconds:>8.1f}  {s.encoder or '-'} / {providers or '-'}"
            )
            if s.stage_seconds:
                stages = "  ".join(
                    f"{k}={v:.1f}s" for k, v in sorted(s.stage_seconds.items()) if "." not in k
                )
                lines.append(f"{'':<20} stages: {stages}")
            if s.chunks_reused or s.analyses_reused or s.reused:
                lines.append(
                    f"{'':<20} resumed: {'output kept; ' if s.reused else ''}chunks rendered {s.chunks_rendered}, "
                    f"reused {s.chunks_reused}; analyses run {s.analyses_run}, reused {s.analyses_reused}"
                )
            if s.error:
                lines.append(f"{'':<20} error: {s.error}")
            if s.watermark is not None:
                w = s.watermark
                lines.append(
                    f"{'':<20} watermark {w.payload} (step {w.step:g}): {w.frames_marked} frames marked"
                )
            if s.content_sha256 and s.content_sha256 != s.output_sha256:
                lines.append(f"{'':<20} content sha256 {s.content_sha256} (before its Content Credentials)")
            if s.credentials_url:
                lines.append(f"{'':<20} Content Credentials: {s.credentials_url}")
            if s.qc_failed:
                lines.append(f"{'':<20} QC failed (qc.fail_on): {', '.join(s.qc_failed)}; output published")
        if self.marking is not None:
            lines.append(marking_line(self.marking))
        lines.extend(f"job failure: {failure}" for failure in self.failures)
        first = f"{self.first_chunk_seconds:.1f}s" if self.first_chunk_seconds is not None else "-"
        shot = f"{self.first_shot_seconds:.1f}s" if self.first_shot_seconds is not None else "-"
        lines.append(
            f"job {self.job_id}: {'OK' if self.ok else 'FAILED'}  {self.frames} frames in {self.wall_seconds:.1f}s "
            f"({self.fps:.1f} fps) on {self.actors} actor(s); set-up {self.setup_seconds:.1f}s; first chunk {first}; "
            f"first shot {shot}"
        )
        return "\n".join(lines)


@dataclass
class _Appended:
    """What :class:`RedactedCopies` knows of an append-only list: the list (held, so its id stays its own),
    how many of its records were redacted, the last of them, and their redacted copies."""

    records: list[Any]
    count: int
    last: Any
    redacted: list[Any]


class RedactedCopies:
    """Redacted copies of a summary taken again and again while its job runs (every report's snapshot,
    on the driver's event loop), each for the cost of what changed since the copy before.

    A copy is what :meth:`JobSummary.redacted` gives (``copy.to_dict() == redact(summary.to_dict())``);
    the copies share what cannot change:

    * each distinct string is redacted once (:class:`~pipeline.store.redact.Redactor`);
    * a frozen dataclass (actor info, QC, watermark, fixes, review media) is taken as immutable, what it
      holds included: each instance is redacted once (a field marked ``redacted`` in its metadata, e.g.
      a filed QC's chart, holds text redacted already: taken as it is);
    * a list field marked ``append_only`` in its metadata (a shot's ``timeline``) only ever gets records
      appended, none changed once there: only the records appended since the copy before are redacted
      (the list is redacted again whole when it got shorter or its last record seen is not there).

    The rest (the shots' counters, dicts and other lists) is copied and redacted every time: the small
    part.  What the copy before used and this one did not is forgotten.
    """

    def __init__(self) -> None:
        self._redact = Redactor()
        self._frozen: dict[int, tuple[Any, Any]] = {}
        """id(instance) -> (the instance, held so its id stays its own; its redacted copy)."""
        self._appended: dict[int, _Appended] = {}
        self._seen_frozen: dict[int, tuple[Any, Any]] = {}
        self._seen_appended: dict[int, _Appended] = {}

    def copy(self, summary: JobSummary) -> JobSummary:
        """A redacted copy of ``summary``, as :meth:`JobSummary.redacted` gives."""
        self._seen_frozen, self._seen_appended = {}, {}
        out = self._value(summary)
        self._frozen, self._appended = self._seen_frozen, self._seen_appended
        return out

    def value[T](self, value: T) -> T:
        """A redacted copy of one value (a QC, a shot's fixes, a string) as a summary's copy has it."""
        return self._value(value)

    def _value[T](self, value: T) -> T:
        """``value`` with its strings redacted: dataclasses rebuilt field by field, lists and tuples item
        by item, anything else (strings, plain mappings of data, numbers) as :func:`redact` does."""
        if isinstance(value, str):
            return self._redact.text(value)  # type: ignore[return-value]
        if value is None or isinstance(value, bool | int | float):
            return value
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            if not type(value).__dataclass_params__.frozen:  # type: ignore[attr-defined]
                return self._dataclass(value)
            known = self._frozen.get(id(value)) or self._seen_frozen.get(id(value))
            if known is None or known[0] is not value:
                known = (value, self._dataclass(value))
            self._seen_frozen[id(value)] = known
            return known[1]
        if isinstance(value, list | tuple) and plain_numbers(value):
            return type(value)(value)  # e.g. a QC series: nothing to redact
        if isinstance(value, list):
            return [self._value(v) for v in value]  # type: ignore[return-value]
        if isinstance(value, tuple):
            return type(value)(self._value(v) for v in value)
        return self._redact(value)

    def _dataclass[T](self, value: T) -> T:
        fields = {}
        for f in dataclasses.fields(value):  # type: ignore[arg-type]
            if f.init:
                item = getattr(value, f.name)
                if f.metadata.get("redacted"):
                    fields[f.name] = item
                    continue
                appended = f.metadata.get("append_only") and isinstance(item, list)
                fields[f.name] = self._appended_list(item) if appended else self._value(item)
        return dataclasses.replace(value, **fields)  # type: ignore[type-var]

    def _appended_list(self, records: list[Any]) -> list[Any]:
        known = self._appended.get(id(records))
        if (
            known is None
            or known.records is not records
            or len(records) < known.count
            or (known.count and records[known.count - 1] is not known.last)
        ):
            known = _Appended(records, 0, None, [])
        if len(records) > known.count:
            known.redacted.extend(self._value(r) for r in records[known.count :])
            known.count, known.last = len(records), records[-1]
        self._seen_appended[id(records)] = known
        return list(known.redacted)
