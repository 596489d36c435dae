"""The job report: ``report.json`` plus one self-contained ``report.html``, published together.

:mod:`cluster.report.data` builds the data (typed: :class:`~cluster.report.data.JobReport`),
:mod:`cluster.report.html` the page.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
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
    slower for a big job's report and summary (tens of thousands of timeline records).

    An :class:`Encoded` in ``value`` (a value of an object) is written as its value would be, from the
    text it keeps."""
    return _json_lines(value, "", json.JSONEncoder(separators=(", ", ": "), default=_default))


class Encoded:
    """A value :func:`json_text` writes from text made once and kept: a published shot's QC (hundreds of
    kilobytes of per-frame series), the same in every rewrite of the report and in the summary.

    ``make()`` gives the value (a non-empty object or array, as JSON has it), called when its text is
    first wanted at an indent; the value itself is not kept, only its text."""

    __slots__ = ("_lock", "_make", "_texts")

    def __init__(self, make: Callable[[], dict[str, Any] | list[Any]]) -> None:
        self._make = make
        self._texts: dict[str, str] = {}
        self._lock = threading.Lock()

    def text(self, indent: str, encoder: json.JSONEncoder) -> str:
        """The value as :func:`json_text` lays it out at ``indent`` (``encoder``: its encoder, always alike)."""
        text = self._texts.get(indent)
        if text is None:
            with self._lock:  # the report's thread and the summary's may want it at once: made once
                text = self._texts.get(indent)
                if text is None:
                    value: Any = self._make()
                    if not (isinstance(value, dict | list) and value):
                        raise TypeError(f"Encoded holds a non-empty object or array, not {value!r:.40}")
                    text = self._texts[indent] = _json_lines(value, indent, encoder)
        return text


class _EncodedInside(TypeError):
    """An :class:`Encoded` met by the C encoder: the value holding it is laid out item by item instead."""


def _default(value: Any) -> Any:
    if isinstance(value, Encoded):
        raise _EncodedInside("an Encoded value inside a value written whole")
    return str(value)


def _json_lines(value: Any, indent: str, encoder: json.JSONEncoder) -> str:
    out: list[str] = []
    _write(value, indent, encoder, out)
    return "".join(out)


def _write(value: Any, indent: str, encoder: json.JSONEncoder, out: list[str]) -> None:
    """Append ``value``'s text at ``indent`` to ``out``, piece by piece: the text of a big document (a
    report that holds every shot's QC) is copied once, when ``out`` is joined, not once per level."""
    inner = indent + "  "
    if isinstance(value, Encoded):
        out.append(value.text(indent, encoder))
    elif isinstance(value, dict) and _holds_containers(value) and all(isinstance(k, str) for k in value):
        out.append("{\n")
        for i, (key, item) in enumerate(value.items()):
            separator = ",\n" if i else ""
            out.append(f"{separator}{inner}{encoder.encode(key)}: ")
            _write(item, inner, encoder, out)
        out.append(f"\n{indent}}}")
    elif isinstance(value, list | tuple) and value and isinstance(value[0], dict | list | tuple | Encoded):
        records = _records(value, encoder) if isinstance(value[0], dict) else None
        if records is not None:
            out.append("[\n" + ",\n".join(inner + text for text in records) + f"\n{indent}]")
            return
        out.append("[\n")
        for i, item in enumerate(value):
            out.append(f",\n{inner}" if i else inner)
            _write(item, inner, encoder, out)
        out.append(f"\n{indent}]")
    else:
        out.append(encoder.encode(value))


def _holds_containers(value: dict[Any, Any]) -> bool:
    return any(isinstance(v, Encoded) or (isinstance(v, dict | list | tuple) and v) for v in value.values())


def _records(records: list[Any] | tuple[Any, ...], encoder: json.JSONEncoder) -> list[str] | None:
    """Each of ``records`` (flat objects like the first: a timeline) as JSON on one line, or None when the
    first is longer than :data:`RECORD_LINE` or an :class:`Encoded` is inside one.

    The array is encoded in one call and cut between its items, at its ``}, {``: there is one between
    every two objects, so when there are no more than that, there is none inside a value; else
    (a value holds the text ``}, {``, an item is not an object) each item is encoded on its own."""
    try:
        if len(encoder.encode(records[0])) > RECORD_LINE:
            return None
        text = encoder.encode(records)
    except _EncodedInside:
        return None
    if text.count("}, {") == len(records) - 1 and text.startswith("[{") and text.endswith("}]"):
        items = text[1:-1].split(", {")
        return [items[0], *("{" + item for item in items[1:])]
    return [encoder.encode(r) for r in records]
