"""Look for a Recast invisible watermark in a video and print the job payload.

    python -m jobs.detect_watermark clip.mp4 [--job-id JOB] [--key KEY] [--window 24] [--max-frames 480]
        [--pack URL] [--all-blocks]

Finds the faces in every frame with the model pack's detector (the embedded
default pack unless ``--pack`` names another) and reads the mark only in the
8x8 grid blocks wholly inside each face box, as the render marked them; votes
are summed over the faces of windows of ``--window`` frames, and over the
whole scan.  ``--all-blocks`` reads every block of every frame instead (no
detector: slower to converge when the face is a small part of the frame).
``--job-id`` names the job to compare with (its payload is printed).  The key
and step must match the render's watermark settings.  Exit status: 0 when a
payload is found (and matches ``--job-id`` if given), 1 when none is found or it
differs, 2 for an unreadable input or model pack.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.models.roles import Detector
    from pipeline.provenance.watermark import Detection

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
    parser.add_argument("--pack", default="builtin:default", help="model pack whose detector finds the faces")
    parser.add_argument("--all-blocks", action="store_true", help="read every block, not only the faces")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if args.window < 1 or args.max_frames < 1:
        print("recast detect_watermark: --window and --max-frames must be at least 1", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.step is not None and not args.step > 0:
        print(f"recast detect_watermark: --step must be positive, got {args.step}", file=sys.stderr)
        return EXIT_BAD_INPUT

    import av

    from jobs.cli import url_credentials_refused
    from pipeline.errors import RecastError
    from pipeline.store.redact import redact, redact_process_output, redact_text

    redact_process_output()  # a URL given with a password (s3://user:pw@bucket/x.mp4) is never printed
    if url_credentials_refused("recast detect_watermark", args.video, args.pack):
        return EXIT_BAD_INPUT
    from pipeline.provenance import watermark
    from pipeline.provenance.watermark_read import read_clip, scan

    try:
        config = watermark.WatermarkConfig(
            key=args.key, **({"step": args.step} if args.step is not None else {})
        )
        detector = None if args.all_blocks else _detector(args.pack)
        reading = read_clip(args.video, detector, max_frames=args.max_frames)
    except (RecastError, av.FFmpegError, ValueError) as exc:
        print(f"recast detect_watermark: {redact_text(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    result = scan(reading, config, args.window)
    overall = result.overall if reading.frames else None
    found = overall.payload if overall else None
    expected = watermark.job_payload(args.job_id) if args.job_id else None
    report = {
        "video": args.video,
        "frames": reading.frames,
        "read": "every block" if reading.all_blocks else f"face blocks ({args.pack} detector)",
        "frames_with_faces": sum(1 for n in reading.faces if n),
        "payload": None if found is None else f"{found:08x}",
        "confidence": overall.confidence if overall else 0.0,
        "z_mean": overall.z_mean if overall else 0.0,
        "expected_payload": None if expected is None else f"{expected:08x}",
        "windows": [_window(r, end) for end, r in result.windows],
    }
    print(json.dumps(redact(report), indent=1))
    if found is None or (expected is not None and found != expected):
        return EXIT_NOT_FOUND
    return EXIT_FOUND


def _detector(pack_url: str) -> Detector:
    from pipeline.models.loader import load_detector
    from pipeline.models.pack import load_pack
    from pipeline.models.runtime.settings import ExecutionConfig

    return load_detector(load_pack(pack_url), ExecutionConfig(providers=("CPUExecutionProvider",)))


def _window(result: Detection, end_frame: int) -> dict[str, object]:
    return {
        "end_frame": end_frame,
        "payload": None if result.payload is None else f"{result.payload:08x}",
        "confidence": round(result.confidence, 4),
    }


if __name__ == "__main__":
    sys.exit(main())
