"""Tracking and planning in the planner actors equal the driver-side chain they replaced.

A shot's chunks are analysed out of order by many actors; its planner actor (a real Ray actor)
must still chain the tracker through them in order and plan exactly what the driver planned when
it did the work itself: the same track ids and tracker states, the same face tasks (read back from
the object store) and render keys.  On randomised single- and multi-face shots, a crowd of
twelve faces per frame, and three real faces detected by the default pack's models.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import ray

from bench.driver_scale.scale import ScaleSettings, prepare, scale_spec
from cluster.report.qcfile import FiledQC, load_series, qc_file_url
from cluster.schedule.planner import PlanContext, ShotPlanner
from cluster.schedule.shot_worker import ShotWorkers
from cluster.state.ledger import Ledger
from cluster.state.manifest import JobManifest
from pipeline.geometry.types import Face
from pipeline.tracking.tracker import track_chunk
from pipeline.video.encode import EncoderChoice
from tests.faces_data import multi_face_clip
from tests.tracking_media import assert_tasks_identical, crowd_shot, moving_shot, multi_face_shot

pytestmark = pytest.mark.ray

ENCODER = EncoderChoice("libx264", "yuv420p", {}, False, "mkv")
SHOTS = {
    "single_face": lambda: moving_shot(kind="sine", noise_px=1.0).faces[:80],
    "multi_face": lambda: multi_face_shot().faces,
    "crowd": lambda: crowd_shot(240).faces,
}


def _job(tmp_path, faces: list[list[Face]], chunks: int):
    """One simulated shot of ``len(faces)`` frames in ``chunks`` chunks of 10 s, planned as a job."""
    fps = len(faces) // (chunks * 10)
    settings = ScaleSettings(out=str(tmp_path), shots=1, chunks_per_shot=chunks, chunk_seconds=10, fps=fps)
    prepared = prepare(settings, scale_spec(settings), resumed=False)
    (shot,) = prepared.planned
    assert shot.plan.frame_count == len(faces) and len(shot.plan.chunks) == chunks
    first = next(f for frame in faces for f in frame)
    context = PlanContext.of(prepared, {"hero": np.asarray(first.embedding, np.float32)})
    return prepared, shot, context


@pytest.mark.parametrize("name", [*sorted(SHOTS), "real_multi_face"])
def test_planner_actor_tracks_and_plans_as_the_driver_did(name: str, tmp_path, ray_local, request) -> None:
    if name == "real_multi_face":  # three real faces, one entering half-way, detected and embedded
        from pipeline.faces.analyze import FaceAnalyzer

        faces = FaceAnalyzer(request.getfixturevalue("default_models")).analyze(multi_face_clip(40).frames)
        assert max(len(f) for f in faces) == 3
    else:
        faces = SHOTS[name]()
    chunks = 4
    prepared, shot, context = _job(tmp_path / "actor", faces, chunks)
    spans = [(c.start_frame, c.end_frame) for c in shot.plan.chunks]

    # The driver-side chain it replaced: in order, then planned, on its own work area.
    _, _, reference_context = _job(tmp_path / "driver", faces, chunks)
    ledger = Ledger(JobManifest(reference_context.work_url), resumed=False)
    state, ids = None, []
    for start, end in spans:
        chunk_ids, state = track_chunk(faces[start:end], start, context.spec.tracking, state)
        ids.extend(chunk_ids)
    expected = ShotPlanner(reference_context, ledger).plan(shot, ENCODER, faces, ids)

    workers = ShotWorkers(context, manifest_key=None, count=2, shots=[shot.ref.name])
    try:
        opened = workers.open(shot, ENCODER).result(timeout=60)
        assert opened.reused == () and opened.tracked == 0 and opened.renders is None
        steps = []
        for index in (2, 0, 3, 1):  # as analyses come back from many actors
            start, end = spans[index]
            steps.append(workers.add_analysis(shot.ref.name, index, ray.put(faces[start:end]), "actor"))
        done = [s.result(timeout=120) for s in steps]
        finished = workers.finish(shot.ref.name, []).result(timeout=120)
    finally:
        workers.close()
    # QC is concluded and filed in the planner actor: the driver gets the QC without its series,
    # which are in the shot's QC file, and the strip chart drawn.
    qc = finished.qc
    assert isinstance(qc, FiledQC) and qc.series_url == qc_file_url(prepared.work_url, shot.ref.name)
    assert list(qc.numbers) == list(range(len(faces))) and "<svg" in qc.chart
    series = load_series(qc.to_dict())
    assert len(series["numbers"]) == len(faces) and set(series) >= {"numbers", "similarity_after"}
    assert [d.tracked for d in done] == [0, 1, 0, 3]  # chunk 0 lets 0 track, chunk 1 lets 1-3
    assert sum(d.faces for d in done) == sum(len(f) for f in faces)
    assert [d.renders is not None for d in done] == [False, False, False, True]
    assert sum(d.records for d in done) == 2 * chunks  # each chunk's analysis and tracking record
    renders = done[-1].renders
    assert renders is not None and renders.tracks == expected.tracks
    assert [c.key for c in renders.chunks] == [c.key for c in expected.chunks]
    for got, want in zip(renders.chunks, expected.chunks, strict=True):
        assert isinstance(got.tasks, ray.ObjectRef)  # the driver hands it on unread
        assert_tasks_identical(ray.get(got.tasks), want.tasks)
    # The tracking records it committed hold the chain's ids, chunk by chunk.
    manifest = JobManifest(prepared.work_url)
    for index, (start, end) in enumerate(spans):
        record = manifest.read_track(shot.ref.name, index)
        assert record is not None and record["track_ids"] == [list(map(int, f)) for f in ids[start:end]]
    final = manifest.read_track(shot.ref.name, chunks - 1)
    assert final is not None
    assert json.dumps(final["state_out"], sort_keys=True) == json.dumps(state.to_dict(), sort_keys=True)
