"""What the analysis pass's decode costs, and what the options for a cheaper one would save.

Per frame of a clip, one codec thread, the options interleaved frame by frame so
that a busy machine slows them alike:

* ``decode``: the codec alone (PyAV frames, no pixel conversion);
* ``rgb``: what the analysis and render passes do today, YUV -> RGB at full size
  (``to_ndarray(format="rgb24")``);
* ``rgb_then_letterbox``: that plus the detector's resize to its 640 px input
  (``cv2.resize``, INTER_AREA), today's path to the detector;
* ``scaled_rgb``: the decoder's own scaler straight to the detector's size
  (``reformat(width, height, "rgb24")``): no full-size RGB frame at all.

    python -m bench.analysis_pass.decode_options CLIP [--frames 48] [--size 640]

``scaled_rgb`` gives the detector different pixels (swscale's filter, not
OpenCV's), so it would change detections: an opt-in for the analysis pass only,
never for the render pass, whose output must stay byte-identical.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import av
import cv2

OPTIONS = ("decode", "rgb", "rgb_then_letterbox", "scaled_rgb")


def measure_decode_options(clip: str, *, frames: int = 48, size: int = 640) -> dict[str, Any]:
    """Milliseconds per frame of each option on the first ``frames`` frames of ``clip``."""
    seconds = dict.fromkeys(OPTIONS, 0.0)
    n = 0
    with av.open(clip) as container:
        stream = container.streams.video[0]
        stream.thread_type = "NONE"
        width, height = stream.codec_context.width, stream.codec_context.height
        scale = min(size / width, size / height)
        nw, nh = max(1, round(width * scale)), max(1, round(height * scale))
        decoded = container.decode(stream)
        while n < frames:
            t0 = time.perf_counter()
            frame = next(decoded, None)
            t1 = time.perf_counter()
            if frame is None:
                break
            seconds["decode"] += t1 - t0
            rgb = frame.to_ndarray(format="rgb24")
            t2 = time.perf_counter()
            seconds["rgb"] += t2 - t1
            cv2.resize(rgb, (nw, nh), interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)
            t3 = time.perf_counter()
            seconds["rgb_then_letterbox"] += t3 - t2
            frame.reformat(width=nw, height=nh, format="rgb24", interpolation="AREA").to_ndarray()
            seconds["scaled_rgb"] += time.perf_counter() - t3
            n += 1
    ms = {k: 1000 * v / max(1, n) for k, v in seconds.items()}
    totals = {
        "decode": ms["decode"],
        "rgb": ms["decode"] + ms["rgb"],
        "rgb_then_letterbox": ms["decode"] + ms["rgb"] + ms["rgb_then_letterbox"],
        "scaled_rgb": ms["decode"] + ms["scaled_rgb"],
    }
    return {
        "clip": clip,
        "size": f"{width}x{height}",
        "frames": n,
        "ms_per_frame": {k: round(v, 3) for k, v in totals.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("clip")
    parser.add_argument("--frames", type=int, default=48)
    parser.add_argument("--size", type=int, default=640)
    args = parser.parse_args(argv)
    print(json.dumps(measure_decode_options(args.clip, frames=args.frames, size=args.size), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
