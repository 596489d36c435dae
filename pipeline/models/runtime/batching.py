"""Batches through models that declare a fixed batch size."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from pipeline.models.contracts import Dim
from pipeline.models.runtime.protocols import Runner

DETECTOR_STAGES = ("letterbox", "detector", "postprocess")
"""Keys of a detector's ``stage_seconds``: frames into the input blob, the model call(s),
decoding and NMS."""


def add_detector_seconds(seconds: dict[str, float], t0: float, t1: float, t2: float) -> None:
    """Add a ``detect_batch`` call's stage times (``t0`` start, ``t1`` blob ready, ``t2`` model done, now end)."""
    seconds["letterbox"] += t1 - t0
    seconds["detector"] += t2 - t1
    seconds["postprocess"] += time.perf_counter() - t2


def batch_dim(runner: Runner, index: int = 0) -> Dim:
    """The declared batch size of input ``index`` (None = dynamic)."""
    shape = runner.input_shapes[index]
    return shape[0] if shape else None


def run_batched(runner: Runner, feeds: dict[str, np.ndarray], run_options: Any = None) -> list[np.ndarray]:
    """Run ``feeds`` whose first axis is the batch; loops when the model fixes batch 1.

    Production exports such as inswapper_128 and GFPGAN declare batch 1, so
    several faces go through one at a time on the same warm session.
    ``run_options`` (an ``onnxruntime.RunOptions``, e.g. with an active LoRA
    adapter) apply to every call; only runners that ``accepts_run_options`` take them.
    """
    if run_options is not None and not runner.accepts_run_options:
        raise ValueError(f"{runner.path}: this runner ({runner.providers}) takes no ONNX Runtime RunOptions")
    n = next(iter(feeds.values())).shape[0]
    fixed = {d for i in range(len(runner.input_names)) if (d := batch_dim(runner, i)) is not None}
    if n == 0:
        raise ValueError("run_batched needs at least one item")
    if not fixed or fixed == {n}:
        return runner.run(feeds, run_options)
    if fixed != {1}:
        raise ValueError(f"{runner.path}: model fixes batch size {sorted(fixed)}, cannot run a batch of {n}")
    parts = [runner.run({k: v[i : i + 1] for k, v in feeds.items()}, run_options) for i in range(n)]
    return [np.concatenate([p[j] for p in parts], axis=0) for j in range(len(parts[0]))]
