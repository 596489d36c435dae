"""Look for a Recast invisible watermark in a video and print the job payload.

    python -m jobs.detect_watermark clip.mp4 [--job-id JOB] [--key KEY] [--window 24] [--max-frames 480]

Scans every frame (no face boxes needed), summing the mark's votes over
windows of ``--window`` frames, and reports each window's payload and the
payload found over the whole scan.  ``--job-id`` names the job to compare with
(its payload is printed).  The key and step must match the render's watermark
settings.  Exit status: 0 when a payload is found (and matches ``--job-id`` if
given), 1 when none is found or it differs, 2 for an unreadable input.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.provenance.watermark import Votes

EXIT_FOUND, EXIT_NOT_FOUND, EXIT_BAD_INPUT = 0, 1, 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jobs.detect_watermark", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("video", help="video file (local path or URL)")
    parser.add_argument("--job-id", help="job id to compare the payload with")
    parser.add_argument("--key", default="recast", help="watermark key used at render time")
    parser.add_argument("--step", type=float, default=None, help="QIM step used at render time")
    parser.add_argument("--window", type=int, default=24, help="frames per detection window")
    parser.add_argument("--max-frames", type=int, default=480, help="stop after this many frames")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    import av

    from pipeline import storage
    from pipeline.errors import RecastError
    from pipeline.provenance import watermark

    config = watermark.WatermarkConfig(key=args.key, **({"step": args.step} if args.step else {}))
    windows: list[dict[str, object]] = []
    total = watermark.Votes(config)
    frames = 0
    try:
        with (
            storage.fetched(args.video, suffix=PurePosixPath(args.video).suffix) as local,
            av.open(local) as container,
        ):
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            window = watermark.Votes(config)
            for frame in container.decode(stream):
                if frames >= args.max_frames:
                    break
                window.add(frame.to_ndarray(format="rgb24"))
                frames += 1
                if frames % args.window == 0:
                    windows.append(_window(window, frames))
                    total.merge(window)
                    window = watermark.Votes(config)
            if frames % args.window:
                windows.append(_window(window, frames))
                total.merge(window)
    except (RecastError, av.FFmpegError) as exc:
        print(f"recast detect_watermark: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    overall = total.result() if frames else None
    found = overall.payload if overall else None
    expected = watermark.job_payload(args.job_id) if args.job_id else None
    report = {
        "video": args.video,
        "frames": frames,
        "payload": None if found is None else f"{found:08x}",
        "confidence": overall.confidence if overall else 0.0,
        "z_mean": overall.z_mean if overall else 0.0,
        "expected_payload": None if expected is None else f"{expected:08x}",
        "windows": windows,
    }
    print(json.dumps(report, indent=1))
    if found is None or (expected is not None and found != expected):
        return EXIT_NOT_FOUND
    return EXIT_FOUND


def _window(votes: Votes, end_frame: int) -> dict[str, object]:
    result = votes.result()
    return {
        "end_frame": end_frame,
        "payload": None if result.payload is None else f"{result.payload:08x}",
        "confidence": round(result.confidence, 4),
    }


if __name__ == "__main__":
    sys.exit(main())
