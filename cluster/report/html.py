"""The job report as one self-contained page (``report.html``).

The HTML needs nothing but itself: inline CSS, images as ``data:`` URIs, charts
as inline SVG, one inline script (the review section's notes, :mod:`cluster.report.notes`);
a Content-Security-Policy forbids anything else, so a page that tried to load a URL
would show a console error (the tests look for them in a real browser).  It is meant to be read at a glance by a producer: a
status banner and the warnings come first, then one row per shot, the charts,
and the pictures.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

from cluster.report.data import CPU_PROVIDER, JobReport, ShotReport, TimelineEntry, busy_ratios
from cluster.report.links import media_link
from cluster.report.notes import CSS as NOTES_CSS
from cluster.report.notes import SCRIPT as NOTES_SCRIPT
from cluster.report.provenance import provenance_section
from cluster.report.qc import CSS as QC_CSS
from cluster.report.qc import ShotCards, StripCharts, has_review, qc_sections
from cluster.report.summary import JobSummary, reported
from pipeline.thumbnails import Thumb

# While a job runs, the page reloads itself so a producer can leave it open.
RUNNING_REFRESH_SECONDS = 30

STAGE_COLOURS = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
    "#86bcb6",
    "#d37295",
)
# The page may use only itself: inline styles and script, data: images; no network.
CSP_META = (
    '<meta http-equiv="Content-Security-Policy" '
    "content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'\">"
)
KIND_COLOURS = {"analyze": "#9ecae9", "render": "#2f6fa8"}
FAILED_COLOUR = "#d62728"


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(value: Any, digits: int = 1) -> str:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "–"
    return f"{number:,.{digits}f}"


CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d232a;background:#f5f6f8}
main{max-width:1200px;margin:0 auto;padding:20px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 10px} h3{font-size:15px;margin:18px 0 8px}
.meta{color:#5b6570;font-size:12px}
.banner{display:flex;gap:18px;align-items:center;flex-wrap:wrap;padding:14px 18px;border-radius:8px;color:#fff;margin:14px 0}
.banner.ok{background:#2e7d32}.banner.failed{background:#c62828}.banner.running{background:#1565c0}
.banner .big{font-size:24px;font-weight:700}
.kpi{display:flex;flex-direction:column}.kpi b{font-size:18px}.kpi span{font-size:12px;opacity:.85}
.warnings{background:#fff4e5;border-left:4px solid #ef6c00;padding:10px 16px;border-radius:4px}
.warnings li{margin:2px 0}
table{border-collapse:collapse;width:100%;background:#fff;border-radius:6px;overflow:hidden}
th,td{padding:7px 10px;text-align:left;border-bottom:1px solid #e6e8eb;vertical-align:top}
th{background:#eceff3;font-size:12px;text-transform:uppercase;letter-spacing:.03em;color:#44505c}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;color:#fff}
.s-published{background:#2e7d32}.s-failed{background:#c62828}.s-skipped{background:#757575}.s-pending{background:#1565c0}
.cpu{background:#ef6c00}.gpu{background:#6a1b9a}
.warn{color:#b34700;font-size:12px}
.card{background:#fff;border-radius:6px;padding:12px 14px;margin:10px 0}
svg text{font:11px system-ui,sans-serif;fill:#33404d}
.thumbs{display:flex;flex-wrap:wrap;gap:14px}
figure{margin:0;background:#fff;border-radius:6px;padding:8px}
figure .pair{display:flex;gap:6px}
figure .pair div{display:flex;flex-direction:column;font-size:11px;color:#5b6570}
figure img{display:block;max-width:240px;height:auto;border:1px solid #d9dde2}
figcaption{font-size:12px;margin-top:4px;font-weight:600}
.url{font:12px ui-monospace,monospace;color:#5b6570;word-break:break-all}
td.review{white-space:nowrap}
.legend span{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:4px;vertical-align:-1px}
"""


def render_html(
    report: JobReport,
    thumbs: Mapping[str, Sequence[Thumb]],
    *,
    charts: StripCharts | None = None,
    cards: ShotCards | None = None,
) -> str:
    """The self-contained page for a report made by :func:`cluster.report.data.report_data` (``charts``:
    what draws each shot's QC strip chart, :data:`cluster.report.qc.StripCharts`; ``cards``: what gives
    each shot's card in "Frames to review", :data:`cluster.report.qc.ShotCards`)."""
    job = report.summary
    shots = report.shots
    running = report.running
    state = "running" if running else ("ok" if job.ok else "failed")
    title = f"Recast job {job.job_id}"
    review = any(has_review(s) for s in shots)
    refresh = f'<meta http-equiv="refresh" content="{RUNNING_REFRESH_SECONDS}">' if running else ""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        CSP_META,
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        refresh,
        f"<title>{_e(title)}</title><style>{CSS}{QC_CSS}{NOTES_CSS}</style></head><body><main>",
        f"<h1>{_e(title)}</h1>",
        _meta_line(report),
        _playlist(job),
        _banner(job, shots, state, report.retries),
        _warnings(job, shots),
        "<h2>Shots</h2>",
        _shot_table(shots, job.work_url),
        provenance_section([s.summary for s in shots], job.marking),
        '<h2 id="review">Frames to review</h2>' if review else "",
        qc_sections(shots, thumbs, report.identities, charts=charts, cards=cards) if review else "",
        "<h2>Where the time went</h2>",
        _stage_chart(report.stage_seconds),
        "<h2>Chunks per actor</h2>",
        _timeline_chart(report.timeline),
        "<h2>Before / after</h2>",
        _thumb_sections(shots, thumbs),
        f"<script>{NOTES_SCRIPT}</script>" if review else "",
        "</main></body></html>",
    ]
    return "\n".join(p for p in parts if p)


def _meta_line(report: JobReport) -> str:
    return (
        f'<div class="meta">report generated {_e(report.generated_at)}'
        f" · work area {_e(report.summary.work_url)}</div>"
    )


def _link(url: str, label: str, report_dir: str) -> str:
    """``label`` linked to ``url`` relative to the report where it can be, else ``label`` and the URL as text."""
    link = media_link(url, report_dir)
    if link.href is None:
        return f'{_e(label)} <span class="url">{_e(link.text)}</span>'
    return f'<a href="{_e(link.href)}" title="{_e(link.text)}">{_e(label)}</a>'


def _playlist(job: JobSummary) -> str:
    """The review playlist of the whole job (``output.review_timeline_url``), once, at the top."""
    if job.review_timeline_url is None:
        return ""
    link = _link(job.review_timeline_url, "review playlist", job.work_url)
    return f'<div class="card review-playlist">Dailies: {link} (OTIO, every shot\'s review movie)</div>'


def _review_cell(shot: ShotReport, report_dir: str) -> str:
    review = shot.summary.review
    if review is None:
        return "<td>–</td>"
    movie = _link(review.movie_url, "review movie", report_dir)
    contact = _link(review.contact_url, "contact sheet", report_dir)
    counts = f"{review.frames:,} frames, {review.flagged_frames:,} flagged"
    return f'<td class="review">{movie}<br>{contact}<div class="meta">{counts}</div></td>'


def _banner(job: JobSummary, shots: Sequence[ShotReport], state: str, retries: int) -> str:
    label = {"running": "RUNNING", "ok": "DONE", "failed": "FAILED"}[state]
    published = sum(1 for s in shots if s.summary.status == "published")
    first, first_shot = reported(job.first_chunk_seconds), reported(job.first_shot_seconds)
    kpis = [
        (f"{published}/{len(shots)}", "shots published"),
        (f"{job.frames:,}", "frames"),
        (_num(reported(job.fps)), "fps (job)"),
        (_duration(reported(job.wall_seconds)), "wall time"),
        (str(job.actors), "actors"),
        (_duration(reported(job.setup_seconds)), "set-up"),
        (_duration(first) if first is not None else "–", "first chunk"),
        (_duration(first_shot) if first_shot is not None else "–", "first shot"),
        (str(retries), "retries"),
    ]
    cells = "".join(f'<div class="kpi"><b>{_e(v)}</b><span>{_e(k)}</span></div>' for v, k in kpis)
    return f'<div class="banner {state}"><div class="big">{label}</div>{cells}</div>'


def _duration(seconds: Any) -> str:
    try:
        s = float(seconds)
    except (TypeError, ValueError):
        return "–"
    if s < 60:
        return f"{s:.1f} s"
    minutes, sec = divmod(round(s), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{sec:02d}s" if hours else f"{minutes}m{sec:02d}s"


def _warnings(job: JobSummary, shots: Sequence[ShotReport]) -> str:
    items = [f"<li>{_e(w)}</li>" for w in job.warnings]
    for shot in shots:
        items += [f"<li><b>{_e(shot.summary.name)}</b>: {_e(w)}</li>" for w in shot.warnings]
    if not items:
        return '<div class="card">No warnings.</div>'
    return f'<div class="warnings"><b>Warnings ({len(items)})</b><ul>{"".join(items)}</ul></div>'


def _providers_html(providers: Mapping[str, Sequence[str]]) -> str:
    if not providers:
        return "–"
    rows = []
    for role, ps in sorted(providers.items()):
        first = ps[0] if ps else "?"
        cls = "cpu" if first == CPU_PROVIDER else "gpu"
        short = first.removesuffix("ExecutionProvider")
        rows.append(f'{_e(role)} <span class="badge {cls}" title="{_e(", ".join(ps))}">{_e(short)}</span>')
    return "<br>".join(rows)


def _shot_table(shots: Sequence[ShotReport], report_dir: str) -> str:
    """One row per shot; a "Review" column (the review movie and contact sheet) when a shot has them."""
    review = any(s.summary.review is not None for s in shots)
    head = (
        "<tr><th>Shot</th><th>Status</th><th>Frames</th><th>Chunks</th><th>Faces swapped</th>"
        "<th>fps</th><th>Time</th><th>Encoder</th><th>Execution providers</th><th>Warnings</th>"
        + ("<th>Review</th>" if review else "")
        + "</tr>"
    )
    rows = []
    for shot in shots:
        s = shot.summary
        warnings = "<br>".join(f'<span class="warn">{_e(w)}</span>' for w in shot.warnings) or "–"
        rows.append(
            "<tr>"
            f'<td><b>{_e(s.name)}</b><div class="meta">{_e(s.output_url)}</div></td>'
            f'<td><span class="badge s-{_e(s.status)}">{_e(s.status)}</span></td>'
            f'<td class="n">{s.frames:,}</td>'
            f'<td class="n">{s.chunks}</td>'
            f'<td class="n">{s.faces_swapped:,}</td>'
            f'<td class="n">{_num(reported(s.fps))}</td>'
            f'<td class="n">{_duration(reported(s.seconds))}</td>'
            f"<td>{_e(s.encoder or '–')}</td>"
            f"<td>{_providers_html(s.providers)}</td>"
            f"<td>{warnings}</td>" + (_review_cell(shot, report_dir) if review else "") + "</tr>"
        )
    return f"<table>{head}{''.join(rows)}</table>"


def _stage_chart(stages: Mapping[str, float]) -> str:
    """Horizontal bars, longest first, with seconds and share of the total."""
    items = sorted(
        ((k, float(v)) for k, v in stages.items() if "." not in k and v > 0), key=lambda kv: -kv[1]
    )
    if not items:
        return '<div class="card">No stage timings yet.</div>'
    total = sum(v for _, v in items)
    longest = items[0][1]
    row_h, label_w, bar_w, width = 24, 130, 720, 1000
    height = row_h * len(items) + 8
    rects = []
    for i, (name, value) in enumerate(items):
        y = 4 + i * row_h
        w = max(1.0, bar_w * value / longest)
        colour = STAGE_COLOURS[i % len(STAGE_COLOURS)]
        rects.append(
            f'<text x="{label_w - 8}" y="{y + 15}" text-anchor="end">{_e(name)}</text>'
            f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row_h - 8}" rx="2" fill="{colour}">'
            f"<title>{_e(name)}: {value:.2f} s</title></rect>"
            f'<text x="{label_w + w + 6:.1f}" y="{y + 15}">{value:,.1f} s ({100 * value / total:.0f} %)</text>'
        )
    return (
        '<div class="card"><div class="meta">actor-seconds summed over chunks, plus driver stages '
        f"(total {total:,.1f} s)</div>"
        f'<svg viewBox="0 0 {width} {height}" width="100%" role="img" aria-label="stage time breakdown">'
        f"{''.join(rects)}</svg></div>"
    )


def _ticks(span: float) -> list[float]:
    """About eight round tick positions covering ``[0, span]``."""
    if span <= 0:
        return [0.0]
    raw = span / 8
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(int(span / step) + 1)]


def _timeline_chart(entries: Sequence[TimelineEntry]) -> str:
    """One lane per actor; each piece of work a bar from start to end, labelled shot/chunk."""
    if not entries:
        return '<div class="card">No chunks have run yet.</div>'
    actors = sorted({e.actor for e in entries})
    shots = list(dict.fromkeys(e.shot for e in entries))
    # Times are from the job's start: drawing from 0 shows set-up as the empty space on the left.
    t0 = min(0.0, min(e.start for e in entries))
    span = max(max(e.end for e in entries) - t0, 1e-3)
    label_w, plot_w, lane_h, top = 150, 820, 30, 22
    width = label_w + plot_w + 20
    height = top + lane_h * len(actors) + 10

    def x(t: float) -> float:
        return label_w + plot_w * (t - t0) / span

    busy = busy_ratios(entries)
    out = []
    for tick in _ticks(span):
        tx = x(t0 + tick)
        out.append(
            f'<line x1="{tx:.1f}" y1="{top - 4}" x2="{tx:.1f}" y2="{height - 8}" stroke="#e3e6ea"/>'
            f'<text x="{tx:.1f}" y="{top - 8}" text-anchor="middle">{tick:g} s</text>'
        )
    escaped: dict[str, str] = {}
    by_actor: dict[str, list[TimelineEntry]] = {}
    for e in entries:
        by_actor.setdefault(e.actor, []).append(e)
    for lane, actor in enumerate(actors):
        y = top + lane * lane_h
        out.append(
            f'<text x="{label_w - 8}" y="{y + 19}" text-anchor="end">{_e(actor)} '
            f"({100 * busy.get(actor, 0.0):.0f}% busy)</text>"
        )
        on_actor = _e(actor)
        for e in by_actor[actor]:
            x0, x1 = x(e.start), x(e.end)
            colour = FAILED_COLOUR if not e.ok else KIND_COLOURS.get(e.kind, "#888")
            shot = escaped.get(e.shot) or escaped.setdefault(e.shot, _e(e.shot))  # each name escaped once
            kind = escaped.get(e.kind) or escaped.setdefault(e.kind, _e(e.kind))
            label = f"#{e.chunk}" if len(shots) == 1 else f"{e.shot} #{e.chunk}"
            tip = (
                f"{kind} {shot} chunk {e.chunk} on {on_actor}: "
                f"{e.start:.1f}-{e.end:.1f} s ({e.end - e.start:.1f} s)"
                + ("" if e.ok else f" FAILED (attempt {e.attempt})")
            )
            out.append(
                f'<rect x="{x0:.1f}" y="{y + 4}" width="{max(1.0, x1 - x0):.1f}" height="{lane_h - 8}" rx="2" '
                f'fill="{colour}" stroke="#fff"><title>{tip}</title></rect>'
            )
            if x1 - x0 > 7 * len(label) and e.kind == "render":
                out.append(
                    f'<text x="{(x0 + x1) / 2:.1f}" y="{y + 19}" text-anchor="middle" '
                    f'style="fill:#fff">{_e(label)}</text>'
                )
    legend = "".join(
        f'<span><i style="background:{c}"></i>{_e(k)}</span>'
        for k, c in (*KIND_COLOURS.items(), ("failed", FAILED_COLOUR))
    )
    return (
        f'<div class="card"><div class="legend">{legend}</div>'
        f'<svg viewBox="0 0 {width} {height}" width="100%" role="img" aria-label="chunks per actor">'
        f"{''.join(out)}</svg></div>"
    )


def _data_uri(jpeg: bytes) -> str:
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")


def _thumb_sections(shots: Sequence[ShotReport], thumbs: Mapping[str, Sequence[Thumb]]) -> str:
    out = []
    for shot in shots:
        name = shot.summary.name
        items = sorted(thumbs.get(name, ()), key=lambda t: t.frame)
        if not items:
            continue
        frames = {t.frame for t in items}
        figures = []
        for t in items:
            if t.frame == 0:
                caption = "first frame"
            elif t.frame + 1 in frames:
                caption = f"frame {t.frame}: last before a chunk boundary"
            elif t.frame - 1 in frames:
                caption = f"frame {t.frame}: first after a chunk boundary"
            else:
                caption = f"frame {t.frame}"
            figures.append(
                '<figure><div class="pair">'
                f'<div>before<img src="{_data_uri(t.before_jpeg)}" alt="{_e(name)} frame {t.frame} source"></div>'
                f'<div>after<img src="{_data_uri(t.after_jpeg)}" alt="{_e(name)} frame {t.frame} rendered"></div>'
                f"</div><figcaption>{_e(caption)}</figcaption></figure>"
            )
        out.append(f'<h3>{_e(name)}</h3><div class="thumbs">{"".join(figures)}</div>')
    return "".join(out) or '<div class="card">No thumbnails.</div>'
