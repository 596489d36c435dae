"""NVDEC against PyAV: decode frames per second at 1080p and 4K, and whether the frames are equal.

On a GPU machine with ``PyNvVideoCodec`` (``infra/device/h200_check.sh`` runs it)::

    python3 -m bench.device.nvdec --out out/nvdec            # writes nvdec_bench.json
    python3 -m bench.device.nvdec --out /tmp/nv --quick      # 1080p only, fewer frames

Per clip (generated here: H.264 8-bit and HEVC 10-bit, 4:2:0, B-frames, one
keyframe a second) it times, over the whole clip:

* ``pyav_fps``: :func:`pipeline.video.decode.decode_range` (FFmpeg on every core, RGB frames);
* ``nvdec_fps``: :func:`pipeline.video.nvdec.nvdec_range` (NVDEC, the same RGB frames);
* ``nvdec_device_fps``: NVDEC alone, each surface copied once in device memory
  (:func:`pipeline.video.nvdec.device_surfaces`): the ceiling of a device-resident path;

and compares ``nvdec_range``'s frames with ``decode_range``'s: count, pts, largest
difference in code values.  Without NVDEC (no package or no CUDA) the JSON says why
and only PyAV is timed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import time
from collections.abc import Iterator, Sequence
from fractions import Fraction
from typing import Any

import av
import numpy as np

from pipeline.video.decode import decode_range
from pipeline.video.decoders import nvdec_runtime_problem, nvdec_source_problem
from pipeline.video.probe import probe

log = logging.getLogger(__name__)

CLIPS: dict[str, tuple[str, str, int, int]] = {
    # name: (encoder, pixel format, width, height)
    "h264_1080p": ("libx264", "yuv420p", 1920, 1080),
    "hevc10_1080p": ("libx265", "yuv420p10le", 1920, 1080),
    "h264_2160p": ("libx264", "yuv420p", 3840, 2160),
    "hevc10_2160p": ("libx265", "yuv420p10le", 3840, 2160),
}


def write_bench_clip(path: str, codec: str, pix_fmt: str, width: int, height: int, frames: int) -> str:
    """A moving gradient with fine texture (so the decoder has work), BT.709 limited, 24 fps, GOP 24."""
    fps = 24
    rng = np.random.default_rng(7)
    texture = rng.integers(0, 24, (height // 8, width // 8, 3), dtype=np.uint8)
    texture = np.repeat(np.repeat(texture, 8, 0), 8, 1)
    ys, xs = np.mgrid[0:height, 0:width]
    ramp = np.stack([xs % 256, ys % 256, (xs + ys) % 256], axis=-1).astype(np.int16) + texture - 12
    base = np.clip(ramp, 0, 255).astype(np.uint8)
    with av.open(path, mode="w") as out:
        stream = out.add_stream(codec, rate=fps)
        assert isinstance(stream, av.VideoStream), codec
        ctx = stream.codec_context
        ctx.width, ctx.height, ctx.pix_fmt = width, height, pix_fmt
        ctx.time_base = Fraction(1, fps)
        params = "keyint=24:min-keyint=24:scenecut=0:bframes=2"
        if codec == "libx265":
            params += ":log-level=error"
        ctx.options = {"preset": "ultrafast", "crf": "20", codec.removeprefix("lib") + "-params": params}
        ctx.color_primaries, ctx.color_trc, ctx.colorspace, ctx.color_range = 1, 1, 1, 1
        for i in range(frames):
            rgb = np.roll(base, (i * 3, i * 6), axis=(0, 1))  # the picture pans: motion to predict
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(
                format=pix_fmt, dst_colorspace="ITU709", src_color_range="JPEG", dst_color_range="MPEG"
            )
            frame.pts = i
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return path


def _timed(frames: Iterator[Any]) -> tuple[list[Any], float]:
    started = time.perf_counter()
    out = list(frames)
    return out, len(out) / max(time.perf_counter() - started, 1e-9)


def _device_fps(url: str, info: Any) -> float:
    import torch

    from pipeline.video.nvdec import device_surfaces

    count = 0
    started = time.perf_counter()
    for _, surface in device_surfaces(url, info):
        surface.clone()  # what a device-resident consumer would keep
        count += 1
    torch.cuda.synchronize()
    return count / max(time.perf_counter() - started, 1e-9)


def bench_clip(url: str, nvdec: bool) -> dict[str, Any]:
    """One clip's figures (see the module docstring)."""
    info = probe(url)
    row: dict[str, Any] = {
        "codec": info.codec,
        "pix_fmt": info.pix_fmt,
        "size": f"{info.width}x{info.height}",
    }
    row["frames"] = info.frame_count
    pyav, row["pyav_fps"] = _timed(decode_range(url, info, 0, info.frame_count))
    problem = nvdec_source_problem(info)
    if not nvdec or problem is not None:
        row["nvdec_skipped"] = problem or "NVDEC unavailable"
        return row
    from pipeline.video.nvdec import nvdec_range

    list(nvdec_range(url, info, 0, min(8, info.frame_count)))  # decoder start-up outside the timing
    got, row["nvdec_fps"] = _timed(nvdec_range(url, info, 0, info.frame_count))
    row["nvdec_device_fps"] = _device_fps(url, info)
    row["equal_count"] = len(got) == len(pyav)
    row["equal_pts"] = [f.pts for f in got] == [f.pts for f in pyav]
    row["max_code_value_diff"] = max(
        (int(np.abs(a.rgb.astype(np.int32) - b.rgb.astype(np.int32)).max()) for a, b in zip(got, pyav)),
        default=0,
    )
    row["identical"] = row["equal_count"] and row["equal_pts"] and row["max_code_value_diff"] == 0
    return row


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.device.nvdec", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", required=True, help="folder for nvdec_bench.json")
    parser.add_argument("--clips", default="/tmp/nvdec-clips", help="where the generated clips are kept")
    parser.add_argument("--frames", type=int, default=240, help="frames per 1080p clip (4K: half)")
    parser.add_argument("--quick", action="store_true", help="1080p clips only, 48 frames")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.clips, exist_ok=True)
    problem = nvdec_runtime_problem()
    result: dict[str, Any] = {"host": platform.node(), "nvdec_unavailable": problem, "clips": {}}
    for name, (codec, pix_fmt, width, height) in CLIPS.items():
        if args.quick and height > 1080:
            continue
        frames = 48 if args.quick else (args.frames if height <= 1080 else args.frames // 2)
        path = os.path.join(args.clips, f"{name}-{frames}.mp4")
        if not os.path.exists(path):
            started = time.perf_counter()
            write_bench_clip(path + ".part.mp4", codec, pix_fmt, width, height, frames)
            os.replace(path + ".part.mp4", path)
            log.info("%s: written in %.1f s", name, time.perf_counter() - started)
        result["clips"][name] = row = bench_clip(path, problem is None)
        log.info("%s: %s", name, row)
        with open(os.path.join(args.out, "nvdec_bench.json"), "w") as fh:
            json.dump(result, fh, indent=2)  # after every clip: a run cut short keeps what it measured
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
