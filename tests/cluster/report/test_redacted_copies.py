"""The report's snapshots of a running job's summary: redacted copies that remember what they redacted,
and the JSON layout report.json and summary.json are written in."""

from __future__ import annotations

import dataclasses
import json

from actors.results import ChunkWatermark
from cluster.report.build import build_report, json_text
from cluster.report.summary import JobSummary, RedactedCopies
from pipeline.store.redact import REDACTED, Redactor, redact
from tests.cluster.report.sample_report import TIMELINE, job_summary, shot_qc

KEY = "AKIAIOSFODNN7EXAMPLE"
SECRET_URL = f"s3://{KEY}:pw@bucket/plates/a.mov"


def _record(chunk: int, actor: str = "a1") -> dict[str, object]:
    return {"kind": "render", "shot": "shot_a", "chunk": chunk, "actor": actor, "attempt": 1, "ok": True}


def _check(copies: RedactedCopies, summary: JobSummary) -> JobSummary:
    copy = copies.copy(summary)
    assert copy.to_dict() == redact(summary.to_dict())
    assert KEY not in json.dumps(copy.to_dict(), default=str)
    return copy


def test_every_copy_is_redacted_whatever_changed_since_the_copy_before() -> None:
    summary = job_summary("out.mp4")
    shot = summary.shots[0]
    copies = RedactedCopies()
    first = _check(copies, summary)

    # A credential that turns up later: in the shot's URL, its error, a timeline record appended
    # after the first copy, its QC (a frozen dataclass) and the job's warnings.
    shot.url = SECRET_URL
    shot.error = f"could not read {SECRET_URL}"
    shot.timeline.append({**_record(7), "actor": f"actor on {SECRET_URL}"})
    shot.qc = shot_qc()
    shot.add_watermark(ChunkWatermark(payload="0badf00d", step=32.0, frames=((0, 4),)))
    summary.warnings.append(f"token={KEY}")
    second = _check(copies, summary)
    assert second.shots[0].url.count(REDACTED) == 1 and second.shots[0].timeline[-1]["actor"].count(REDACTED)

    # Copies are snapshots: what is appended afterwards is in none of them.
    shot.timeline.append(_record(8))
    third = _check(copies, summary)
    assert len(third.shots[0].timeline) == len(second.shots[0].timeline) + 1
    assert len(first.shots[0].timeline) == len(second.shots[0].timeline) - 1
    assert KEY not in first.shots[0].url and first.shots[0].error is None

    # A timeline replaced, or cut shorter, is redacted again whole.
    shot.timeline = [{**_record(1), "actor": SECRET_URL}]
    assert _check(copies, summary).shots[0].timeline[0]["actor"] != SECRET_URL
    shot.timeline.clear()
    shot.timeline.append({**_record(2), "actor": f"x {SECRET_URL}"})
    assert KEY not in json.dumps(_check(copies, summary).shots[0].timeline)

    # A frozen part replaced by another: the new one is redacted.
    assert shot.qc is not None
    shot.qc = dataclasses.replace(shot.qc, shot=SECRET_URL)
    _check(copies, summary)


def test_the_redactor_redacts_as_redact_does() -> None:
    values = [
        SECRET_URL,
        {"aws_secret_access_key": "x", "url": SECRET_URL, "nested": [SECRET_URL, ("Bearer abc.def",)]},
        {"token": None, "password": "", "n": 1.5, "ok": True},
        [1, None, 2.0, "plain"],
    ]
    redactor = Redactor()
    for value in values * 2:  # the second time from what it remembers
        assert redactor(value) == redact(value)


def test_json_text_reads_back_as_the_same_json() -> None:
    summary = job_summary("out.mp4")
    summary.shots[0].qc = shot_qc()
    summary.shots[0].timeline.extend([_record(1), {**_record(2), "actor": "a}, {b"}])
    report, _ = build_report(summary, thumbs={}, timeline=TIMELINE)
    for value in (report, summary.to_dict(), {"k": {1: [2]}, "e": {}, "l": [[1], []], "t": [{}, None]}):
        text = json_text(value)
        assert json.loads(text) == json.loads(json.dumps(value, default=str))
    lines = json_text(report).splitlines()
    # Objects that hold objects one key a line; each timeline record on one line.
    assert lines[0] == "{" and lines[1] == '  "schema": 1,' and lines[-1] == "}"
    timeline = lines.index('  "timeline": [')
    assert json.loads(lines[timeline + 1].rstrip(",")) == report["timeline"][0]
