"""A report's data for the report tests: a three-chunk plan, a fake render, a job summary, an
actor timeline and a shot's QC as the driver stores it (shared by ``test_report`` and
``test_report_notes``)."""

from __future__ import annotations

import itertools

from cluster.report.summary import JobSummary, ShotSummary
from pipeline.qc.analyze import ShotQC
from pipeline.video.chunking import Chunk, ChunkPlan
from pipeline.video.decode import decode_range
from pipeline.video.probe import VideoInfo
from tests.clips import ClipSpec, write_clip

FRAMES = 30
BOUNDS = (0, 12, 24, FRAMES)  # three chunks
BOX = (slice(70, 110), slice(20, 60))  # the "face" the fake render paints over (rows, cols)


def plan_of(info: VideoInfo, bounds: tuple[int, ...]) -> ChunkPlan:
    chunks = tuple(
        Chunk(i, a, b, info.pts[a], info.pts[b] if b < info.frame_count else info.end_pts())
        for i, (a, b) in enumerate(itertools.pairwise(bounds))
    )
    return ChunkPlan(frame_count=info.frame_count, chunks=chunks)


def fake_render(source: str, output: str, info: VideoInfo) -> None:
    """Re-encode the source with a magenta box painted over the 'face', like a render would."""
    frames = list(decode_range(source, info, 0, info.frame_count))
    painted = []
    for frame in frames:
        rgb = frame.rgb.copy()
        rgb[BOX] = (230, 0, 230)
        painted.append(rgb)
    spec = ClipSpec(
        width=info.width,
        height=info.height,
        frames=len(painted),
        rate=info.frame_rate,
        time_base=info.time_base,
        gop=None,
        tag_colour=False,
        timecode=None,
        audio=False,
    )
    write_clip(output, spec, painted, pts=[f.pts for f in frames])


def job_summary(output_url: str) -> JobSummary:
    return JobSummary(
        job_id='job-<7>&"x"',
        work_url="s3://bucket/work",
        actors=2,
        wall_seconds=12.6,
        setup_seconds=3.1,
        first_analysis_seconds=4.0,
        first_chunk_seconds=6.2,
        warnings=[
            "ONNX Runtime did not start CUDAExecutionProvider for swap.onnx; running on CPUExecutionProvider"
        ],
        shots=[
            ShotSummary(
                name="sc010",
                url="s3://bucket/src.mp4",
                output_url=output_url,
                status="published",
                frames=FRAMES,
                chunks=3,
                seconds=9.8,
                stage_seconds={"decode": 1.2, "detect": 3.4, "swap": 5.0, "encode": 0.8, "swap.model": 4.1},
                encoder="libx264",
                providers={
                    "swapper": ["CPUExecutionProvider"],
                    "detector": ["CUDAExecutionProvider", "CPUExecutionProvider"],
                },
                chunk_actors=["a0", "a1", "a0"],
                output_bytes=12345,
            ),
            ShotSummary(
                name="<script>alert(1)</script>",
                url="s3://bucket/b.mp4",
                output_url="s3://bucket/out/b.mp4",
                status="failed",
                error="render of chunk 1 failed: <boom>",
                chunks=2,
                seconds=2.0,
                stage_seconds={"decode": 0.5},
            ),
        ],
    )


TIMELINE = [
    {"actor": "a0", "shot": "sc010", "chunk": 0, "kind": "analyze", "start": 3.2, "end": 4.0},
    {"actor": "a1", "shot": "sc010", "chunk": 1, "kind": "analyze", "start": 3.2, "end": 4.1},
    {"actor": "a0", "shot": "sc010", "chunk": 2, "kind": "analyze", "start": 4.0, "end": 4.6},
    {"actor": "a0", "shot": "sc010", "chunk": 0, "kind": "render", "start": 4.7, "end": 6.2},
    {
        "actor": "a1",
        "shot": "sc010",
        "chunk": 1,
        "kind": "render",
        "start": 4.7,
        "end": 6.9,
        "ok": False,
        "attempt": 1,
    },
    {"actor": "a0", "shot": "sc010", "chunk": 1, "kind": "render", "start": 6.9, "end": 8.8, "attempt": 2},
    {"actor": "a1", "shot": "sc010", "chunk": 2, "kind": "render", "start": 7.0, "end": 8.5},
]


def shot_qc() -> ShotQC:
    """A QC result as the driver stores it: flags on frames 5-7 (no thumbnail), 11-12 and 23."""
    from pipeline.qc.analyze import QcSeries
    from pipeline.qc.records import Flag

    coverage = {s: [0] * FRAMES for s in ("replaced", "bridged", "hidden", "unreplaced")}
    for t in range(FRAMES):
        coverage["unreplaced" if 5 <= t <= 7 else "replaced"][t] = 1
    flags = (
        Flag(
            "sc010", 5, 7, 0, "unreplaced", 0.85, 3.0, 1.0, "face of track 0 left as the plate", {"peak": 5}
        ),
        Flag("sc010", 23, 23, 0, "low_identity", 0.62, 0.21, 0.3, "output 0.21 to 'anna'", {"peak": 23}),
        Flag(
            "sc010",
            11,
            12,
            0,
            "flicker",
            0.5,
            5.0,
            3.0,
            "<across> a chunk boundary",
            {"chunk_boundary": True},
        ),
    )
    series = QcSeries(
        numbers=list(range(FRAMES)),
        similarity_after=[0.21 if t == 23 else (0.55 if t % 4 == 0 else None) for t in range(FRAMES)],
        similarity_before=[0.1] * FRAMES,
        coverage=coverage,
        jitter=[0.001] * FRAMES,
        flicker=[5.0 if t == 12 else 0.0 for t in range(FRAMES)],
        seam=[1.1] * FRAMES,
    )
    return ShotQC("sc010", 0, flags, series, {0: {"identity": "anna"}}, {12: 5.0, 24: 0.0})
