"""The report's QC section: per shot, the frames to review and a strip chart of the shot.

Reads each shot's :class:`~pipeline.qc.analyze.ShotQC` (its series as the shot's QC file has
them, rounded), or the :class:`~cluster.report.qcfile.FiledQC` the driver keeps of it (its chart drawn
already, a link to its QC file) and ``review`` rows (from :func:`cluster.report.data.review_rows`).  Like the
rest of the page: inline SVG, ``data:`` images; the shot's fixes are marked on its strip chart,
and each card has the notes form of :mod:`cluster.report.notes` (its only script).
"""

from __future__ import annotations

import base64
import functools
import html
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cluster.report.notes import fixes_block, note_form
from cluster.report.qcfile import FiledQC, frame_numbers
from pipeline.thumbnails import Thumb

if TYPE_CHECKING:
    from cluster.report.data import ReviewRow, ShotReport
    from cluster.report.summary import FixMark
    from pipeline.qc.analyze import ShotQC

CSS = """
.qc h3{margin-top:4px}
.qc .counts span{display:inline-block;margin-right:12px;font-size:12px}
.qc table img{display:block;max-width:160px;height:auto;border:1px solid #d9dde2}
.qc .pair{display:flex;gap:4px}
.sev{display:inline-block;min-width:38px;text-align:center;border-radius:8px;color:#fff;font-size:12px;font-weight:600}
"""

STATE_COLOURS = {
    "replaced": "#59a14f",
    "bridged": "#edc948",
    "hidden": "#bab0ac",
    "unreplaced": "#d62728",
}
LINE_COLOUR = "#2f6fa8"
FLAG_COLOUR = "#d62728"
FIX_COLOUR = "#6a1b9a"


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _data_uri(jpeg: bytes) -> str:
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")


def _severity_colour(severity: float) -> str:
    return "#c62828" if severity >= 0.8 else "#ef6c00" if severity >= 0.5 else "#757575"


def has_review(shot: ShotReport) -> bool:
    """Whether the shot gets a card in "Frames to review": it has QC, fixes, or chunks rendered again."""
    return bool(shot.summary.qc or shot.summary.fixes or shot.summary.fixes_rerendered)


StripCharts = Callable[[str, "ShotQC | FiledQC", Sequence["FixMark"]], str]
"""Gives a shot's strip chart as :func:`strip_chart` does (given its name, QC and fixes): the driver's
rewrites draw each once (:meth:`cluster.report.cache.ReportCache.strip_chart`)."""


def _chart(name: str, qc: ShotQC | FiledQC, fixes: Sequence[FixMark] = ()) -> str:
    """:func:`strip_chart`, or the chart a filed QC keeps (drawn when its series were filed)."""
    return qc.chart if isinstance(qc, FiledQC) else strip_chart(name, qc, fixes)


ShotCards = Callable[[str, tuple[Any, ...], Callable[[], str]], str]
"""Gives a shot's card in "Frames to review": given the shot's name, what the card is drawn of (compared
with ``==``, its objects mostly the same from one rewrite to the next) and what draws it; the driver's
rewrites draw a card again only when what it is drawn of changed
(:meth:`cluster.report.cache.ReportCache.card`)."""


def _draw(shot: str, key: tuple[Any, ...], draw: Callable[[], str]) -> str:
    return draw()


def qc_sections(
    shots: Sequence[ShotReport],
    thumbs: Mapping[str, Sequence[Thumb]],
    identities: Sequence[str] = (),
    *,
    charts: StripCharts | None = None,
    cards: ShotCards | None = None,
) -> str:
    """One card per shot with QC or fixes (:func:`has_review`); a line saying so when none has (each
    shot's strip chart as ``charts`` gives it, by default :func:`strip_chart`; each card as ``cards``
    gives it, by default drawn)."""
    chart, card = charts or _chart, cards or _draw
    out = []
    for i, shot in enumerate(shots):
        if not has_review(shot):
            continue
        summary = shot.summary
        own = tuple(thumbs.get(summary.name, ()))
        key = (
            i, summary.qc, tuple(shot.review), tuple(summary.fixes), tuple(summary.fixes_rerendered),
            shot.frame_size, shot.rotation, shot.qc_file, own, tuple(identities),
        )  # fmt: skip
        draw = functools.partial(_shot_card, i, shot, {t.frame: t for t in own}, identities, chart)
        out.append(card(summary.name, key, draw))
    return "".join(out) or '<div class="card">No QC in this report.</div>'


def _shot_card(
    index: int,
    shot: ShotReport,
    thumbs: Mapping[int, Thumb],
    identities: Sequence[str],
    charts: StripCharts,
) -> str:
    name, qc = shot.summary.name, shot.summary.qc
    fixes = fixes_block(shot.summary.fixes, shot.summary.fixes_rerendered)
    form = note_form(identities)
    if qc is None:
        return (
            f'<div class="card qc" id="qc-{index}" data-shot="{_e(name)}"><h3>{_e(name)}</h3>'
            f'<div class="meta">No QC for this shot.</div>{fixes}{form}</div>'
        )
    counts = qc.counts
    total = sum(counts.values())
    count_html = (
        "".join(f"<span><b>{v}</b> {_e(k)}</span>" for k, v in counts.items() if v) or "nothing flagged"
    )
    rows = shot.review
    table = (
        _review_table(name, rows, _Pictures(thumbs, qc, shot.frame_size, shot.rotation))
        if rows
        else '<div class="meta">No frames to review.</div>'
    )
    more = (
        f'<div class="meta">showing the {len(rows)} worst of {total} flags (all are in report.json)</div>'
        if total > len(rows)
        else ""
    )
    more += _qc_file(shot)
    return (
        f'<div class="card qc" id="qc-{index}" data-shot="{_e(name)}">'
        f"<h3>{_e(name)}: {total} to review</h3>"
        f'<div class="counts">{count_html}</div>'
        f"{charts(name, qc, shot.summary.fixes)}{fixes}{more}{table}{form}</div>"
    )


def _qc_file(shot: ShotReport) -> str:
    """The link to the shot's QC file (its per-frame numbers), where its QC has one."""
    link = shot.qc_file
    if link is None:
        return ""
    if link.href is None:
        return f'<div class="meta">numbers per frame: <span class="url">{_e(link.text)}</span></div>'
    return (
        f'<div class="meta"><a href="{_e(link.href)}" title="{_e(link.text)}">numbers per frame</a> '
        "(JSON)</div>"
    )


@dataclass(frozen=True)
class _Pictures:
    """A shot's thumbnails by source position, with what a box drawn on one needs: its frame number
    (:func:`~cluster.report.qcfile.frame_numbers`), the plate's frame size and its display rotation (degrees, as
    :func:`pipeline.thumbnails.jpeg` turns the pictures)."""

    thumbs: Mapping[int, Thumb]
    qc: ShotQC | FiledQC
    frame_size: tuple[int, int] | None
    rotation: int = 0

    def before(self, name: str, thumb: Thumb) -> str:
        img = f'<img src="{_data_uri(thumb.before_jpeg)}" alt="{_e(name)} position {thumb.frame} source"'
        numbers, i = frame_numbers(self.qc), thumb.frame - self.qc.first
        if self.frame_size is None or not 0 <= i < len(numbers):
            return img + ">"
        width, height = self.frame_size
        return (
            f'<span class="pick">{img} data-frame="{int(numbers[i])}" data-w="{width}" data-h="{height}" '
            f'data-turns="{round(self.rotation / 90) % 4}" '
            'draggable="false"><span class="sel"></span></span>'
        )


def _review_table(name: str, rows: Sequence[ReviewRow], pictures: _Pictures) -> str:
    head = (
        "<tr><th>Frames</th><th>Track</th><th>Reason</th><th>Severity</th><th>Value / threshold</th>"
        "<th>Detail</th><th>Before / after</th><th>Note</th></tr>"
    )
    body = []
    for row in rows:
        flag = row.flag
        frames = f"{flag.first}" if flag.first == flag.last else f"{flag.first}–{flag.last}"
        severity = float(flag.severity)
        thumb = pictures.thumbs.get(row.thumbnail) if row.thumbnail is not None else None
        picture = "–"
        if thumb is not None:
            alt = f"{name} position {thumb.frame}"
            picture = (
                f'<div class="pair">{pictures.before(name, thumb)}'
                f'<img src="{_data_uri(thumb.after_jpeg)}" alt="{_e(alt)} rendered"></div>'
            )
        track = "" if flag.track is None else str(flag.track)
        note = (
            f'<button type="button" class="note" data-frames="{flag.first}-{flag.last}" '
            f'data-track="{track}">note</button>'
        )
        boundary = " (chunk boundary)" if flag.extra.get("chunk_boundary") else ""
        body.append(
            '<tr class="flag">'
            f"<td>{_e(frames)}</td><td>{_e('–' if flag.track is None else flag.track)}</td>"
            f"<td>{_e(flag.reason)}{_e(boundary)}</td>"
            f'<td><span class="sev" style="background:{_severity_colour(severity)}">{severity:.2f}</span></td>'
            f'<td class="n">{float(flag.value):.3g} / {float(flag.threshold):.3g}</td>'
            f"<td>{_e(flag.detail)}</td><td>{picture}</td><td>{note}</td></tr>"
        )
    return f"<table>{head}{''.join(body)}</table>"


def _state_runs(coverage: Mapping[str, Sequence[int]], n: int) -> list[tuple[int, int, str]]:
    """Runs ``[a, b)`` of frames with the same worst coverage state ('' where no replaced face)."""
    states = [""] * n
    for state in STATE_COLOURS:  # later states are worse: each takes the frames it has from the one before
        values = coverage.get(state, ())
        for i in itertools.compress(range(min(n, len(values))), values):
            states[i] = state
    out: list[tuple[int, int, str]] = []
    start = 0
    for state, run in itertools.groupby(states):
        end = start + sum(1 for _ in run)
        if state:
            out.append((start, end, state))
        start = end
    return out


def _fix_marks(
    fixes: Sequence[FixMark], index: Mapping[int, int], x: Callable[[float], float], top: int
) -> list[str]:
    """Each fix as a bar over its frames just above the plot (the frames of the strip it covers)."""
    out = []
    numbers = sorted(index)
    for fix in fixes:
        inside = [index[n] for n in numbers if fix.frames[0] <= n <= fix.frames[1]]
        if not inside:
            continue
        a, b = min(inside), max(inside)
        out.append(
            f'<rect class="fix" data-fix="{fix.index}" x="{x(a):.1f}" y="{top - 10}" '
            f'width="{max(2.0, x(b + 1) - x(a)):.1f}" height="8" fill="{FIX_COLOUR}">'
            f"<title>{_e(fix.label)}</title></rect>"
        )
    return out


def _points(values: Sequence[float | None], n: int, *, left: int, width: int, top: int, height: int) -> str:
    """The polyline of a series over ``n`` frames (None: a gap), as :func:`strip_chart`'s ``x`` and ``y``
    place it: the same arithmetic, inline (tens of thousands of points per shot).

    A long shot (more than two frames per unit of the plot's width) keeps, of each unit's frames, the
    first, lowest, highest and last points, in frame order: the line drawn through them covers the
    same pixels at the page's size, and the page stays small (a feature-length shot has 14,400)."""
    scale = width / max(n, 1)

    def point(i: int, sim: float) -> str:
        return f"{left + width * (i + 0.5) / max(n, 1):.1f},{top + height * (1.0 - sim):.1f}"

    out = []
    if n <= 2 * width:
        for i, v in enumerate(values):
            if v is None:
                continue
            sim = float(v)
            sim = 0.0 if sim < 0.0 else min(sim, 1.0)  # min(max(sim, 0.0), 1.0), NaN kept
            out.append(point(i, sim))
        return " ".join(out)
    column: list[tuple[int, float]] = []  # the points of the current unit of width
    current = -1
    for i, v in enumerate(values):
        if v is None:
            continue
        sim = float(v)
        sim = 0.0 if sim < 0.0 else min(sim, 1.0)
        unit = int((i + 0.5) * scale)  # the unit of width its point falls in
        if unit != current and column:
            out.extend(point(j, y) for j, y in _envelope(column))
            column = []
        current = unit
        column.append((i, sim))
    if column:
        out.extend(point(j, y) for j, y in _envelope(column))
    return " ".join(out)


def _envelope(column: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """The first, lowest, highest and last of (frame, value) points, each once, in frame order."""
    finite = [p for p in column if p[1] == p[1]]  # NaN compares unequal to itself
    keep = {column[0], column[-1]}
    if finite:
        keep.add(min(finite, key=lambda p: p[1]))
        keep.add(max(finite, key=lambda p: p[1]))
    return sorted(keep)


def strip_chart(name: str, qc: ShotQC, fixes: Sequence[FixMark] = ()) -> str:
    """Identity similarity (line, 0-1) over the frames, flagged frames shaded, coverage as a band, the
    shot's fixes as marks above the plot."""
    series = qc.series.reported()
    numbers = list(series.numbers)
    n = len(numbers)
    if n == 0:
        return ""
    label_w, plot_w, top, plot_h, band_h = 90, 880, 14, 80, 14
    width, height = label_w + plot_w + 20, top + plot_h + band_h + 34
    index = {int(v): i for i, v in enumerate(numbers)}

    def x(i: float) -> float:
        return label_w + plot_w * i / max(n, 1)

    def y(sim: float) -> float:
        return top + plot_h * (1.0 - min(max(sim, 0.0), 1.0))

    out = [
        f'<rect x="{label_w}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fafbfc" stroke="#e3e6ea"/>',
        f'<text x="{label_w - 6}" y="{top + 10}" text-anchor="end">similarity 1</text>',
        f'<text x="{label_w - 6}" y="{top + plot_h}" text-anchor="end">0</text>',
    ]
    for flag in qc.flags:
        a, b = index.get(int(flag.first)), index.get(int(flag.last))
        if a is None or b is None:
            continue
        out.append(
            f'<rect x="{x(a):.1f}" y="{top}" width="{max(1.0, x(b + 1) - x(a)):.1f}" height="{plot_h}" '
            f'fill="{FLAG_COLOUR}" fill-opacity="0.15"><title>{_e(flag.reason)} {flag.first}–'
            f"{flag.last}</title></rect>"
        )
    thresholds = {float(f.threshold) for f in qc.flags if f.reason == "low_identity"}
    for t in sorted(thresholds):
        out.append(
            f'<line x1="{label_w}" x2="{label_w + plot_w}" y1="{y(t):.1f}" y2="{y(t):.1f}" '
            f'stroke="{FLAG_COLOUR}" stroke-dasharray="4 3"/>'
        )
    lines = (
        ("similarity_after", series.similarity_after, ""),
        ("similarity_before", series.similarity_before, ' stroke-dasharray="2 2"'),
    )
    for key, values, dash in lines:
        points = _points(values, n, left=label_w, width=plot_w, top=top, height=plot_h)
        if points:
            out.append(
                f'<polyline points="{points}" fill="none" stroke="{LINE_COLOUR}" '
                f'stroke-width="1.5"{dash}><title>{_e(key)}</title></polyline>'
            )
    out.extend(_fix_marks(fixes, index, x, top))
    band_y = top + plot_h + 4
    out.append(f'<text x="{label_w - 6}" y="{band_y + 11}" text-anchor="end">coverage</text>')
    for a, b, state in _state_runs(series.coverage, n):
        out.append(
            f'<rect x="{x(a):.1f}" y="{band_y}" width="{max(1.0, x(b) - x(a)):.1f}" height="{band_h}" '
            f'fill="{STATE_COLOURS[state]}"><title>{_e(state)} {numbers[a]}–{numbers[b - 1]}</title></rect>'
        )
    axis_y = band_y + band_h + 14
    out.append(f'<text x="{label_w}" y="{axis_y}">{numbers[0]}</text>')
    out.append(f'<text x="{label_w + plot_w}" y="{axis_y}" text-anchor="end">{numbers[-1]}</text>')
    legend = "".join(f'<span><i style="background:{c}"></i>{_e(k)}</span>' for k, c in STATE_COLOURS.items())
    return (
        f'<div class="legend">{legend}<span>line: similarity after (dashed: before); '
        f"shaded: flagged frames{'; purple bars: fixes' if fixes else ''}</span></div>"
        f'<svg viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="{_e(name)} identity similarity and coverage per frame">{"".join(out)}</svg>'
    )
