"""Benchmark: Recast against the naive face-swap loop, on generated clips of real faces.

Locally (starts its own Ray instance, never joins another one on the machine)::

    .venv/bin/python -m jobs.benchmark                    # full table (about 15-20 min on 2 cores)
    .venv/bin/python -m jobs.benchmark --quick            # a few minutes
    .venv/bin/python -m jobs.benchmark --memory --demo    # plus memory flatness and the demo job
    .venv/bin/python -m jobs.benchmark --seconds 60 --production-seconds 60   # minute-long clips

The driver at feature-film scale (real driver, simulated actors; 300 shots x 30 chunks on 1,024
actors, then a crowd case of 40 shots with 12 faces per frame; ``--scale-time-scale 0.5`` halves
the modelled chunk times)::

    .venv/bin/python -m jobs.benchmark --scale --no-compare

Film plates alone (EXR/DPX I/O, colour, a 4K job against ProRes 4444; a few minutes)::

    .venv/bin/python -m jobs.benchmark --plates --no-compare --out out/plates-bench

The device render path on a GPU machine (no Ray needed; see ``bench/device/gpu_cli.py``)::

    python -m jobs.benchmark --gpu --out out/gpu-bench

On a cluster (joins ``RAY_ADDRESS``; peak memory is read only for actors on the driver's node)::

    ray job submit --working-dir . -- python -m jobs.benchmark --out /shared/bench

What runs, in one process tree and one run (the parts live in ``bench/``, beside ``jobs/`` in the checkout):

* inputs (``inputs.py``): 720p and 1080p clips of the astronaut (``clips.py``), the
  source face from insightface's sample picture; nothing downloaded;
* two model sets: the embedded default pack, and a "production-cost" pack whose
  recognizer, swapper and enhancer are stand-ins with the production contracts and
  roughly production cost (ArcFace w600k_r50, inswapper_128, GFPGAN 1.4 sized, see
  ``models/standins.py``) and whose detector is the default pack's real YuNet, so
  faces are really found and swapped (the SCRFD-sized stand-in fires on bright cells,
  not faces; its cost is measured in the ceiling table instead);
* per clip and model set (``runs.py``): the naive loop (``naive.py``), Recast with 1
  actor using every core, Recast with one actor per core; with the production set
  also Recast one actor per core without the CPU Winograd rewrite
  (``recast_<N>_direct``, an ablation: how much of the gain is the rewrite, how much
  the pipeline) and a swap + enhance row at 720p;
* quality (``quality.py``), from each Recast run's own job summary (QC runs in every
  job; here it measures identity on one frame in 4 of each track, production default
  12): identity similarity after the swap (mean, 5th percentile), unreplaced frames,
  flicker and seam strength, QC flags by reason; and QC's own cost: the production
  set's first case also runs one actor per core with QC off (``recast_<N>_noqc``),
  its render-stage seconds and job fps against the same run with QC on;
* the analysis pass against its parts (``analysis_pass/analysis.py``), per model set and clip size, no
  Ray, one thread: actor ms/frame with ``faces.embed`` every_frame and track, its
  breakdown (decode, letterbox, detector, postprocess, align, recognizer, bookkeeping),
  recognizer calls per frame, and the ratio to decode + detector + recognizer alone;
* the ceiling (``ceiling.py``): each stage's CPU-seconds per frame, models
  single-threaded, on a few frames; machine limit = cores / total; efficiency =
  achieved / limit.  For the production set also with ONNX Runtime's own
  convolutions, as the naive loop runs the models (its efficiency is measured
  against that ceiling);
* the 4-chunk scaling figure (``scenarios.py``): a 4-chunk shot (both model sets) on
  1 actor and on one actor per core, every actor reserving 1 CPU (``--no-scaling``
  skips it);
* optional: ``--memory`` (peak actor memory for a 60 s and a 5-minute shot),
  ``--demo`` (the demo job's fps with 1 and N actors, time to first chunk),
  ``--multishot`` (``multishot.py``: time to the first published shot of a multi-shot
  job with ``resources.dispatch_order`` analysis_first, the order before, and render_first),
  ``--scale`` (the driver at feature-film scale) and ``--plates`` (film plates, see
  ``film_plates/plate_figures.py``: EXR half PIZ / DWAA and DPX 10-bit read and write fps per
  actor at 2K and 4K from local disk and loopback S3, the colour round trip's cost
  per frame, and a whole job on a 4K EXR sequence against the same plate as ProRes
  4444; also written as ``plates.json`` / ``plates.md``).

Writes ``bench.json`` and ``bench.txt`` (the table, ``report.py``) into ``--out``.
The production set costs about 1.5 CPU-s per face for the swapper alone (0.7 with
the Winograd rewrite), so its clips default to 4 s, 2 s with ``--quick``
(``--production-seconds``); every figure names the clip length it used.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_CHECKOUT, "bench", "__init__.py")) and _CHECKOUT not in sys.path:
    # An editable install run from elsewhere (``recast benchmark``): the suite lies beside jobs/.
    sys.path.append(_CHECKOUT)
try:
    from bench.report import derive, table
    from bench.settings import QUICK, TINY, Settings
except ModuleNotFoundError as exc:  # an installed wheel: the harness stays in the checkout
    if exc.name not in ("bench", "bench.report", "bench.settings"):
        raise
    sys.exit(
        "python -m jobs.benchmark runs from a Recast checkout: its harness and stand-in models "
        "(bench/) are tooling and not installed with the wheel; run it from the repository's "
        "root (on a cluster: ray job submit --working-dir . -- python -m jobs.benchmark)"
    )


def parse_settings(argv: list[str] | None = None) -> tuple[Settings | None, str | None]:
    """The settings of a run, or (None, path) when only a bench.json's table is re-rendered."""
    parser = argparse.ArgumentParser(description="Recast against the naive face-swap loop.")
    parser.add_argument("--out", default="out/bench")
    parser.add_argument("--quick", action="store_true", help="720p only, shorter clips, no enhance row")
    parser.add_argument("--tiny", action="store_true", help="test scale: small frames, tiny stand-in models")
    parser.add_argument("--seconds", type=float, default=None, help="default-pack clip length (6)")
    parser.add_argument(
        "--production-seconds", type=float, default=None, help="production-set clip length (4; --quick 2)"
    )
    parser.add_argument("--sizes", default=None, help="comma list: 720p,1080p or WxH")
    parser.add_argument("--no-enhance", action="store_true", help="skip the swap + enhance row")
    parser.add_argument(
        "--no-compare",
        action="store_true",
        help="skip the comparisons (run only --memory / --demo / --scaling)",
    )
    parser.add_argument("--report", metavar="BENCH_JSON", help="only re-render the table of a bench.json")
    scenarios = parser.add_argument_group("optional scenarios")
    scenarios.add_argument(
        "--scaling",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the 4-chunk shot on 1 and N actors (default: with the comparisons)",
    )
    scenarios.add_argument("--memory", action="store_true", help="also the 60 s vs 5-minute memory scenario")
    scenarios.add_argument("--memory-fps", type=int, default=4)
    scenarios.add_argument("--demo", action="store_true", help="also the demo job with 1 and N actors")
    scenarios.add_argument("--demo-seconds", type=float, default=20.0)
    scenarios.add_argument(
        "--multishot",
        action="store_true",
        help="also a multi-shot job in each dispatch order: time to first published shot, before and after",
    )
    scenarios.add_argument("--multishot-shots", type=int, default=None, help="shots of that job (4)")
    scenarios.add_argument(
        "--scale", action="store_true", help="also the driver at feature-film scale (simulated actors)"
    )
    scenarios.add_argument("--scale-shots", type=int, default=300)
    scenarios.add_argument("--scale-chunks-per-shot", type=int, default=30)
    scenarios.add_argument("--scale-actors", type=int, default=1024)
    scenarios.add_argument(
        "--scale-time-scale", type=float, default=1.0, help="modelled chunk times x this (default 1)"
    )
    scenarios.add_argument(
        "--scale-crowd-shots",
        type=int,
        default=40,
        help="shots of the crowd case after the main one (0: none)",
    )
    scenarios.add_argument(
        "--scale-crowd-faces", type=int, default=12, help="faces per frame of the crowd case"
    )
    scenarios.add_argument(
        "--steady",
        action="store_true",
        help="also the steadiness of the paste on 1080p and 4K plates (faces.refine off and auto)",
    )
    scenarios.add_argument(
        "--plates",
        action="store_true",
        help="also film plates: EXR/DPX I/O per actor (local and S3), colour cost, job vs ProRes 4444",
    )
    scenarios.add_argument(
        "--plates-frames", type=int, default=None, help="frames per plates I/O case (16 at 2K, 8 at 4K)"
    )
    scenarios.add_argument(
        "--plates-job-frames", type=int, default=None, help="frames of the plates whole-job runs (24)"
    )
    args = parser.parse_args(argv)
    if args.report:
        return None, args.report

    fields: dict[str, Any] = {
        "out": args.out,
        "memory": args.memory,
        "memory_fps": args.memory_fps,
        "demo": args.demo,
        "demo_seconds": args.demo_seconds,
        "scale": args.scale,
        "scale_shots": args.scale_shots,
        "scale_chunks_per_shot": args.scale_chunks_per_shot,
        "scale_actors": args.scale_actors,
        "scale_time_scale": args.scale_time_scale,
        "scale_crowd_shots": args.scale_crowd_shots,
        "scale_crowd_faces": args.scale_crowd_faces,
        "plates": args.plates,
        "steady": args.steady,
        "multishot": args.multishot,
    }
    if args.quick:
        fields.update(QUICK)
    if args.tiny:
        fields.update(TINY)
    if args.seconds is not None:
        fields["default_seconds"] = args.seconds
        fields["default_chunk_seconds"] = max(1.0, min(30.0, args.seconds / 4))
    if args.production_seconds is not None:
        fields["production_seconds"] = args.production_seconds
        fields["production_chunk_seconds"] = max(1.0, min(30.0, args.production_seconds / 2))
    if args.sizes:
        fields["sizes"] = tuple(s.strip() for s in args.sizes.split(",") if s.strip())
    if args.multishot_shots is not None:
        if args.multishot_shots < 2:
            parser.error(
                f"--multishot-shots: a multi-shot job needs at least 2 shots, got {args.multishot_shots}"
            )
        fields["multishot_shots"] = args.multishot_shots
    if args.plates_frames is not None:
        fields["plates_frames"] = args.plates_frames
    if args.plates_job_frames is not None:
        fields["plates_job_frames"] = args.plates_job_frames
    if args.no_enhance:
        fields["enhance_row"] = False
    if args.no_compare:
        fields["compare"] = False
    fields["scaling"] = not args.no_compare if args.scaling is None else args.scaling
    return Settings(**fields), None


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--gpu" in args:
        # The GPU benchmark runs on a bare GPU box (no Ray): nothing else of the benchmark is imported.
        from bench.device.gpu_cli import main as gpu_main

        args.remove("--gpu")
        return gpu_main(args)
    # Benchmark clips are seconds long and cut into 1-2 s chunks, below a real job's 10 s floor.
    os.environ.setdefault("RECAST_MIN_CHUNK_SECONDS", "1")
    settings, report = parse_settings(args)
    if settings is None:
        assert report is not None
        with open(report) as fh:
            results = derive(json.load(fh))
        write_outputs(results, os.path.dirname(os.path.abspath(report)))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from bench.suite import run_benchmark
    from pipeline.errors import ClusterUnreachable

    try:
        results = run_benchmark(settings)
    except ClusterUnreachable as exc:  # RAY_ADDRESS names a cluster that refuses this process
        print(f"benchmark: {exc}", file=sys.stderr)
        return 2
    write_outputs(results, os.path.abspath(settings.out))
    return 0


def write_outputs(results: dict, out: str) -> None:
    """``bench.json`` and ``bench.txt`` into ``out``; the table also to stdout."""
    with open(os.path.join(out, "bench.json"), "w") as fh:
        json.dump(results, fh, indent=2, default=str)
    text = table(results)
    if results.get("analysis"):
        from bench.analysis_pass.analysis import analysis_table

        text += "\n\n" + analysis_table(results["analysis"])
    if results.get("multishot"):
        from bench.multishot import multishot_table

        text += "\n\n" + multishot_table(results["multishot"])
    with open(os.path.join(out, "bench.txt"), "w") as fh:
        fh.write(text + "\n")
    sys.stdout.write(text + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
