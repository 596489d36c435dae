"""The driver's report rewrites splice each shot's QC from a cache (JSON text, strip chart): the same
report as built without it, and a QC that changed is encoded and drawn again."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

from cluster.report.build import RECORD_LINE, Encoded, json_text
from cluster.report.cache import ReportCache
from cluster.report.data import report_data
from cluster.report.html import render_html
from cluster.report.summary import FixMark, JobSummary, RedactedCopies
from pipeline.store.redact import REDACTED, Redactor, plain_numbers, redact
from tests.cluster.report.sample_report import TIMELINE, job_summary, shot_qc

KEY = "AKIAIOSFODNN7EXAMPLE"


def _texts(summary: JobSummary, cache: ReportCache | None) -> tuple[str, str, str]:
    """(report.json, report.html, summary.json) as the driver writes them, with or without ``cache``."""
    report = report_data(summary, timeline=TIMELINE, generated_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    qc_json = cache.qc_json if cache is not None else None
    charts = cache.strip_chart if cache is not None else None
    return (
        json_text(report.to_dict(qc_json=qc_json)),
        render_html(report, {}, charts=charts),
        json_text(summary.to_dict(qc_json=qc_json)),
    )


def test_a_cached_qc_is_the_qc_rendered_without_the_cache_and_a_changed_qc_is_rendered_again() -> None:
    live = job_summary("out.mp4")
    live.shots[0].qc = shot_qc()
    copies, cache = RedactedCopies(), ReportCache()
    for _ in range(2):  # the second time from the cache
        summary = copies.copy(live)
        assert _texts(summary, cache) == _texts(summary, None)
    first_json = cache.qc_json(live.shots[0].name, summary.shots[0].qc)  # type: ignore[arg-type]
    assert cache.qc_json(live.shots[0].name, copies.copy(live).shots[0].qc) is first_json  # type: ignore[arg-type]

    # A QC replaced (with a credential in it, redacted before it is cached), and fixes added.
    assert live.shots[0].qc is not None
    series = dataclasses.replace(live.shots[0].qc.series, similarity_after=[0.9] * 30)
    live.shots[0].qc = dataclasses.replace(live.shots[0].qc, series=series, shot=f"s3://{KEY}:pw@b/x")
    live.shots[0].fixes = [FixMark(0, "box", (3, 9), None, f"fix 0: token={KEY}")]
    summary = copies.copy(live)
    report_json, page, summary_json = _texts(summary, cache)
    assert (report_json, page, summary_json) == _texts(summary, None)
    assert cache.qc_json(live.shots[0].name, summary.shots[0].qc) is not first_json  # type: ignore[arg-type]
    qc = json.loads(summary_json)["shots"][0]["qc"]
    assert qc == redact(live.shots[0].qc.to_dict()) and qc["series"]["similarity_after"] == [0.9] * 30
    assert REDACTED in qc["shot"] and all(KEY not in text for text in (report_json, page, summary_json))
    assert 'data-fix="0"' in page


def test_encoded_values_are_written_as_their_values() -> None:
    made = []

    def make() -> dict[str, object]:
        made.append(1)
        return {"series": {"a": [1, 2.5, None]}, "n": 3}

    name = "a" * RECORD_LINE  # records longer than a line: laid out item by item
    value = {"k": 1, "shots": [{"name": name, "qc": Encoded(make)}, {"name": "b", "qc": None}], "e": {}}
    plain = {"k": 1, "shots": [{"name": name, "qc": make()}, {"name": "b", "qc": None}], "e": {}}
    made.clear()
    for _ in range(2):
        assert json_text(value) == json_text(plain)
    assert made == [1]  # made once, at its indent
    # Short records holding one are laid out item by item too (the same data, not each on a line).
    records = [{"qc": Encoded(lambda: [1])}, {"qc": [1]}]
    assert json.loads(json_text(records)) == [{"qc": [1]}, {"qc": [1]}]


def test_lists_of_plain_numbers_are_copied_without_redacting_each() -> None:
    assert plain_numbers([1, 2.5, None, True]) and plain_numbers(()) and not plain_numbers([1, "s3://x"])
    redactor = Redactor()
    values = [[0.1, None, 3], (1, 2), [1, f"s3://{KEY}:pw@b/x"], {"series": [0.5] * 4, "u": [KEY]}]
    for value in values:
        out = redactor(value)
        assert out == redact(value) and type(out) is type(value)
        assert out is not value or isinstance(value, tuple)  # a copy (a tuple is its own)
