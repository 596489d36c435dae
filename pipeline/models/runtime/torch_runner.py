"""The torch backend: the ONNX graph converted to a torch module by onnx2torch.

torch is an optional extra (``recast[torch]``): it is imported when a
:class:`TorchRunner` is made, never when this module is.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx

from pipeline.errors import ModelPackError
from pipeline.models.contracts import read_graph_io
from pipeline.models.runtime.protocols import Runner, TorchModelRunner
from pipeline.models.runtime.settings import ExecutionConfig

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


class TorchRunner:
    """The ONNX graph converted to a torch module by onnx2torch.

    On CUDA the module runs on ``cuda:<device_id>`` (half precision when
    ``fp16``); without CUDA it runs on CPU in float32.  ``run_torch`` keeps
    tensors on the device for callers that decode and encode on the GPU.
    """

    accepts_run_options = False

    def __init__(self, path: str, config: ExecutionConfig) -> None:
        import torch
        from onnx2torch import convert

        self.path = path
        self.warnings: list[str] = []
        self.rewrites: list[str] = []
        io = read_graph_io(path)
        self.input_names = [t.name for t in io.inputs]
        self.output_names = [t.name for t in io.outputs]
        self.input_shapes = [t.shape for t in io.inputs]
        self.output_shapes = [t.shape for t in io.outputs]
        self.one_item_per_call = False
        """Set once the module has refused a batch (exports whose graph fixes batch 1)."""
        try:
            module = convert(onnx.load(path))
        except Exception as exc:
            raise ModelPackError(path, f"onnx2torch cannot convert it ({type(exc).__name__}: {exc})") from exc
        if torch.cuda.is_available():
            self.device = torch.device("cuda", config.device_id)
            self.dtype = torch.float16 if config.fp16 else torch.float32
        else:
            self.device = torch.device("cpu")
            self.dtype = torch.float32
            if config.fp16:
                self.warnings.append(
                    f"torch backend: no CUDA device, {os.path.basename(path)} runs on CPU in float32"
                )
        for message in self.warnings:
            log.warning("%s", message)
        self.module = module.to(self.device, self.dtype).eval()
        self.providers = [f"torch:{self.device}:{str(self.dtype).removeprefix('torch.')}"]

    def run_torch(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Run on torch tensors (inputs in ``input_names`` order); outputs stay on the device."""
        import torch

        args = [t.to(self.device, self.dtype) for t in tensors]
        with torch.inference_mode():
            out = self.module(*args)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    def run_batches(self, tensors: Sequence[torch.Tensor], batch_size: int) -> torch.Tensor:
        """The first output for ``tensors`` whose first axis is the batch, ``batch_size`` items per call.

        Exports that fix the batch at 1 (production inswapper_128 and GFPGAN) often
        still run batched once converted to torch; if such a model refuses a batch,
        it is run one item per call from then on.
        """
        import torch

        n = int(tensors[0].shape[0])
        outs = [self._run_part([t[s : s + batch_size] for t in tensors]) for s in range(0, n, batch_size)]
        return outs[0] if len(outs) == 1 else torch.cat(outs)

    def _run_part(self, part: list[torch.Tensor]) -> torch.Tensor:
        import torch

        n = int(part[0].shape[0])
        if n == 1 or not self.one_item_per_call:
            try:
                return self.run_torch(part)[0]
            except RuntimeError as exc:
                declared = self.input_shapes[0][0] if self.input_shapes and self.input_shapes[0] else None
                if n == 1 or declared != 1:
                    raise
                log.warning(
                    "%s declares batch 1 and refused a batch of %d (%s); one per call", self.path, n, exc
                )
                self.one_item_per_call = True
        return torch.cat([self.run_torch([t[i : i + 1] for t in part])[0] for i in range(n)])

    def run(self, feeds: dict[str, np.ndarray], run_options: Any = None) -> list[np.ndarray]:
        """Outputs in graph order, as float32 numpy arrays (no ``run_options``: no adapter switching)."""
        import torch

        if run_options is not None:
            raise ValueError(f"{self.path}: the torch backend takes no ONNX Runtime RunOptions")
        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise ValueError(f"{self.path}: missing inputs {missing}")
        outs = self.run_torch([torch.from_numpy(np.ascontiguousarray(feeds[n])) for n in self.input_names])
        return [o.detach().float().cpu().numpy() for o in outs]


def torch_runner_of(runner: Runner | None, caller: str) -> TorchModelRunner:
    """``runner`` as a torch runner; TypeError naming ``caller`` when it runs elsewhere."""
    if not isinstance(runner, TorchRunner):
        where = ", ".join(runner.providers) if runner is not None else "no model file"
        raise TypeError(f"{caller} needs a model on the torch backend; this one runs on {where}")
    return runner


def torch_device_of(runner: Runner | None) -> torch.device | None:
    """The device of a torch runner; None for any other runner (or none)."""
    return runner.device if isinstance(runner, TorchRunner) else None
