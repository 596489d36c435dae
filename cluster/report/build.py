"""The job report: ``report.json`` plus one self-contained ``report.html``, published together.

:mod:`cluster.report.data` builds the data (typed: :class:`~cluster.report.data.JobReport`),
:mod:`cluster.report.html` the page.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from cluster.report.data import NoteChoices, actor_busy_ratios, report_data
from cluster.report.html import render_html
from cluster.report.summary import JobSummary
from pipeline.store import storage
from pipeline.thumbnails import Thumb

__all__ = ["NoteChoices", "actor_busy_ratios", "build_report", "write_report"]

logger = logging.getLogger(__name__)


def build_report(
    summary: JobSummary,
    *,
    thumbs: Mapping[str, Sequence[Thumb]] | None = None,
    timeline: Sequence[Mapping[str, Any]] = (),
    stage_seconds: Mapping[str, float] | None = None,
    retries: Mapping[str, int] | None = None,
    running: bool = False,
    generated_at: dt.datetime | None = None,
    notes: NoteChoices | None = None,
) -> tuple[dict[str, Any], str]:
    """Return ``(report_json, html)`` for a job (see :func:`cluster.report.data.report_data`).

    ``summary``: as the report may show it (e.g. :meth:`JobSummary.redacted`)."""
    thumbs = thumbs or {}
    report = report_data(
        summary,
        thumbs=thumbs,
        timeline=timeline,
        stage_seconds=stage_seconds,
        retries=retries,
        running=running,
        generated_at=generated_at,
        notes=notes,
    )
    return report.to_dict(), render_html(report, thumbs)


def write_report(prefix_url: str, report_json: Mapping[str, Any], html_text: str) -> tuple[str, str]:
    """Publish ``report.json`` and ``report.html`` under ``prefix_url`` (each atomically).

    Returns their URLs.  The HTML goes first so a reader who finds the JSON
    also finds the page that matches it.
    """
    html_url = storage.join(prefix_url, "report.html")
    json_url = storage.join(prefix_url, "report.json")
    storage.write_bytes(html_url, html_text.encode("utf-8"))
    storage.write_bytes(json_url, json.dumps(report_json, indent=2, default=str).encode("utf-8"))
    logger.info("job report written to %s", html_url)
    return json_url, html_url
