"""Train one identity's LoRA adapter for a pack's prepared swapper.

The pack's swapper must have been prepared with ``jobs.prepare_lora`` (its
manifest entry has ``contract.lora``).  The identity comes from reference images
(as in a job spec); targets are aligned from frames of the target footage
(videos or images) with the pack's own detector.  The adapter is written to
``--out`` with the base model's version, and its sha256 is printed for the job
spec (``identities.<name>.adapter``).

Locally, small scale on CPU::

    python -m jobs.train_adapter --pack ./pack --identity-name alice \\
        --identity-images alice1.jpg alice2.jpg --targets shot01.mov --out alice.onnx_adapter --steps 50

On a cluster, full scale on one GPU (the training runs as a Ray task that asks for
a GPU, so the driver may sit on a CPU head node)::

    ray job submit --address http://HEAD:8265 --working-dir . \\
        --runtime-env-json '{"env_vars": {"AWS_DEFAULT_REGION": "us-east-1"}}' -- \\
        python -m jobs.train_adapter --pack s3://studio/packs/recast-v1 --identity-name alice \\
            --identity-images s3://studio/refs/alice/1.jpg s3://studio/refs/alice/2.jpg \\
            --targets s3://studio/shots/sh010.mov s3://studio/shots/sh020.mov \\
            --out s3://studio/adapters/alice.onnx_adapter --steps 2000 --batch-size 16 --num-gpus 1

Progress and loss are logged every ``--log-every`` steps.  Exit status: 0 done,
2 bad input (the message names the file or field).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from jobs.cli import configure_logging, join_ray

EXIT_OK, EXIT_BAD_INPUT = 0, 2
VIDEO_SUFFIXES = (".mp4", ".mov", ".mkv", ".mxf", ".avi", ".webm", ".ts", ".m4v")

log = logging.getLogger("jobs.train_adapter")


def _frames(url: str, every: int, limit: int) -> list[np.ndarray]:
    """RGB uint8 frames of an image, or every ``every``-th frame of a video (at most ``limit``)."""
    if not url.lower().endswith(VIDEO_SUFFIXES):
        from pipeline.faces.identity import read_rgb

        return [read_rgb(url)]
    import av

    from pipeline.errors import MediaError
    from pipeline.store import storage

    out: list[np.ndarray] = []
    try:
        with storage.open_read(url) as fh, av.open(fh, mode="r") as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            for i, frame in enumerate(container.decode(stream)):
                if i % every == 0:
                    out.append(frame.to_ndarray(format="rgb24"))
                    if len(out) >= limit:
                        break
    except av.FFmpegError as exc:
        raise MediaError(url, f"cannot decode ({exc})") from exc
    return out


def aligned_targets(
    models: Any, urls: Sequence[str], crop_size: int, every: int, max_crops: int
) -> np.ndarray:
    """(N, S, S, 3) uint8 swapper-aligned crops of every face found in the target footage."""
    from pipeline.errors import FaceError
    from pipeline.faces.analyze import FaceAnalyzer
    from pipeline.geometry.align import warp_crops

    analyzer = FaceAnalyzer(models)
    crops: list[np.ndarray] = []
    for url in urls:
        frames = _frames(url, every, max_crops)
        for rgb, faces in zip(frames, analyzer.analyze(frames, embed=False)):
            if faces:
                crops.append(warp_crops(rgb, [f.landmarks for f in faces], crop_size, "arcface")[0])
        if sum(len(c) for c in crops) >= max_crops:
            break
    if not crops:
        raise FaceError(", ".join(urls), "no face found in the target footage")
    return np.concatenate(crops)[:max_crops]


def train_job(options: dict[str, Any]) -> dict[str, Any]:
    """The whole job (runs in the driver or in a GPU Ray task): returns what was written."""
    import onnx

    from pipeline.errors import ModelPackError
    from pipeline.faces.identity import load_identity
    from pipeline.lora.adapter import write_adapter
    from pipeline.lora.prepare import LoraSlots
    from pipeline.lora.train import TrainConfig, train_adapter
    from pipeline.models.loader import load_face_models
    from pipeline.models.pack import load_pack
    from pipeline.models.runtime.settings import ExecutionConfig

    logging.basicConfig(level=options["log_level"], format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    pack = load_pack(options["pack"], options.get("cache_dir"))
    entry = pack.entry("swapper")
    if entry is None or entry.kind != "inswapper" or "lora" not in entry.contract:
        raise ModelPackError(
            pack.url, "the pack's swapper must be an inswapper prepared with jobs.prepare_lora"
        )
    slots = LoraSlots.from_contract(entry.contract["lora"], f"{pack.url} {entry.file} contract.lora")
    models = load_face_models(pack, ExecutionConfig(providers=("CPUExecutionProvider",)))
    identity = load_identity(options["identity_name"], options["identity_images"], models)
    targets = aligned_targets(
        models, options["targets"], int(models.swapper.crop_size), options["every"], options["max_crops"]
    )
    log.info("training %s on %d target crops", options["identity_name"], len(targets))
    config = TrainConfig(
        steps=options["steps"],
        batch_size=options["batch_size"],
        learning_rate=options["learning_rate"],
        reconstruction_weight=options["reconstruction_weight"],
        device=options["device"],
        log_every=options["log_every"],
    )
    result = train_adapter(
        onnx.load(pack.path("swapper")),
        onnx.load(pack.path("recognizer")),
        slots,
        targets,
        identity.embedding,
        config,
        swapper_where=f"{pack.url} {entry.file}",
        recognizer_where=f"{pack.url} {os.path.basename(pack.path('recognizer'))}",
    )
    sha = write_adapter(options["out"], slots, result.params)
    return {
        "adapter": options["out"],
        "sha256": sha,
        "identity": options["identity_name"],
        "target_crops": len(targets),
        "steps": config.steps,
        "steps_per_second": round(result.steps_per_second, 3),
        "device": result.device,
        "identity_loss_first": result.identity_losses[0],
        "identity_loss_last": result.identity_losses[-1],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jobs.train_adapter", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--pack", required=True, help="pack URL whose swapper has contract.lora")
    parser.add_argument("--identity-name", required=True)
    parser.add_argument("--identity-images", nargs="+", required=True, help="reference image URLs")
    parser.add_argument("--targets", nargs="+", required=True, help="target footage: video or image URLs")
    parser.add_argument("--out", required=True, help="adapter URL to write")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--learning-rate", type=float, default=5e-3)
    parser.add_argument("--reconstruction-weight", type=float, default=1.0)
    parser.add_argument("--every", type=int, default=5, help="use every N-th video frame")
    parser.add_argument("--max-crops", type=int, default=256)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--num-gpus", type=float, default=0, help="> 0: train in a Ray task asking for GPUs")
    parser.add_argument("--cache-dir", help="pack cache folder")
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    options = {k: v for k, v in vars(args).items() if k != "num_gpus"}
    options["log_level"] = args.log_level.upper()
    from pipeline.errors import RecastError

    try:
        if args.num_gpus > 0:
            import ray

            if not ray.is_initialized():
                join_ray(ray, log_to_driver=True, logging_level=logging.WARNING)
            # Storage settings reach the task through the job's runtime env (see the docstring).
            task = ray.remote(num_gpus=args.num_gpus)(train_job)
            try:
                summary = ray.get(task.remote(options))
            except ray.exceptions.RayTaskError as exc:
                print(f"recast: training task failed: {exc.cause if exc.cause else exc}", file=sys.stderr)
                return EXIT_BAD_INPUT
        else:
            summary = train_job(options)
    except RecastError as exc:
        print(f"recast: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"wrote adapter {summary['adapter']} sha256 {summary['sha256']}")
    print("ADAPTER_JSON " + json.dumps(summary))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
