"""The data of the job report (``report.json``): per-shot warnings, stage totals, the timeline.

Built from the :class:`~cluster.report.summary.JobSummary` (read by attribute) and the
driver's record of which actor ran which chunk when.  Every pass over the timeline is
linear in its length, so an interim report of a feature-length job (tens of thousands
of entries) is rewritten in well under a second.
"""

from __future__ import annotations

import bisect
import dataclasses
import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cluster.report.links import MediaLink, media_link
from cluster.report.qcfile import FiledQC, FrameNumbers, frame_numbers
from cluster.report.summary import JobSummary, QcJson, ShotSummary
from pipeline.thumbnails import Thumb

if TYPE_CHECKING:
    from pipeline.qc.analyze import ShotQC
    from pipeline.qc.records import Flag

REPORT_SCHEMA = 1
CPU_PROVIDER = "CPUExecutionProvider"
REVIEW_ROWS = 100
"""At most this many flags per shot in the report's review list (the worst; all stay in ``qc``)."""


@dataclass(frozen=True)
class TimelineEntry:
    """One piece of work an actor did; ``start``/``end`` in seconds from the job's start (3 decimals)."""

    actor: str
    shot: str
    chunk: int
    kind: str
    """``analyze`` or ``render``."""
    start: float
    end: float
    ok: bool
    """False when the attempt failed (lost actor, error)."""
    attempt: int

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> TimelineEntry:
        """An entry of the driver's timeline (a mapping; missing keys take defaults, ``ok`` True)."""
        start = float(raw.get("start", 0.0))
        end = max(start, float(raw.get("end", start)))
        return cls(
            actor=str(raw.get("actor") or "?"),
            shot=str(raw.get("shot", "")),
            chunk=int(raw.get("chunk", -1)),
            kind=str(raw.get("kind", "render")),
            start=round(start, 3),
            end=round(end, 3),
            ok=bool(raw.get("ok", True)),
            attempt=int(raw.get("attempt", 1)),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "actor": self.actor,
            "shot": self.shot,
            "chunk": self.chunk,
            "kind": self.kind,
            "start": self.start,
            "end": self.end,
            "ok": self.ok,
            "attempt": self.attempt,
        }


@dataclass(frozen=True)
class ReviewRow:
    """A flag of a shot's review list, with the thumbnail to show beside it (None: none)."""

    flag: Flag
    thumbnail: int | None

    def to_dict(self) -> dict[str, Any]:
        return {**self.flag.to_dict(), "thumbnail": self.thumbnail}


@dataclass(frozen=True)
class NoteChoices:
    """What the review section's notes offer: the job's identities (another identity for a track), and
    each shot's frame size in pixels (width, height), which scales a box drawn on a thumbnail to the plate."""

    identities: tuple[str, ...] = ()
    frame_sizes: Mapping[str, tuple[int, int]] = dataclasses.field(default_factory=dict)
    rotations: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """Shot -> its display rotation in degrees (``VideoInfo.rotation``): its thumbnails are shown turned,
    a box drawn on one is turned back to the plate's stored pixels."""


@dataclass(frozen=True)
class ShotReport:
    """A shot in the report: its summary and what the report adds to it."""

    summary: ShotSummary
    retries: int
    warnings: list[str]
    thumbnails: list[int]
    """Source positions of the shot's before/after thumbnails."""
    review: list[ReviewRow]
    frame_size: tuple[int, int] | None = None
    """The plate's frame size in pixels (None: not known, no box can be drawn on its thumbnails)."""
    rotation: int = 0
    """The plate's display rotation in degrees (its thumbnails are shown turned by it)."""
    qc_file: MediaLink | None = None
    """How the report links the shot's QC file (``qc.series_url``; None: its QC has none)."""

    def to_dict(self, *, qc_json: QcJson | None = None) -> dict[str, Any]:
        """The shot's summary and the report's additions; ``review`` is the review list here, so the
        summary's review media (``summary.json``'s ``review``) are ``review_media``; ``qc_file``: the
        link to the shot's QC file relative to the report (None: not linked, its URL is in ``qc``)."""
        out = {
            **self.summary.to_dict(qc_json=qc_json),
            "retries": self.retries,
            "warnings": self.warnings,
            "thumbnails": self.thumbnails,
            "review": [r.to_dict() for r in self.review],
        } | ({"frame_size": list(self.frame_size)} if self.frame_size is not None else {})
        if self.summary.review is not None:
            out["review_media"] = self.summary.review.to_dict()
        if self.qc_file is not None:
            out["qc_file"] = self.qc_file.href
        return out


@dataclass(frozen=True)
class JobReport:
    """The report of a job (``report.json`` is :meth:`to_dict`)."""

    summary: JobSummary
    generated_at: str
    running: bool
    """An interim report (the page then reloads itself)."""
    stage_seconds: dict[str, float]
    """Job-wide stage totals, sorted, to 4 decimals."""
    retries: int
    shots: list[ShotReport]
    timeline: list[TimelineEntry]
    identities: tuple[str, ...] = ()
    """The job's identities: the choices of a note's "another identity"."""

    def to_dict(self, *, qc_json: QcJson | None = None) -> dict[str, Any]:
        """``report.json`` (the shots' QC as ``qc_json`` gives it: :data:`~cluster.report.summary.QcJson`)."""
        return {
            "schema": REPORT_SCHEMA,
            "generated_at": self.generated_at,
            "running": self.running,
            "job": self.summary.job_dict(),
            "stage_seconds": self.stage_seconds,
            "retries": self.retries,
            "shots": [s.to_dict(qc_json=qc_json) for s in self.shots],
            "timeline": [e.to_dict() for e in self.timeline],
        } | ({"identities": list(self.identities)} if self.identities else {})


ReviewRows = Callable[[str, "ShotQC | FiledQC | None", Sequence[int]], list[ReviewRow]]
"""Gives a shot's review rows as :func:`review_rows` does (given the shot's name, its QC and thumbnail
positions): the driver's rewrites make each once (:meth:`cluster.report.cache.ReportCache.review_rows`)."""

TimelineEntries = Callable[[Sequence[Mapping[str, Any]]], list[TimelineEntry]]
"""Gives the entries of the driver's timeline, :meth:`TimelineEntry.of` each: the driver's rewrites read
only the entries added since the rewrite before (:meth:`cluster.report.cache.ReportCache.timeline`)."""


def timeline_entries(timeline: Sequence[Mapping[str, Any]]) -> list[TimelineEntry]:
    """Each entry of the driver's timeline read (:meth:`TimelineEntry.of`)."""
    return [TimelineEntry.of(e) for e in timeline]


def report_data(
    summary: JobSummary,
    *,
    thumbs: Mapping[str, Sequence[Thumb]] | None = None,
    timeline: Sequence[Mapping[str, Any]] = (),
    stage_seconds: Mapping[str, float] | None = None,
    retries: Mapping[str, int] | None = None,
    running: bool = False,
    generated_at: dt.datetime | None = None,
    notes: NoteChoices | None = None,
    review: ReviewRows | None = None,
    entries_of: TimelineEntries | None = None,
) -> JobReport:
    """The report of a job (``report.json`` is its ``to_dict()``).

    ``thumbs`` maps shot name to its thumbnails; ``timeline`` holds the driver's entries
    (:meth:`TimelineEntry.of`); ``stage_seconds`` overrides the job-wide stage totals (by
    default the shots' top-level stages summed); ``retries`` counts retried work items per
    shot; ``running`` marks an interim report (the page then reloads itself); ``notes``: what the review
    section's notes offer (:class:`NoteChoices`); ``review`` and ``entries_of``: what makes each shot's
    review rows and reads the timeline (:data:`ReviewRows`, :data:`TimelineEntries`; by default
    :func:`review_rows` and :func:`timeline_entries`).
    """
    notes = notes or NoteChoices()
    given = set(retries or {})
    retries = dict(retries or {})
    when = (generated_at or dt.datetime.now(dt.UTC)).isoformat(timespec="seconds")
    entries = (entries_of or timeline_entries)(timeline)
    rows_of = review or _review_rows_of
    failed: dict[str, list[TimelineEntry]] = {}
    for e in entries:
        if not e.ok:
            failed.setdefault(e.shot, []).append(e)
            # Without counts from the dispatcher, each failed attempt in the timeline was retried.
            if e.shot not in given:
                retries[e.shot] = retries.get(e.shot, 0) + 1
    cpu_fallback = any(_is_cpu_fallback(w) for w in summary.warnings)
    shots = []
    for shot in summary.shots:
        shot_retries = int(retries.get(shot.name, 0))
        thumbnails = [t.frame for t in (thumbs or {}).get(shot.name, ())]
        shots.append(
            ShotReport(
                summary=shot,
                retries=shot_retries,
                warnings=_shot_warnings(shot, shot_retries, failed.get(shot.name, []), cpu_fallback),
                thumbnails=thumbnails,
                review=rows_of(shot.name, shot.qc, thumbnails),
                frame_size=notes.frame_sizes.get(shot.name),
                rotation=int(notes.rotations.get(shot.name, 0)),
                qc_file=(
                    media_link(shot.qc.series_url, summary.work_url) if isinstance(shot.qc, FiledQC) else None
                ),
            )
        )
    stages = dict(stage_seconds) if stage_seconds is not None else _total_stages(summary.shots)
    return JobReport(
        summary=summary,
        generated_at=when,
        running=running,
        stage_seconds={k: round(float(v), 4) for k, v in sorted(stages.items())},
        retries=sum(s.retries for s in shots),
        shots=shots,
        timeline=entries,
        identities=tuple(notes.identities),
    )


def review_rows(qc: ShotQC | FiledQC | None, thumbnails: Sequence[int]) -> list[ReviewRow]:
    """The worst flags of a shot's QC, each with the thumbnail to show.

    Flags carry frame numbers, thumbnails source positions: frame ``numbers[i]`` is position
    ``first + i``.  ``thumbnail`` is the thumbnail's position inside the flag's frames nearest
    its worst frame, or None.
    """
    if qc is None:
        return []
    flags = qc.flags[:REVIEW_ROWS]
    wanted = {int(n) for f in flags for n in (f.first, f.last, f.extra.get("peak", f.first))}
    index = _positions(frame_numbers(qc), wanted)
    available = sorted(int(t) for t in thumbnails)
    rows = []
    for flag in flags:
        a, b = index.get(int(flag.first)), index.get(int(flag.last))
        peak = index.get(int(flag.extra.get("peak", flag.first)), a)
        thumb = None
        if a is not None and b is not None and peak is not None:
            inside = [p for p in available if qc.first + a <= p <= qc.first + b]
            thumb = min(inside, key=lambda p: abs(p - qc.first - peak)) if inside else None
        rows.append(ReviewRow(flag, thumb))
    return rows


def _review_rows_of(shot: str, qc: ShotQC | FiledQC | None, thumbnails: Sequence[int]) -> list[ReviewRow]:
    return review_rows(qc, thumbnails)


def _positions(numbers: Sequence[int], wanted: set[int]) -> dict[int, int]:
    """Where each of ``wanted`` is in ``numbers`` (a shot's analysed frame numbers, increasing), those that
    are there: a few flags' frames looked up by bisection, not an index of the shot's every frame."""
    if isinstance(numbers, FrameNumbers):
        found = {number: numbers.position(number) for number in wanted}
        return {number: i for number, i in found.items() if i is not None}
    out = {}
    for number in wanted:
        i = bisect.bisect_left(numbers, number)
        if i < len(numbers) and int(numbers[i]) == number:
            out[number] = i
    return out


def actor_busy_ratios(timeline: Sequence[Mapping[str, Any]], until: float | None = None) -> dict[str, float]:
    """Share of time each actor spent working, from its first piece of work to ``until``.

    Overlapping work on one actor (several items in flight) counts once.
    ``until`` defaults to the last end in the timeline.  Feed it to
    ``JobMetrics.actor_busy``; the report shows it beside each actor's lane.
    """
    return busy_ratios([TimelineEntry.of(raw) for raw in timeline], until)


def busy_ratios(entries: Sequence[TimelineEntry], until: float | None = None) -> dict[str, float]:
    """:func:`actor_busy_ratios` of entries already read."""
    by_actor: dict[str, list[tuple[float, float]]] = {}
    for e in entries:
        by_actor.setdefault(e.actor, []).append((e.start, e.end))
    if not by_actor:
        return {}
    end = until if until is not None else max(b for spans in by_actor.values() for _, b in spans)
    ratios = {}
    for actor, spans in by_actor.items():
        spans.sort()
        first = spans[0][0]
        busy, cur_a, cur_b = 0.0, spans[0][0], spans[0][1]
        for a, b in spans[1:]:
            if a > cur_b:
                busy += cur_b - cur_a
                cur_a, cur_b = a, b
            else:
                cur_b = max(cur_b, b)
        busy += min(cur_b, end) - min(cur_a, end)
        window = end - first
        ratios[actor] = min(1.0, busy / window) if window > 0 else 0.0
    return ratios


def _is_cpu_fallback(warning: str) -> bool:
    text = warning.lower()
    return "did not start" in text or "cpu fallback" in text or "not available" in text


def _cpu_only_roles(providers: Mapping[str, Sequence[str]]) -> list[str]:
    return sorted(role for role, ps in providers.items() if ps and ps[0] == CPU_PROVIDER)


def _shot_warnings(
    shot: ShotSummary, retries: int, failed_entries: Sequence[TimelineEntry], cpu_fallback: bool
) -> list[str]:
    out: list[str] = []
    if shot.status == "failed":
        out.append(f"failed: {shot.error or 'unknown error'}")
    if shot.status == "published":
        if shot.faces_detected == 0:
            out.append("faces not found: no face was detected in any frame")
        elif shot.faces_swapped == 0:
            out.append("no face was swapped (faces were found but none matched a target identity)")
    cpu_roles = _cpu_only_roles(shot.providers)
    if cpu_fallback and cpu_roles:
        out.append(f"CPU fallback: {', '.join(cpu_roles)} ran on the CPU")
    for e in failed_entries:
        out.append(f"{e.kind} of chunk {e.chunk} failed on {e.actor} (attempt {e.attempt})")
    if retries > 0:
        out.append(f"{retries} retried chunk(s)")
    return out


def _total_stages(shots: Sequence[ShotSummary]) -> dict[str, float]:
    total: dict[str, float] = {}
    for shot in shots:
        for key, value in shot.reported_stages().items():
            if "." in key:  # sub-stages are already inside their parent
                continue
            total[key] = total.get(key, 0.0) + float(value)
    return total
