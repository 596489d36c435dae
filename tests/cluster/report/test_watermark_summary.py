"""Which frames got the watermark: recorded per chunk by the actor's marker, kept in the manifest,
summed per shot in the summary, and shown in the report's provenance block."""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np

from actors.marking import FrameMarker, frame_ranges
from actors.results import ChunkWatermark
from cluster.report.data import report_data
from cluster.report.html import render_html
from cluster.report.summary import JobSummary, ShotSummary, WatermarkSummary
from cluster.schedule.calls import reused_segment, segment_record
from cluster.state.manifest import JobManifest, SegmentHome
from pipeline.geometry.types import FaceTask
from pipeline.provenance.watermark import WatermarkConfig, detect, job_payload
from pipeline.video.encode import EncoderChoice

PAYLOAD = job_payload("job-7")


def _task(box: tuple[float, float, float, float]) -> FaceTask:
    return FaceTask(0, "hero", np.array(box, np.float32), np.zeros((5, 2), np.float32))


def test_frame_ranges() -> None:
    assert frame_ranges([]) == []
    assert frame_ranges([5, 3, 4, 9, 10, 12, 4]) == [[3, 5], [9, 10], [12, 12]]


def test_marker_records_the_frames_it_marked() -> None:
    rng = np.random.default_rng(1)
    frame = rng.integers(40, 200, (96, 128, 3), dtype=np.uint8)
    config = WatermarkConfig(step=40.0)
    # Source positions 10.. are frame numbers 1010.. (an image sequence numbered from 1001).
    marker = FrameMarker(config, PAYLOAD, False, lambda position: position + 1000)
    big, tiny = _task((8, 8, 100, 90)), _task((50, 50, 56, 56))  # tiny: no whole 8x8 block
    outs = [
        marker(i, frame, tasks)
        for i, tasks in ((10, [big]), (11, [big]), (12, [tiny]), (13, []), (14, [big]))
    ]
    assert detect(outs[0], [big.box], config)[0] == PAYLOAD
    assert all((out == frame).all() for out in outs[2:4])
    assert marker.record() == ChunkWatermark(
        payload=f"{PAYLOAD:08x}", step=40.0, frames=((1010, 1011), (1014, 1014))
    )
    # No watermark configured: nothing recorded, the label alone is drawn.
    labelled = FrameMarker(None, None, True, int)
    assert labelled.record() is None and not (labelled(0, frame, [big]) == frame).all()


def test_summary_merges_chunks_in_any_order_and_the_report_shows_them() -> None:
    shot = ShotSummary("plate", "in.mp4", "out.mp4", status="published", frames=300)
    shot.add_watermark(None)
    assert shot.watermark is None
    step, hexed = 32.0, f"{PAYLOAD:08x}"
    for frames in (((100, 149),), ((0, 40), (45, 99)), ((150, 160), (170, 199))):
        shot.add_watermark(ChunkWatermark(payload=hexed, step=step, frames=frames))
    assert shot.watermark == WatermarkSummary(
        payload=hexed, step=step, frames_marked=41 + 116 + 30, frame_ranges=((0, 40), (45, 160), (170, 199))
    )
    summary = JobSummary("job-7", "/work", [shot, ShotSummary("other", "b.mp4", "b-out.mp4")])
    assert summary.to_dict()["shots"][0]["watermark"] == {
        "payload": hexed,
        "step": step,
        "frames_marked": 187,
        "frame_ranges": [[0, 40], [45, 160], [170, 199]],
    }
    assert "watermark " + hexed + " (step 32): 187 frames marked" in summary.table()
    page = render_html(report_data(summary), {})
    block = page[page.index('id="provenance"') :]
    assert hexed in block and "187 of 300" in block and "0–40, 45–160, 170–199" in block
    # No watermarked shot: no provenance block.
    assert 'id="provenance"' not in render_html(report_data(JobSummary("j", "/w", [])), {})


def test_manifest_keeps_the_chunk_record(tmp_path) -> None:
    from actors.results import SegmentResult

    folder = tmp_path / "work" / "segments" / "plate"
    folder.mkdir(parents=True)
    segment = folder / "seg-00000.mp4"
    segment.write_bytes(b"x" * 10)
    digest = hashlib.sha256(b"x" * 10).hexdigest()
    mark = ChunkWatermark(payload=f"{PAYLOAD:08x}", step=32.0, frames=((0, 23),))
    result = SegmentResult(
        chunk_index=0,
        url=str(segment),
        sha256=digest,
        bytes=10,
        frames=24,
        faces_swapped=24,
        stage_seconds={},
        providers={},
        encoder="libx264",
        actor="a0",
        wall_seconds=1.0,
        watermark=mark,
    )
    manifest = JobManifest(os.fspath(tmp_path / "work"))
    manifest.write_render("plate", segment_record(result, "key-0"))
    stored = json.loads((tmp_path / "work" / "manifest" / "plate" / "render-00000.json").read_text())
    assert stored["watermark"] == {"payload": f"{PAYLOAD:08x}", "step": 32.0, "frames": [[0, 23]]}
    record = manifest.read_render("plate", 0, "key-0", SegmentHome(folder=str(folder)))
    assert record is not None and record.watermark == mark
    assert reused_segment(record, EncoderChoice("libx264", "yuv420p", {}, False, "mp4")).watermark == mark
