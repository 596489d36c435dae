"""inswapper_128 face swapper, on any Runner.

Model I/O: ``target`` [N|1, 3, 128, 128] RGB in [0, 1], the target face aligned
to the ArcFace template scaled to 128 (insightface ``estimate_norm``);
``source`` [N|1, 512], the latent ``normed_embedding @ emap`` L2-normalised,
where ``emap`` (512x512) is the graph's last initializer; output
[N|1, 3, 128, 128] RGB in [0, 1].  Exports with a fixed batch of 1 are called
once per face on the same session.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import numpy_helper

from pipeline.errors import FaceError, ModelPackError
from pipeline.models.contracts import contract_size
from pipeline.models.runner import run_batched

if TYPE_CHECKING:
    from pipeline.faces.identity import Identity
    from pipeline.models.pack import ModelEntry
    from pipeline.models.runner import Runner


def read_emap(path: str) -> np.ndarray:
    """The last initializer of the ONNX file at ``path`` (inswapper's ``emap``)."""
    graph = onnx.load(path).graph
    if not len(graph.initializer):
        raise ModelPackError(path, "has no initializers; an inswapper model keeps its emap in the last one")
    emap = numpy_helper.to_array(graph.initializer[-1]).astype(np.float32)
    if emap.shape != (512, 512):
        raise ModelPackError(
            path, f"last initializer has shape {list(emap.shape)}, expected the 512x512 emap"
        )
    return emap


class InSwapper:
    """Replaces aligned 128 px target faces with a prepared source identity."""

    template = "arcface"

    def __init__(self, runner: Runner | None, entry: ModelEntry) -> None:
        where = str(entry.file)
        if runner is None:
            raise ModelPackError(where, "the inswapper swapper needs a model file")
        width, height = contract_size(entry.contract, (128, 128), where)
        if width != height:
            raise ModelPackError(
                where, f"contract.input_size must be square for inswapper, got {[width, height]}"
            )
        for name in ("target", "source"):
            if name not in runner.input_names:
                raise ModelPackError(
                    where, f"an inswapper model needs an input named {name!r}, has {runner.input_names}"
                )
        self.runner = runner
        self.crop_size: int = width
        self.emap = read_emap(runner.path)

    def latent_from_embedding(self, embedding: np.ndarray) -> np.ndarray:
        """(512,) float32 source latent: ``normalise(normalise(embedding) @ emap)``."""
        emb = np.asarray(embedding, dtype=np.float32).reshape(-1)
        if emb.shape[0] != self.emap.shape[0]:
            raise ValueError(
                f"inswapper needs {self.emap.shape[0]}-d ArcFace embeddings, got {emb.shape[0]}-d "
                "(the pack's recognizer must be a 512-d arcface model)"
            )
        emb = emb / max(float(np.linalg.norm(emb)), 1e-12)
        latent = emb @ self.emap
        return (latent / max(float(np.linalg.norm(latent)), 1e-12)).astype(np.float32)

    def prepare(self, identity: Identity) -> Any:
        """The source latent of ``identity`` (computed once per identity)."""
        try:
            return self.latent_from_embedding(identity.embedding)
        except ValueError as exc:
            raise FaceError(identity.name, str(exc)) from exc

    def swap(self, crops: np.ndarray, prepared: Sequence[Any]) -> np.ndarray:
        """Swapped faces (N, S, S, 3) uint8 for aligned target crops (N, S, S, 3) uint8 RGB."""
        n = len(crops)
        if n != len(prepared):
            raise ValueError(f"swap got {n} crops but {len(prepared)} prepared sources")
        if crops.shape[1:] != (self.crop_size, self.crop_size, 3):
            raise ValueError(
                f"swap needs crops (N, {self.crop_size}, {self.crop_size}, 3), got {crops.shape}"
            )
        if n == 0:
            return np.zeros_like(crops, dtype=np.uint8)
        target = np.ascontiguousarray((crops.astype(np.float32) / 255.0).transpose(0, 3, 1, 2))
        source = np.ascontiguousarray(np.stack([np.asarray(p, np.float32).reshape(-1) for p in prepared]))
        out = run_batched(self.runner, {"target": target, "source": source})[0]
        return (np.clip(out.transpose(0, 2, 3, 1), 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
