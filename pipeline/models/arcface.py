"""ArcFace recognizer (insightface w600k_r50 / buffalo_l), on any Runner.

Model I/O: input [N, 3, 112, 112] RGB, ``(x - 127.5) / 127.5``, the crop
aligned to the ArcFace 5-point template; output [N, 512], L2-normalised here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from pipeline.errors import ModelPackError
from pipeline.geometry.align import warp_crops
from pipeline.geometry.types import Face
from pipeline.models.contracts import contract_size
from pipeline.models.runtime.batching import run_batched

if TYPE_CHECKING:
    from pipeline.models.pack import ModelEntry
    from pipeline.models.runtime.protocols import Runner


class ArcFaceRecognizer:
    """Turns faces into L2-normalised identity embeddings (512-d for w600k_r50)."""

    template = "arcface"

    def __init__(self, runner: Runner | None, entry: ModelEntry) -> None:
        where = str(entry.file)
        if runner is None:
            raise ModelPackError(where, "the arcface recognizer needs a model file")
        self.runner = runner
        self.input_name = runner.input_names[0]
        width, height = contract_size(entry.contract, (112, 112), where)
        if width != height:
            raise ModelPackError(
                where, f"contract.input_size must be square for arcface, got {[width, height]}"
            )
        self.crop_size = width
        declared = runner.output_shapes[0][-1] if runner.output_shapes[0] else None
        self.dim: int = int(declared or entry.contract.get("embedding_dim", 512))
        self.batch_size = int(entry.contract.get("batch_size", 32))

    def embed(self, rgb: np.ndarray, faces: Sequence[Face]) -> np.ndarray:
        """(N, dim) float32 L2-normalised embeddings of ``faces`` in one RGB uint8 frame."""
        if not faces:
            return np.zeros((0, self.dim), dtype=np.float32)
        crops, _ = warp_crops(rgb, [f.landmarks for f in faces], self.crop_size, "arcface")
        return self.embed_aligned(crops)

    def embed_aligned(self, crops: np.ndarray) -> np.ndarray:
        """(N, dim) embeddings of crops already aligned, (N, 112, 112, 3) RGB uint8."""
        out = np.zeros((len(crops), self.dim), dtype=np.float32)
        for start in range(0, len(crops), self.batch_size):
            chunk = crops[start : start + self.batch_size].astype(np.float32)
            blob = np.ascontiguousarray(((chunk - 127.5) / 127.5).transpose(0, 3, 1, 2))
            out[start : start + len(chunk)] = run_batched(self.runner, {self.input_name: blob})[0].reshape(
                len(chunk), -1
            )
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
