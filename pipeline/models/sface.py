"""SFace face recognizer (OpenCV Zoo 2021dec, 128-d), ONNX Runtime.

Model I/O: input ``data`` [N, 3, 112, 112] RGB, raw 0..255 (the graph subtracts 127.5
and scales by 1/128 itself; OpenCV's ``FaceRecognizerSF`` feeds BGR images with
``swapRB=True``); crops aligned to the ArcFace 112 template.  Output ``fc1`` [N, 128],
L2-normalised here.  Cosine similarity: same person across frames about >= 0.7,
different people <= 0.35; OpenCV's published match threshold is 0.363.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.errors import ModelPackError
from pipeline.geometry.align import warp_crops
from pipeline.geometry.types import Face
from pipeline.models.runtime.batching import run_batched

if TYPE_CHECKING:
    from pipeline.models.pack import ModelEntry
    from pipeline.models.runtime.protocols import Runner


class SFaceRecognizer:
    """Turns faces into L2-normalised 128-d identity embeddings."""

    template = "arcface"

    def __init__(self, runner: Runner | None, entry: ModelEntry) -> None:
        if runner is None:
            raise ModelPackError(str(entry.file), "the sface recognizer needs a model file")
        contract: dict[str, Any] = dict(entry.contract)
        self.runner = runner
        self.crop_size = int(contract.get("input_size", (112, 112))[0])
        self.dim = int(contract.get("embedding_size", 128))
        self.batch_size = int(contract.get("batch_size", 32))
        self.input_name = runner.input_names[0]

    def embed(self, rgb: np.ndarray, faces: Sequence[Face]) -> np.ndarray:
        """(N, dim) float32 L2-normalised embeddings of ``faces`` in one RGB uint8 frame."""
        if not faces:
            return np.zeros((0, self.dim), dtype=np.float32)
        crops, _ = warp_crops(rgb, [f.landmarks for f in faces], self.crop_size, "arcface")
        return self.embed_aligned(crops)

    def embed_aligned(self, crops: np.ndarray) -> np.ndarray:
        """(N, dim) embeddings of crops already aligned (N, 112, 112, 3) RGB uint8."""
        out = np.zeros((len(crops), self.dim), dtype=np.float32)
        for start in range(0, len(crops), self.batch_size):
            chunk = crops[start : start + self.batch_size]
            blob = np.ascontiguousarray(chunk.transpose(0, 3, 1, 2), dtype=np.float32)
            out[start : start + len(chunk)] = run_batched(self.runner, {self.input_name: blob})[0].reshape(
                len(chunk), -1
            )
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)
