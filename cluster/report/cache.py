"""What the driver's rewrites of the report share: each shot's QC as JSON text and as its strip chart.

A shot's QC reaches the driver once, when the shot is done: :func:`file_qc` writes it whole to the
shot's QC file, draws its strip chart, and gives what the driver keeps of it (no per-frame series).

A running job's report is rewritten every few seconds, and ``summary.json`` once at the end, but a
shot's QC (hundreds of kilobytes of per-frame series) is set once, when the shot is done, and not
changed afterwards.  A :class:`ReportCache` encodes it, and draws its strip chart, once per QC
object and gives the same text to every rewrite that follows.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cluster.report.build import Encoded, json_text
from cluster.report.data import (
    JobReport,
    NoteChoices,
    ReviewRow,
    TimelineEntry,
    report_data,
    review_rows,
    timeline_entries,
)
from cluster.report.html import render_html
from cluster.report.qc import strip_chart
from cluster.report.qcfile import FiledQC, FrameNumbers
from cluster.report.summary import JobSummary, RedactedCopies
from pipeline.store import storage
from pipeline.thumbnails import Thumb

if TYPE_CHECKING:
    from cluster.report.summary import FixMark
    from pipeline.qc.analyze import ShotQC


def file_qc(qc: ShotQC, *, url: str, name: str, fixes: Sequence[FixMark] = ()) -> FiledQC:
    """Write ``qc`` whole to ``url`` (its ``to_dict()``, per-frame series included, credentials redacted
    as :func:`~pipeline.store.redact.redact` does), draw its strip chart as the report shows it (of the
    redacted QC, shot name ``name`` and ``fixes``), and give what the driver keeps of it: a
    :class:`~cluster.report.qcfile.FiledQC`, whose ``series_url`` is ``url``.

    A :class:`~pipeline.errors.RecastError` when the file cannot be written."""
    redactor = RedactedCopies()
    shown = redactor.value(qc)
    storage.write_bytes(url, json_text(shown.to_dict()).encode("utf-8"))
    return FiledQC(
        shot=qc.shot,
        first=qc.first,
        flags=qc.flags,
        numbers=FrameNumbers.of(qc.series.numbers),
        tracks=qc.tracks,
        boundaries=qc.boundaries,
        series_url=url,
        chart=strip_chart(redactor.value(name), shown, redactor.value(list(fixes))),
    )


def cached_report(
    cache: ReportCache,
    summary: JobSummary,
    *,
    thumbs: Mapping[str, Sequence[Thumb]],
    timeline: Sequence[Mapping[str, Any]],
    retries: Mapping[str, int] | None = None,
    running: bool,
    notes: NoteChoices | None = None,
    generated_at: dt.datetime | None = None,
) -> tuple[JobReport, dict[str, Any], str]:
    """The report as the driver writes it, by way of ``cache``: its data, ``report.json``'s value (each
    shot's entry an :class:`~cluster.report.build.Encoded`) and ``report.html``; the same texts as
    :func:`~cluster.report.build.build_report` gives of the same arguments (what was not changed since
    the rewrite before is taken from ``cache``: shots' QC, review rows, cards and entries, the timeline
    read)."""
    report = report_data(
        summary,
        thumbs=thumbs,
        timeline=timeline,
        retries=retries,
        running=running,
        generated_at=generated_at,
        notes=notes,
        review=cache.review_rows,
        entries_of=cache.timeline,
    )
    data = report.to_dict(qc_json=cache.qc_json)
    data["shots"] = [cache.shot_json(shot["name"], shot) for shot in data["shots"]]
    return report, data, render_html(report, thumbs, charts=cache.strip_chart, cards=cache.card)


@dataclass
class _ReadTimeline:
    """The timeline's entries read so far, and the last raw entry they were read of (held: its identity)."""

    entries: list[TimelineEntry]
    last: list[Mapping[str, Any]]


class ReportCache:
    """Per shot (by name): its QC's JSON text (:meth:`qc_json`) and strip chart (:meth:`strip_chart`),
    each kept with the QC object it was made of.  Another object for the shot (its QC changed, or the
    shot's name is another's now) is encoded, or drawn, again.

    The QC objects given must not be changed once given (a :class:`~pipeline.qc.analyze.ShotQC` is
    frozen, its series are not changed once made), and must be those the report shows: redacted
    already (:class:`~cluster.report.summary.RedactedCopies` gives the same copy of a QC while the
    QC is the same), so what is kept is redacted.  One entry per shot: what a cache holds is at most
    a text and a chart per shot of the job.  Safe to use from the report's thread and the driver's.
    """

    def __init__(self) -> None:
        self._json: dict[str, tuple[ShotQC | FiledQC, Encoded]] = {}
        self._charts: dict[str, tuple[ShotQC, tuple[FixMark, ...], str]] = {}
        self._rows: dict[str, tuple[ShotQC | FiledQC, tuple[int, ...], list[ReviewRow]]] = {}
        self._cards: dict[str, tuple[tuple[Any, ...], str]] = {}
        self._shots: dict[str, tuple[dict[str, Any], Encoded]] = {}
        self._timeline = _ReadTimeline([], [])
        self._lock = threading.Lock()

    def review_rows(
        self, shot: str, qc: ShotQC | FiledQC | None, thumbnails: Sequence[int]
    ) -> list[ReviewRow]:
        """:func:`~cluster.report.data.review_rows` of the shot, made again only when its QC (another
        object) or its thumbnails changed (a :data:`~cluster.report.data.ReviewRows`)."""
        if qc is None:
            return []
        frames = tuple(thumbnails)
        known = self._rows.get(shot)
        if known is None or known[0] is not qc or known[1] != frames:
            known = (qc, frames, review_rows(qc, frames))
            with self._lock:
                self._rows[shot] = known
        return known[2]

    def shot_json(self, shot: str, value: dict[str, Any]) -> Encoded:
        """The shot's entry of ``report.json`` (``value``, a non-empty object) as text, encoded again only
        when it is not equal to the entry encoded before: a done shot's entry (its timeline, its review
        rows) is the same in every rewrite that follows."""
        known = self._shots.get(shot)
        if known is None or known[0] != value:
            known = (value, Encoded(lambda: value))
            with self._lock:
                self._shots[shot] = known
        return known[1]

    def card(self, shot: str, key: tuple[Any, ...], draw: Callable[[], str]) -> str:
        """The shot's card in "Frames to review", drawn again only when ``key`` (what it is drawn of)
        is not equal to the key it was drawn of (a :data:`~cluster.report.qc.ShotCards`)."""
        known = self._cards.get(shot)
        if known is None or known[0] != key:
            known = (key, draw())
            with self._lock:
                self._cards[shot] = known
        return known[1]

    def timeline(self, timeline: Sequence[Mapping[str, Any]]) -> list[TimelineEntry]:
        """The driver's timeline read (:func:`~cluster.report.data.timeline_entries`), only its entries
        added since the call before read: the timeline is append-only, its entries (the same objects
        from one rewrite to the next) never changed once there.  Read whole again when it is not the
        timeline seen before with entries added (a :data:`~cluster.report.data.TimelineEntries`)."""
        with self._lock:
            known = self._timeline
            count = len(known.entries)
            if len(timeline) < count or (count and timeline[count - 1] is not known.last[0]):
                known, count = _ReadTimeline([], []), 0
            if len(timeline) > count:
                known.entries.extend(timeline_entries(timeline[count:]))
                known.last[:] = [timeline[-1]]
            self._timeline = known
            return list(known.entries)

    def qc_json(self, shot: str, qc: ShotQC | FiledQC) -> Encoded:
        """``qc.to_dict()`` as :func:`~cluster.report.build.json_text` writes it, encoded once
        (a :data:`~cluster.report.summary.QcJson`)."""
        with self._lock:
            known = self._json.get(shot)
            if known is None or known[0] is not qc:
                known = self._json[shot] = (qc, Encoded(qc.to_dict))
            return known[1]

    def strip_chart(self, shot: str, qc: ShotQC | FiledQC, fixes: Sequence[FixMark] = ()) -> str:
        """:func:`cluster.report.qc.strip_chart` of the shot, drawn again only when its QC or its fixes
        changed (a :data:`~cluster.report.qc.StripCharts`; a filed QC's is the chart it keeps)."""
        if isinstance(qc, FiledQC):
            return qc.chart
        marks = tuple(fixes)
        known = self._charts.get(shot)
        if known is None or known[0] is not qc or known[1] != marks:
            known = (qc, marks, strip_chart(shot, qc, marks))
            with self._lock:
                self._charts[shot] = known
        return known[2]
