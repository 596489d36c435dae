"""The report's provenance block: per shot, the watermark's payload, strength and the frames it marked.

Reads each shot's ``watermark`` (:attr:`cluster.report.summary.ShotSummary.watermark`);
empty when no shot carries one (the job had no ``provenance.watermark``).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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


def provenance_section(shots: Sequence[ShotSummary]) -> str:
    """The ``<h2>Provenance</h2>`` block, or ``""`` when no shot was watermarked."""
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
        return ""
    head = (
        "<tr><th>Shot</th><th>Watermark payload</th><th>Step (strength)</th>"
        "<th>Frames marked</th><th>Marked frames (source numbers)</th></tr>"
    )
    return (
        '<h2 id="provenance">Provenance</h2><div class="meta">invisible watermark in the replaced faces '
        "(read it back with <code>python -m jobs.detect_watermark</code>)</div>"
        f"<table>{head}{''.join(rows)}</table>"
    )
