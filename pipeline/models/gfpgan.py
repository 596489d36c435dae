"""GFPGAN 1.4 face restorer, on any Runner.

Model I/O: input [1|N, 3, 512, 512] RGB, ``(x / 255 - 0.5) / 0.5``, the crop
aligned to the FFHQ 512 template; output in [-1, 1].  Blending the restored
face back (``blend``, about 0.8) is the renderer's job, not this class's.
:meth:`GfpganEnhancer.enhance` (numpy, any backend) and
:meth:`GfpganEnhancer.enhance_tensor` (torch tensors on the model's device) share
this normalisation, which lives only here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pipeline.errors import ModelPackError
from pipeline.models.contracts import contract_fraction, contract_size
from pipeline.models.runtime.batching import run_batched
from pipeline.models.runtime.torch_runner import torch_device_of, torch_runner_of

if TYPE_CHECKING:
    import torch

    from pipeline.models.pack import ModelEntry
    from pipeline.models.runtime.protocols import Runner


class GfpganEnhancer:
    """Restores aligned 512 px faces."""

    template = "ffhq"

    def __init__(self, runner: Runner | None, entry: ModelEntry) -> None:
        where = str(entry.file)
        if runner is None:
            raise ModelPackError(where, "the gfpgan enhancer needs a model file")
        width, height = contract_size(entry.contract, (512, 512), where)
        if width != height:
            raise ModelPackError(
                where, f"contract.input_size must be square for gfpgan, got {[width, height]}"
            )
        self.runner = runner
        self.input_name = runner.input_names[0]
        self.crop_size: int = width
        self.blend: float = contract_fraction(entry.contract, "blend", 0.8, where)

    @property
    def device(self) -> torch.device | None:
        """The torch device of the model (torch backend); None on ONNX Runtime."""
        return torch_device_of(self.runner)

    def enhance(self, crops: np.ndarray) -> np.ndarray:
        """Restored faces (N, 512, 512, 3) uint8 for aligned crops of the same shape."""
        if crops.shape[1:] != (self.crop_size, self.crop_size, 3):
            raise ValueError(
                f"enhance needs crops (N, {self.crop_size}, {self.crop_size}, 3), got {crops.shape}"
            )
        if len(crops) == 0:
            return crops.astype(np.uint8)
        blob = (crops.astype(np.float32) / 255.0 - 0.5) / 0.5
        out = run_batched(self.runner, {self.input_name: np.ascontiguousarray(blob.transpose(0, 3, 1, 2))})[0]
        out = (np.clip(out.transpose(0, 2, 3, 1), -1.0, 1.0) + 1.0) * 127.5
        return (out + 0.5).astype(np.uint8)

    def enhance_tensor(self, crops8: torch.Tensor, *, batch_size: int) -> torch.Tensor:
        """:meth:`enhance` on the torch device: crops (N, 3, S, S) float holding uint8 values in,
        restored faces in the same layout (uint8 values) out; ``batch_size`` faces per model call."""
        import torch

        runner = torch_runner_of(self.runner, "GfpganEnhancer.enhance_tensor")
        raw = runner.run_batches([(crops8 / 255.0 - 0.5) / 0.5], batch_size)
        return torch.floor((raw.float().clamp(-1.0, 1.0) + 1.0) * 127.5 + 0.5)  # the uint8 values of enhance
