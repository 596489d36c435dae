"""What an analysis chunk could not do as configured reaches the job summary's warnings, once."""

from __future__ import annotations

import io
import time

from actors.results import ChunkAnalysis
from cluster.checks.prepare import prepare_job
from cluster.report.metrics import JobMetrics
from cluster.report.progress import Progress
from cluster.schedule.observer import JobObserver
from cluster.spec.job import parse_spec
from jobs.demo_media import make_face_clip, write_source_image


def test_chunk_warnings_are_in_the_summary_once(tmp_path, no_ray) -> None:
    clip = make_face_clip(str(tmp_path / "plate.mp4"), seconds=1.0, width=160, height=120, gop=12)
    spec = parse_spec(
        {
            "job_id": "notes",
            "shots": [{"name": "plate", "url": clip}],
            "identities": {"hero": {"images": [write_source_image(str(tmp_path / "source.jpg"))]}},
            "output": {"url": str(tmp_path / "out" / "{shot}.mp4")},
        }
    )
    observer = JobObserver(
        prepare_job(spec, resume=False),
        started=time.perf_counter(),
        progress=Progress({"plate": 24}, stream=io.StringIO()),
        metrics=JobMetrics("notes"),
        thumbnails=False,
    )
    note = "faces.detect_size auto: detector det.onnx keeps its 640x640 input: it does not run at 192x192"
    for index in range(3):  # every chunk of every actor says it
        observer.analysis_done(
            "plate", ChunkAnalysis(index, 8 * index, [[]] * 8, {}, "actor", warnings=(note,))
        )
    observer.analysis_done("plate", ChunkAnalysis(3, 24, [[]] * 8, {}, "actor"))
    assert observer.summary.warnings.count(note) == 1
