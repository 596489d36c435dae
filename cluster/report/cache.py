"""What the driver's rewrites of the report share: each shot's QC as JSON text and as its strip chart.

A shot's QC reaches the driver once, when the shot is done: :func:`file_qc` writes it whole to the
shot's QC file, draws its strip chart, and gives what the driver keeps of it (no per-frame series).

A running job's report is rewritten every few seconds, and ``summary.json`` once at the end, but a
shot's QC (hundreds of kilobytes of per-frame series) is set once, when the shot is done, and not
changed afterwards.  A :class:`ReportCache` encodes it, and draws its strip chart, once per QC
object and gives the same text to every rewrite that follows.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cluster.report.build import Encoded, json_text
from cluster.report.qc import strip_chart
from cluster.report.qcfile import FiledQC, FrameNumbers
from cluster.report.summary import RedactedCopies
from pipeline.store import storage

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
        self._lock = threading.Lock()

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
