"""One CPU decode per frame: a chunk's render fed by its analysis' decoded pictures, against decoding again.

In-process on the analysis figures' actor (``analysis.py``), right after it analysed the
chunk: the render of that chunk (no face tasks: the swap costs the same either way) once
from the pictures the analysis kept (``resources.decode_cache_mb``) and once decoding the
chunk again; the two segments must be byte-identical.  Figures: decode calls per frame
(analysis + render), actor seconds of the render and of analysis + render, and the frames
per second of the two passes together.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

from actors.render import RenderWorker
from pipeline.video.chunking import Chunk
from pipeline.video.encode import EncodeSettings, choose_encoder
from pipeline.video.probe import VideoInfo


def measure_render_reuse(
    worker: RenderWorker, clip: str, info: VideoInfo, chunk: Chunk, analysis_seconds: float
) -> dict[str, Any]:
    """Render ``chunk`` (just analysed by ``worker``) from the kept pictures, then decoding it again."""
    n = chunk.end_frame - chunk.start_frame
    encoder = choose_encoder(
        EncodeSettings(codec="h264", preset="veryfast", quality=18, hardware=False), info
    )
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="recast-reuse-") as tmp:
        for name in ("cache", "no_cache"):  # the first render takes the kept pictures; the second decodes
            started = time.perf_counter()
            result = worker.render_chunk(
                clip,
                info,
                chunk,
                [[] for _ in range(n)],
                encoder=encoder,
                segment_url=os.path.join(tmp, f"{name}.mp4"),
            )
            seconds = time.perf_counter() - started
            runs[name] = {
                "render_seconds": round(seconds, 4),
                "render_decode_seconds": round(result.stage_seconds.get("decode", 0.0), 4),
                "frames_reused": result.frames_reused,
                "decode_calls_per_frame": round((n + result.frames_decoded) / max(1, n), 3),
                "actor_seconds": round(analysis_seconds + seconds, 4),
                "fps": round(n / (analysis_seconds + seconds), 3),
                "sha256": result.sha256,
            }
    runs["identical"] = runs["cache"]["sha256"] == runs["no_cache"]["sha256"]
    return runs


def reuse_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Lines for the analysis table: decode calls per frame, render and total actor ms per frame, fps."""
    lines = []
    for row in rows:
        reuse = row.get("reuse")
        if not reuse or "error" in row:
            continue
        n = max(1, row["frames"])
        a, b = reuse["cache"], reuse["no_cache"]
        lines.append(
            f"{row.get('label', row['size']):<28} decode calls/frame {a['decode_calls_per_frame']:.1f} "
            f"(no cache {b['decode_calls_per_frame']:.1f}); render {1000 * a['render_seconds'] / n:.1f} "
            f"vs {1000 * b['render_seconds'] / n:.1f} ms/frame; analysis+render {a['fps']:.2f} vs "
            f"{b['fps']:.2f} fps; identical {reuse['identical']}"
        )
    return lines
