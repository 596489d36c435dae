"""The report's provenance block: how the outputs are marked as AI-made (the watermark, Content
Credentials and whose key signed them, what a cluster policy let the job switch off), then per shot
the watermark's payload, strength and the frames it marked.

Reads the job's ``marking`` (:attr:`cluster.report.summary.JobSummary.marking`) and each shot's
``watermark`` (:attr:`cluster.report.summary.ShotSummary.watermark`).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cluster.report.marking import marking_line

if TYPE_CHECKING:
    from cluster.report.summary import ShotSummary

RANGES_SHOWN = 12
"""At most this many frame ranges per shot on the page (all stay in ``summary.json``)."""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _ranges(runs: Sequence[Sequence[int]]) -> str:
    shown = ", ".join(f"{a}" if a == b else f"{a}–{b}" for a, b in runs[:RANGES_SHOWN])
    more = len(runs) - RANGES_SHOWN
    return (shown or "none") + (f" and {more} more range(s)" if more > 0 else "")


def provenance_section(shots: Sequence[ShotSummary], marking: Mapping[str, Any] | None = None) -> str:
    """The ``<h2>Provenance</h2>`` block: the job's marking, then a row per watermarked shot; ``""``
    when there is neither."""
    line = marking_line(marking)
    rows = []
    for shot in shots:
        mark = shot.watermark
        if mark is None:
            continue
        share = f" of {shot.frames:,}" if shot.frames else ""
        rows.append(
            f"<tr><td><b>{_e(shot.name)}</b></td><td>{_e(mark.payload)}</td>"
            f'<td class="n">{float(mark.step):g}</td>'
            f'<td class="n">{mark.frames_marked:,}{share}</td>'
            f"<td>{_e(_ranges(mark.frame_ranges))}</td></tr>"
        )
    if not rows:
        if not line:
            return ""
        return f'<h2 id="provenance">Provenance</h2><div class="meta">{_e(line)}</div>'
    head = (
        "<tr><th>Shot</th><th>Watermark payload</th><th>Step (strength)</th>"
        "<th>Frames marked</th><th>Marked frames (source numbers)</th></tr>"
    )
    return (
        f'<h2 id="provenance">Provenance</h2><div class="meta">{_e(line)}</div>'
        '<div class="meta">invisible watermark in the replaced faces '
        "(read it back with <code>python -m jobs.detect_watermark</code>; check the Content Credentials "
        "with <code>python -m jobs.verify</code>)</div>"
        f"<table>{head}{''.join(rows)}</table>"
    )
