"""Benchmarks for a GPU machine: the device render path and NVDEC decoding.

``gpu_cli`` (``python -m jobs.benchmark --gpu``), ``gpu`` (fps per GPU of the device render
path at 1080p), ``gpu_inputs`` (its settings, model pack, models, clip and faces) and ``nvdec``
(NVDEC against PyAV: decode fps at 1080p and 4K and whether the frames are equal; ``python -m
bench.device.nvdec``, which ``infra/device/h200_check.sh`` runs).  No Ray.
"""
