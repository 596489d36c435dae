"""XSeg-style occlusion mask, on any Runner.

Model I/O: input NHWC [N, 256, 256, 3] RGB in [0, 1] (the aligned face crop);
output [N, 256, 256, 1], 1 where the face is visible, 0 where something covers it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pipeline.errors import ModelPackError
from pipeline.models.contracts import contract_size
from pipeline.models.runtime.batching import run_batched

if TYPE_CHECKING:
    from pipeline.models.pack import ModelEntry
    from pipeline.models.runtime.protocols import Runner


class XsegOccluder:
    """Masks of the visible face in aligned 256 px crops."""

    template = "arcface"

    def __init__(self, runner: Runner | None, entry: ModelEntry) -> None:
        where = str(entry.file)
        if runner is None:
            raise ModelPackError(where, "the xseg occluder needs a model file")
        width, height = contract_size(entry.contract, (256, 256), where)
        if width != height:
            raise ModelPackError(where, f"contract.input_size must be square for xseg, got {[width, height]}")
        self.runner = runner
        self.input_name = runner.input_names[0]
        self.crop_size: int = width

    def mask(self, crops: np.ndarray) -> np.ndarray:
        """(N, 256, 256) float32 in [0, 1] for aligned crops (N, 256, 256, 3) uint8."""
        if crops.shape[1:] != (self.crop_size, self.crop_size, 3):
            raise ValueError(
                f"mask needs crops (N, {self.crop_size}, {self.crop_size}, 3), got {crops.shape}"
            )
        if len(crops) == 0:
            return np.zeros((0, self.crop_size, self.crop_size), np.float32)
        blob = np.ascontiguousarray(crops.astype(np.float32) / 255.0)
        out = run_batched(self.runner, {self.input_name: blob})[0]
        return np.clip(out.reshape(len(crops), self.crop_size, self.crop_size), 0.0, 1.0).astype(np.float32)
