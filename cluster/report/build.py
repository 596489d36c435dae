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

__all__ = ["NoteChoices", "actor_busy_ratios", "build_report", "json_text", "write_report"]

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
    storage.write_bytes(json_url, json_text(report_json).encode("utf-8"))
    logger.info("job report written to %s", html_url)
    return json_url, html_url


RECORD_LINE = 400
"""An array of objects whose first is no longer than this (as JSON) has one object a line, each whole."""


def json_text(value: Any) -> str:
    """``value`` as JSON laid out for a reader, written by the C encoder: objects that hold objects or
    arrays one key a line, indented by two like ``json.dumps(indent=2)``; arrays of objects or arrays
    one item a line, laid out the same way, or each whole on its line when they are short records (a
    timeline's, the actors'; :data:`RECORD_LINE`); every other value (an array of numbers) on one line.  ``json.dumps(indent=2)`` goes through Python's encoder, value by value: many times
    slower for a big job's report and summary (tens of thousands of timeline records)."""
    return _json_lines(value, "", json.JSONEncoder(separators=(", ", ": "), default=str))


def _json_lines(value: Any, indent: str, encoder: json.JSONEncoder) -> str:
    inner = indent + "  "
    if isinstance(value, dict) and _holds_containers(value) and all(isinstance(k, str) for k in value):
        items = [f"{inner}{encoder.encode(k)}: {_json_lines(v, inner, encoder)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{indent}}}"
    if isinstance(value, list | tuple) and value and isinstance(value[0], dict | list | tuple):
        if isinstance(value[0], dict) and len(encoder.encode(value[0])) <= RECORD_LINE:
            return "[\n" + ",\n".join(inner + text for text in _records(value, encoder)) + f"\n{indent}]"
        return "[\n" + ",\n".join(inner + _json_lines(v, inner, encoder) for v in value) + f"\n{indent}]"
    return encoder.encode(value)


def _holds_containers(value: dict[Any, Any]) -> bool:
    return any(isinstance(v, dict | list | tuple) and v for v in value.values())


def _records(records: list[Any] | tuple[Any, ...], encoder: json.JSONEncoder) -> list[str]:
    """Each of ``records`` (flat objects like the first: a timeline) as JSON on one line.

    The array is encoded in one call and cut between its items, at its ``}, {``: there is one between
    every two objects, so when there are no more than that, there is none inside a value; else
    (a value holds the text ``}, {``, an item is not an object) each item is encoded on its own."""
    text = encoder.encode(records)
    if text.count("}, {") == len(records) - 1 and text.startswith("[{") and text.endswith("}]"):
        items = text[1:-1].split(", {")
        return [items[0], *("{" + item for item in items[1:])]
    return [encoder.encode(r) for r in records]
