"""The driver's report rewrites splice each shot's QC from a cache (JSON text, strip chart): the same
report as built without it, and a QC that changed is encoded and drawn again."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

from cluster.report.build import RECORD_LINE, Encoded, json_text
from cluster.report.cache import ReportCache, cached_report, file_qc
from cluster.report.data import report_data
from cluster.report.html import render_html
from cluster.report.summary import FixMark, JobSummary, RedactedCopies
from pipeline.store.redact import REDACTED, Redactor, plain_numbers, redact
from pipeline.thumbnails import Thumb
from tests.cluster.report.sample_report import TIMELINE, job_summary, shot_qc

KEY = "AKIAIOSFODNN7EXAMPLE"


WHEN = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _texts(
    summary: JobSummary,
    cache: ReportCache | None,
    timeline: Sequence[Mapping[str, Any]] = TIMELINE,
    thumbs: Mapping[str, Sequence[Thumb]] | None = None,
) -> tuple[str, str, str]:
    """(report.json, report.html, summary.json) as the driver writes them with ``cache``, or as they are
    built without one."""
    thumbs = thumbs or {}
    if cache is None:
        report = report_data(summary, thumbs=thumbs, timeline=timeline, generated_at=WHEN, running=True)
        return (
            json_text(report.to_dict()),
            render_html(report, thumbs),
            json_text(summary.to_dict()),
        )
    _, data, page = cached_report(
        cache, summary, thumbs=thumbs, timeline=timeline, running=True, generated_at=WHEN
    )
    return json_text(data), page, json_text(summary.to_dict(qc_json=cache.qc_json))


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


def test_rewrites_read_only_what_changed_and_give_the_report_built_whole(tmp_path) -> None:
    """A running job's rewrites: the timeline grows, a shot's QC is filed, thumbnails come, a fix is
    added, the timeline is replaced by another; each rewrite with the cache is the report built whole,
    and what did not change is taken from the cache (the same review rows, card and shot entry)."""
    live = job_summary("out.mp4")
    copies, cache = RedactedCopies(), ReportCache()
    timeline: list[dict[str, Any]] = [dict(e) for e in TIMELINE[:3]]

    def same(thumbs: Mapping[str, Sequence[Thumb]] | None = None) -> str:
        summary = copies.copy(live)
        snapshot = list(timeline)  # as the driver's snapshot: a new list of the same entries
        cached = _texts(summary, cache, snapshot, thumbs)
        assert cached == _texts(summary, None, snapshot, thumbs)
        return cached[1]

    same()
    timeline.extend(dict(e) for e in TIMELINE[3:])
    same()
    read = cache.timeline(timeline)
    assert cache.timeline(list(timeline))[0] is read[0]  # entries read once
    live.shots[0].qc = file_qc(shot_qc(), url=str(tmp_path / "qc" / "sc010.json"), name=live.shots[0].name)
    page = same()
    name, qc = live.shots[0].name, copies.copy(live).shots[0].qc
    rows = cache.review_rows(name, qc, [])
    assert rows and cache.review_rows(name, qc, []) is rows
    assert 'id="qc-0"' in page
    thumb = Thumb(frame=6, before_jpeg=b"\xff\xd8before", after_jpeg=b"\xff\xd8after")
    page = same({name: [thumb]})
    placed = cache.review_rows(name, qc, [6])
    assert placed is not rows and [r.thumbnail for r in placed] == [6, None, None]  # placed again
    assert f"{name} position 6 rendered" in page
    live.shots[0].fixes = [FixMark(0, "box", (3, 9), None, "fix 0")]
    assert 'data-fix="0"' in same({name: [thumb]})
    timeline[:] = [dict(e, start=e["start"] + 1.0, end=e["end"] + 1.0) for e in TIMELINE]  # another timeline
    same({name: [thumb]})
    assert cache.timeline(timeline)[0].start == TIMELINE[0]["start"] + 1.0
