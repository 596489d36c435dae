"""How well the invisible watermark is found in a delivered shot, and never where it is not.

    python -m bench.watermark OUT_DIR [--width 640 --height 360 --frames 240] [--keys 200]

Makes a clip of a real face (the astronaut, ``skimage.data``, public domain)
moving over a photographic background (``skimage.data.rocket``), renders it
with Recast (a real job: the embedded pack, ``provenance.watermark`` on, at
``quality`` 18 and 23; once more with the mark off), then derives what a leak
would look like: (b) a libx264 CRF 23 re-encode, (c) half size and CRF 23,
(d) an excerpt of the middle half re-encoded at CRF 23.  Each clip is decoded
and read once (faces found by the pack's detector, or every block); the
readings are voted per key, so many keys and job ids cost little.  Prints a
Markdown table and writes ``watermark.json``.

Product code: needs only the installed packages (Ray starts locally, or joins
``RAY_ADDRESS``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import av
import cv2
import numpy as np
import yaml

from jobs.demo_media import ASTRONAUT_FACE_XY, astronaut_rgb, write_source_image

JOB_ID = "wm-bench"
WINDOW = 24
LEAK_CRF = 23


def moving_face_frames(width: int, height: int, frames: int, face_share: float = 0.07) -> list[np.ndarray]:
    """A real face (about ``face_share`` of the frame, the face box itself) drifting over a photo."""
    from skimage.data import rocket

    background = cv2.resize(rocket(), (int(width * 1.25), int(height * 1.25)), interpolation=cv2.INTER_AREA)
    face = astronaut_rgb()
    cx, cy = ASTRONAUT_FACE_XY
    head = face[int(cy - 105) : int(cy + 115), int(cx - 85) : int(cx + 85)]  # the face box is about 90x111
    scale = math.sqrt(face_share * width * height / (90 * 111))
    head = cv2.resize(
        head, (round(head.shape[1] * scale), round(head.shape[0] * scale)), interpolation=cv2.INTER_AREA
    )
    hh, hw = head.shape[:2]
    yy, xx = np.mgrid[0:hh, 0:hw]
    alpha = np.clip(1.6 - np.hypot((xx - hw / 2) / (hw / 2), (yy - hh / 2) / (hh / 2)) * 1.5, 0, 1)[..., None]
    out = []
    for i in range(frames):
        t = i / max(1, frames - 1)
        bx, by = (
            (background.shape[1] - width) * t,
            (background.shape[0] - height) * (0.5 - 0.5 * math.cos(math.pi * t)),
        )
        frame = cv2.warpAffine(background, np.array([[1.0, 0, -bx], [0, 1.0, -by]]), (width, height))
        fx = width * (0.25 + 0.5 * t) - hw / 2
        fy = height * (0.5 + 0.12 * math.sin(2 * math.pi * t)) - hh / 2
        m = np.array([[1.0, 0, fx], [0, 1.0, fy]])
        warped = cv2.warpAffine(head, m, (width, height)).astype(np.float32)
        mask = cv2.warpAffine(alpha.astype(np.float32), m, (width, height))[..., None]
        out.append(np.clip(warped * mask + frame * (1 - mask), 0, 255).astype(np.uint8))
    return out


def write_video(
    path: str, frames: Sequence[np.ndarray], *, crf: int, fps: int = 24, preset: str = "medium"
) -> str:
    """libx264 yuv420p MP4 of RGB uint8 frames (BT.601, as a re-encoding tool would write them)."""
    height, width = frames[0].shape[:2]
    with av.open(path, mode="w") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"crf": str(crf), "preset": preset}
        for rgb in frames:
            out.mux(stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")))
        out.mux(stream.encode(None))
    return path


def read_video(path: str) -> list[np.ndarray]:
    with av.open(path) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def leaks(frames: list[np.ndarray], folder: str, name: str) -> dict[str, list[np.ndarray]]:
    """(b) CRF 23 re-encode, (c) half size + CRF 23, (d) the middle half, re-encoded at CRF 23."""
    height, width = frames[0].shape[:2]
    half = [
        cv2.resize(f, (width // 2 // 2 * 2, height // 2 // 2 * 2), interpolation=cv2.INTER_AREA)
        for f in frames
    ]
    n = len(frames)
    middle = frames[n // 4 : n // 4 + n // 2]
    out = {}
    for tag, clip in (("b_crf23", frames), ("c_half_crf23", half), ("d_excerpt_crf23", middle)):
        out[tag] = read_video(write_video(os.path.join(folder, f"{name}-{tag}.mp4"), clip, crf=LEAK_CRF))
    return out


def render_job(folder: str, plate: str, source: str, *, quality: int, watermark: bool, name: str) -> str:
    """Run a real Recast job on ``plate``; returns the published output's path."""
    from jobs.render import EXIT_OK, main

    spec = {
        "job_id": JOB_ID if watermark else f"{JOB_ID}-plain",
        "shots": [{"name": name, "url": plate}],
        "identities": {"hero": {"images": [source], "face_index": 0}},
        "output": {
            "url": os.path.join(folder, "out", "{shot}.mp4"),
            "quality": quality,
            "if_exists": "overwrite",
        },
        "chunking": {"seconds": 5, "min_seconds": 1, "snap_to_keyframes": False},
        "resources": {"cpus_per_actor": 1, "max_actors": 2},
        "provenance": {"watermark": {"enabled": watermark}},
    }
    spec_path = os.path.join(folder, f"{name}.yaml")
    with open(spec_path, "w") as f:
        yaml.safe_dump(spec, f)
    with _unmarked_allowed(folder, not watermark):
        if main([spec_path, "--fresh", "--log-level", "WARNING"]) != EXIT_OK:
            raise RuntimeError(f"the job {name} failed")
    return os.path.join(folder, "out", f"{name}.mp4")


@contextlib.contextmanager
def _unmarked_allowed(folder: str, wanted: bool) -> Iterator[None]:
    """For the unmarked control render only: the cluster studio policy (``RECAST_POLICY_URL``) that
    lets a job switch the watermark off, as a studio would set it; every output is marked otherwise."""
    if not wanted:
        yield
        return
    policy = os.path.join(folder, "unmarked-policy.yaml")
    with open(policy, "w") as f:
        yaml.safe_dump(
            {
                "identities": {"hero": {"consent_ref": "bench (generated picture)", "projects": ["*"]}},
                "allow_unmarked_outputs": True,
            },
            f,
        )
    saved = os.environ.get("RECAST_POLICY_URL")
    os.environ["RECAST_POLICY_URL"] = policy
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("RECAST_POLICY_URL", None)
        else:
            os.environ["RECAST_POLICY_URL"] = saved


def rates(reading: Any, keys: int, expected: int | None) -> dict[str, Any]:
    """Detection rate (right payload) over windows and the whole clip with the render's key, and
    false positives with ``keys`` other keys and job ids."""
    from pipeline.provenance.watermark import WatermarkConfig, job_payload
    from pipeline.provenance.watermark_read import scan

    right = scan(reading, WatermarkConfig(), WINDOW)
    found = [r.payload for _, r in right.windows]
    wrong_ids = sum(
        right.overall.payload is not None and right.overall.payload == job_payload(f"other-{i}")
        for i in range(keys)
    )
    false_found = 0
    tries = 0
    for i in range(keys):
        other = scan(reading, WatermarkConfig(key=f"studio-key-{i}"), WINDOW)
        results = [r for _, r in other.windows] + [other.overall]
        false_found += sum(r.payload is not None for r in results)
        tries += len(results)
    return {
        "frames": reading.frames,
        "frames_with_faces": sum(1 for n in reading.faces if n),
        "windows_found": sum(p == expected for p in found) if expected is not None else 0,
        "windows": len(found),
        "wrong_payloads": sum(p is not None and p != expected for p in found + [right.overall.payload]),
        "clip_found": expected is not None and right.overall.payload == expected,
        "z_mean": round(right.overall.z_mean, 2),
        "other_keys_found": false_found,
        "other_key_tries": tries,
        "wrong_job_ids_matched": wrong_ids,
    }


def _start_ray() -> None:
    """A private local Ray of 2 CPUs without a dashboard (lighter than ``jobs.render``'s default),
    unless ``RAY_ADDRESS`` names a cluster."""
    import ray

    if ray.is_initialized() or os.environ.get("RAY_ADDRESS"):
        return
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    os.environ.update(env)
    ray.init(
        address="local",
        num_cpus=2,
        num_gpus=0,
        include_dashboard=False,
        runtime_env={"env_vars": {"PYTHONPATH": repo, **env}},
        log_to_driver=False,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.watermark", description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=360)
    parser.add_argument("--frames", type=int, default=240)
    parser.add_argument("--keys", type=int, default=200, help="other keys and job ids tried per clip")
    args = parser.parse_args(argv)
    from pipeline.models.loader import load_detector
    from pipeline.models.pack import load_pack
    from pipeline.models.runtime.settings import ExecutionConfig
    from pipeline.provenance.watermark import job_payload
    from pipeline.provenance.watermark_read import read_frames

    folder = os.path.abspath(args.out_dir)
    os.makedirs(folder, exist_ok=True)
    plate = write_video(
        os.path.join(folder, "plate.mp4"), moving_face_frames(args.width, args.height, args.frames), crf=16
    )
    source = write_source_image(os.path.join(folder, "source.jpg"))
    _start_ray()
    clips: dict[str, list[np.ndarray]] = {}
    for quality in (18, 23):
        out = render_job(folder, plate, source, quality=quality, watermark=True, name=f"q{quality}")
        clips[f"q{quality} a_recast"] = read_video(out)
        clips.update(
            {
                f"q{quality} {k}": v
                for k, v in leaks(clips[f"q{quality} a_recast"], folder, f"q{quality}").items()
            }
        )
    plain = render_job(folder, plate, source, quality=18, watermark=False, name="plain")
    clips["unmarked recast q18"] = read_video(plain)
    clips["unmarked plate"] = read_video(plate)
    detector = load_detector(
        load_pack("builtin:default"), ExecutionConfig(providers=("CPUExecutionProvider",))
    )
    payload = job_payload(JOB_ID)
    results: dict[str, Any] = {}
    for name, frames in clips.items():
        expected = None if name.startswith("unmarked") else payload
        for mode, det in (("faces", detector), ("all-blocks", None)):
            reading = read_frames(frames, det)
            results[f"{name} [{mode}]"] = rates(reading, args.keys if mode == "faces" else 20, expected)
            print(name, mode, results[f"{name} [{mode}]"], flush=True)
    with open(os.path.join(folder, "watermark.json"), "w") as f:
        json.dump(
            {"width": args.width, "height": args.height, "frames": args.frames, "results": results},
            f,
            indent=1,
        )
    print("| clip | read | windows found | whole clip | mean z | other keys: found / tries |")
    print("|---|---|---|---|---|---|")
    for name, r in results.items():
        print(
            f"| {name.rsplit(' [', 1)[0]} | {name.rsplit(' [', 1)[1][:-1]} | {r['windows_found']}/{r['windows']} | "
            f"{'found' if r['clip_found'] else 'not found'} | {r['z_mean']} | {r['other_keys_found']} / {r['other_key_tries']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
