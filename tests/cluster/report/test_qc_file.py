"""A shot's QC reaches the driver once: its per-frame series go to the shot's QC file, the driver keeps the
rest (no series), and report.json / summary.json name the file (``series_url``) instead of the series."""

from __future__ import annotations

import bisect
import dataclasses
import gc
import io
import json
import time
import types
from pathlib import Path
from typing import Any

from cluster.checks.prepare import prepare_job
from cluster.report.metrics import JobMetrics
from cluster.report.progress import Progress
from cluster.report.qcfile import FiledQC, FrameNumbers, load_series, qc_file_url
from cluster.schedule.observer import JobObserver
from cluster.spec.job import parse_spec
from jobs.demo_media import make_face_clip, write_source_image
from pipeline.qc.analyze import QcSeries, ShotQC
from pipeline.qc.config import QcConfig
from pipeline.store import storage
from pipeline.store.redact import redact
from tests.cluster.report.sample_report import FRAMES, shot_qc

KEY = "AKIAIOSFODNN7EXAMPLE"


def _observer(tmp_path: Any) -> JobObserver:
    clip = make_face_clip(str(tmp_path / "plate.mp4"), seconds=1.0, width=160, height=120, gop=12)
    spec = parse_spec(
        {
            "job_id": "qcfile",
            "shots": [{"name": "plate", "url": clip}],
            "identities": {"hero": {"images": [write_source_image(str(tmp_path / "source.jpg"))]}},
            "output": {"url": str(tmp_path / "out" / "{shot}.mp4")},
        }
    )
    return JobObserver(
        prepare_job(spec, resume=False),
        started=time.perf_counter(),
        progress=Progress({"plate": 24}, stream=io.StringIO()),
        metrics=JobMetrics("qcfile"),
        thumbnails=False,
    )


def _reachable(root: object, kinds: tuple[type, ...]) -> list[object]:
    """The objects of ``kinds`` reachable from ``root`` (not through modules, classes or functions)."""
    skip = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType)
    seen, todo, found = {id(root)}, [root], []
    while todo:
        obj = todo.pop()
        if isinstance(obj, kinds):
            found.append(obj)
        for ref in gc.get_referents(obj):
            if id(ref) not in seen and not isinstance(ref, skip):
                seen.add(id(ref))
                todo.append(ref)
    return found


def test_the_qc_file_holds_the_series_and_the_driver_keeps_none(tmp_path, no_ray) -> None:
    observer = _observer(tmp_path)
    sample = shot_qc()
    flag = dataclasses.replace(sample.flags[0], detail=f"read from s3://{KEY}:pw@bucket/plate.mov")
    qc: ShotQC | None = dataclasses.replace(sample, shot="plate", flags=(flag, *sample.flags[1:]))
    assert qc is not None
    expected = redact(qc.to_dict())
    series = qc.to_dict()["series"]
    observer.shot_qc("plate", qc, QcConfig())
    del qc

    # The file: the whole QC, series included, redacted.
    url = qc_file_url(observer.summary.work_url, "plate")
    text = storage.read_bytes(url).decode()
    assert json.loads(text) == expected and expected["series"] == series
    assert KEY not in text and "REDACTED" in text

    # The driver: no series, no QC object that holds them (the summary, its redacted copies, the cache).
    kept = observer.shots["plate"].qc
    assert isinstance(kept, FiledQC) and kept.series_url == url and list(kept.numbers) == series["numbers"]
    observer.write_report(finished=False)
    observer.write_summary()
    observer.write_report(finished=True)
    assert _reachable(observer, (ShotQC, QcSeries)) == [] and _reachable(observer, (FiledQC,))

    work = Path(storage.local_path(observer.summary.work_url))
    summary = json.loads((work / "summary.json").read_text())
    report = json.loads((work / "report.json").read_text())
    page = (work / "report.html").read_text()
    for shot in (summary["shots"][0], report["shots"][0]):
        assert "series" not in shot["qc"] and shot["qc"]["series_url"] == url
        assert {k: v for k, v in shot["qc"].items() if k != "series_url"} == {
            k: v for k, v in expected.items() if k != "series"
        }
        assert load_series(shot["qc"]) == series
    assert list(summary["shots"][0]["qc"]) == [k if k != "series" else "series_url" for k in expected]
    assert report["shots"][0]["qc_file"] == "qc/plate.json"
    assert 'href="qc/plate.json"' in page and "polyline" in page
    assert all(KEY not in t for t in (page, json.dumps(summary), json.dumps(report)))


def test_a_filed_qc_shows_as_the_whole_qc_did(tmp_path) -> None:
    """The report's cards, review list and chart of a filed QC are those of the QC it was made of."""
    from cluster.report.cache import ReportCache, file_qc
    from cluster.report.data import report_data
    from cluster.report.html import render_html
    from tests.cluster.report.sample_report import job_summary

    live = job_summary("out.mp4")
    live.shots[0].qc = shot_qc()
    whole = render_html(report_data(live, generated_at=None), {}, charts=ReportCache().strip_chart)
    live.shots[0].qc = file_qc(
        shot_qc(), url=str(tmp_path / "qc" / "sc010.json"), name=live.shots[0].name, fixes=live.shots[0].fixes
    )
    filed = render_html(report_data(live, generated_at=None), {}, charts=ReportCache().strip_chart)
    assert len(filed) > len(whole) and "numbers per frame" in filed
    cut = filed.index('<div class="meta">numbers per frame:')
    end = filed.index("</div>", cut) + len("</div>")
    assert _no_dates(filed[:cut] + filed[end:]) == _no_dates(whole)


def _no_dates(page: str) -> str:
    import re

    return re.sub(r"\d{4}-\d\d-\d\dT[\d:+]+", "", page)


def test_frame_numbers_are_the_numbers_they_were_made_of() -> None:
    for numbers in ([], [7], list(range(1001, 1001 + FRAMES)), [1, 2, 3, 10, 11, 20, 40, 41, 42]):
        runs = FrameNumbers.of(numbers)
        assert list(runs) == numbers and len(runs) == len(numbers)
        assert [runs[i] for i in range(len(numbers))] == numbers and list(runs[1:3]) == numbers[1:3]
        assert all(bisect.bisect_left(runs, n) == numbers.index(n) for n in numbers)
        assert [runs.position(n) for n in range(-1, 1100)] == [
            numbers.index(n) if n in numbers else None for n in range(-1, 1100)
        ]
    assert len(FrameNumbers.of(list(range(14_400))).runs) == 1


def test_a_qc_file_that_cannot_be_written_leaves_the_qc_whole(tmp_path, no_ray) -> None:
    observer = _observer(tmp_path)
    work = Path(storage.local_path(observer.summary.work_url))
    work.mkdir(parents=True, exist_ok=True)
    (work / "qc").write_text("a file where the folder would be")
    qc = dataclasses.replace(shot_qc(), shot="plate")
    observer.shot_qc("plate", qc, QcConfig())
    assert observer.shots["plate"].qc is qc
    assert any(w.startswith("QC file of plate:") for w in observer.summary.warnings)
    observer.write_summary()
    assert (
        json.loads((work / "summary.json").read_text())["shots"][0]["qc"]["series"] == qc.to_dict()["series"]
    )
