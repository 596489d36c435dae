"""The demo job: a minute of real faces, rendered through Ray with the embedded default pack.

    python -m jobs.demo                 # after `bash infra/bootstrap.sh`
    python -m jobs.demo --actors 1      # one actor using both cores instead of two actors

Writes into ``./out/demo/``: the generated plate (``plates/astronaut.mp4``, the
astronaut from scikit-image with a slow pan and zoom), the source face
(``source.jpg``, insightface's sample picture, of which the demo takes the face that
suits a preview swap best: frontal, eyes open, by :func:`pipeline.faces.portrait.pick_portrait`,
and says which and why), the job spec
(``job.yaml``), the rendered shot (``astronaut.mp4``), a side-by-side
before/after picture (``astronaut_before_after.png``) and the job summary
(``summary.json``).  The same spec runs on a cluster with::

    ray job submit --working-dir . -- python -m jobs.render out/demo/job.yaml
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import TYPE_CHECKING

import av
import cv2
import numpy as np
import yaml

from jobs.demo_media import make_face_clip, write_source_image

if TYPE_CHECKING:
    from cluster.report.summary import JobSummary
    from pipeline.faces.portrait import PortraitPick

SHOT = "astronaut"


def write_demo_inputs(out_dir: str, *, seconds: float, width: int, height: int, fps: int) -> tuple[str, str]:
    """The plate and the source picture (the plate is regenerated only when its settings change)."""
    plate = os.path.join(out_dir, "plates", f"{SHOT}.mp4")
    stamp = os.path.join(out_dir, "plates", f"{SHOT}.json")
    settings = {"seconds": seconds, "width": width, "height": height, "fps": fps, "challenge": 1}
    if not (os.path.exists(plate) and _read_json(stamp) == settings):
        make_face_clip(plate, seconds=seconds, width=width, height=height, fps=fps, challenge=True)
        with open(stamp, "w") as fh:
            json.dump(settings, fh)
    source = write_source_image(os.path.join(out_dir, "source.jpg"))
    return plate, source


def _read_json(path: str) -> object:
    if not os.path.exists(path):
        return None
    with open(path) as fh:
        return json.load(fh)


def pick_source_face(source: str) -> PortraitPick:
    """The face of the source picture that suits the preview swapper best (the default pack's detector).

    The built-in swapper pastes the source's eyes, nose and mouth as they are, so the
    rule of :func:`~pipeline.faces.portrait.pick_portrait` wants a frontal face with both
    eyes open; the same picture always gives the same face.
    """
    from pipeline.faces.pictures import load_picture
    from pipeline.faces.portrait import pick_portrait
    from pipeline.models.loader import load_detector
    from pipeline.models.pack import BUILTIN_DEFAULT, load_pack
    from pipeline.models.runtime.settings import ExecutionConfig

    detector = load_detector(load_pack(BUILTIN_DEFAULT), ExecutionConfig(providers=("CPUExecutionProvider",)))
    rgb = load_picture(source)
    return pick_portrait(rgb, detector.detect(rgb))


def demo_spec(
    out_dir: str, plate: str, source: str, *, actors: int, cpus: int, face_index: int | None = None
) -> dict:
    """The demo's job; ``face_index`` None: the face :func:`pick_source_face` chooses."""
    if face_index is None:
        face_index = pick_source_face(source).index
    return {
        "job_id": "demo",
        "shots": [{"name": SHOT, "url": plate}],
        # the face pick_source_face chose: the preview swapper copies the source's eyes and expression
        "identities": {"hero": {"images": [source], "face_index": face_index}},
        "selection": {"mode": "all", "source": "hero"},
        "models": {"pack": "builtin:default"},
        "output": {"url": os.path.join(out_dir, "{shot}.mp4"), "codec": "h264", "if_exists": "overwrite"},
        "chunking": {"seconds": 10},
        "resources": {"cpus_per_actor": max(1, cpus // actors), "max_actors": actors},
    }


def before_after(plate: str, output: str, png: str, frame_index: int) -> None:
    """Save source and output frame ``frame_index`` side by side."""

    def frame(url: str) -> np.ndarray:
        with av.open(url) as container:
            for i, f in enumerate(container.decode(video=0)):
                if i == frame_index:
                    return f.to_ndarray(format="rgb24")
        raise ValueError(f"{url} has no frame {frame_index}")

    image = np.hstack([frame(plate), frame(output)])
    cv2.imwrite(png, cv2.cvtColor(image, cv2.COLOR_RGB2BGR))


def qc_lines(summary: JobSummary) -> str:
    """The QC review list of each shot, most severe first (the report shows it with thumbnails)."""
    lines = []
    for shot in summary.shots:
        flags = shot.qc.flags if shot.qc is not None else ()
        lines.append(f"QC {shot.name}: {len(flags)} flag(s) to review" + (":" if flags else ""))
        for flag in flags[:8]:
            frames = str(flag.first) if flag.first == flag.last else f"{flag.first}-{flag.last}"
            track = "" if flag.track is None else f" track {flag.track}"
            lines.append(f"  frames {frames}{track}: {flag.reason} ({flag.detail or round(flag.value, 3)})")
        if len(flags) > 8:
            lines.append(f"  ... {len(flags) - 8} more in the report")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="out/demo")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=360)
    parser.add_argument("--fps", type=int, default=24)
    parser.add_argument("--actors", type=int, default=None, help="render actors (default: one per core)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    started = time.perf_counter()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

    out_dir = os.path.abspath(args.out)
    plate, source = write_demo_inputs(
        out_dir, seconds=args.seconds, width=args.width, height=args.height, fps=args.fps
    )
    pick = pick_source_face(source)
    print(f"demo: the hero is insightface's t1.jpg ({source}) {pick.reason()}")
    inputs_seconds = time.perf_counter() - started
    import ray

    from jobs.cli import join_ray
    from pipeline.errors import ClusterUnreachable

    if not ray.is_initialized():
        try:
            join_ray(ray, logging_level=logging.WARNING)
        except ClusterUnreachable as exc:
            print(f"demo: {exc}", file=sys.stderr)
            return 2
    cpus = int(ray.cluster_resources().get("CPU", os.cpu_count() or 1))
    actors = args.actors or cpus
    spec_data = demo_spec(out_dir, plate, source, actors=actors, cpus=cpus, face_index=pick.index)
    spec_path = os.path.join(out_dir, "job.yaml")
    with open(spec_path, "w") as fh:
        yaml.safe_dump(spec_data, fh, sort_keys=False)

    from cluster.driver import run_job
    from cluster.spec.job import load_spec
    from pipeline.errors import RecastError

    try:
        job_started = time.perf_counter()
        summary = run_job(load_spec(spec_path))
    except RecastError as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 2
    print(summary.table())
    print(qc_lines(summary))
    data = summary.to_dict()
    if summary.first_chunk_seconds is not None:
        data["submit_to_first_chunk_seconds"] = round(job_started - started + summary.first_chunk_seconds, 3)
    data["inputs_seconds"] = round(inputs_seconds, 3)
    with open(os.path.join(out_dir, "summary.json"), "w") as fh:
        json.dump(data, fh, indent=2, default=str)
    if not summary.ok:
        return 1
    shot = summary.shots[0]
    png = os.path.join(out_dir, f"{SHOT}_before_after.png")
    before_after(plate, shot.output_url, png, frame_index=shot.frames // 2)
    if shot.chunks_rendered == 0:
        # A re-run over a finished demo: nothing was rendered, so there is no speed to report.
        done = f"{shot.frames} frames, all kept from the previous run (delete {out_dir} to render again)"
    else:
        first = data.get("submit_to_first_chunk_seconds")
        done = (
            f"{shot.frames} frames at {shot.fps:.1f} fps with {summary.actors} actor(s); "
            f"first chunk after {'-' if first is None else f'{first}s'}"
        )
    print(f"demo: {shot.output_url}\ndemo: {png}\ndemo: {done}")
    print(
        f"demo: marked as AI-made (content sha256 {shot.content_sha256}); check it with\n"
        f"  python -m jobs.verify {shot.output_url}\n"
        f"  python -m jobs.detect_watermark {shot.output_url} --job-id {summary.job_id}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
