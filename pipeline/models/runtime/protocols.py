"""What role classes and renderers may rely on from a runner, on either backend.

A :class:`Runner` runs one ONNX graph: numpy arrays in by input name, numpy
arrays out in graph output order, so a role class works on ONNX Runtime and on
torch alike.  A :class:`TorchModelRunner` also runs torch tensors that stay on
its device; the device render path needs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from pipeline.models.contracts import Dim

if TYPE_CHECKING:
    import torch


class Runner(Protocol):
    """One loaded model.  ``input_shapes``/``output_shapes`` use None for dynamic dims."""

    path: str
    input_names: list[str]
    output_names: list[str]
    input_shapes: list[tuple[Dim, ...]]
    output_shapes: list[tuple[Dim, ...]]
    providers: list[str]
    """What the model really runs on (ONNX Runtime's ``get_providers()``, or ``torch:<device>:<dtype>``)."""
    warnings: list[str]
    """Fallbacks and install problems met while loading, for job stats."""
    rewrites: list[str]
    """Graph rewrites applied before the session was made (e.g. Winograd convolutions)."""
    accepts_run_options: bool
    """True if :meth:`run` takes ONNX Runtime ``RunOptions`` (LoRA adapters need them)."""

    def run(self, feeds: dict[str, np.ndarray], run_options: Any = None) -> list[np.ndarray]:
        """Outputs in graph order; ``run_options`` only where :attr:`accepts_run_options`."""
        ...


class TorchModelRunner(Runner, Protocol):
    """A runner whose model is a torch module: tensors in, tensors out, on :attr:`device`."""

    device: torch.device
    dtype: torch.dtype

    def run_torch(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Outputs of the module on ``tensors`` (inputs in ``input_names`` order), on the device."""
        ...

    def run_batches(self, tensors: Sequence[torch.Tensor], batch_size: int) -> torch.Tensor:
        """The first output for inputs whose first axis is the batch, ``batch_size`` items per call."""
        ...
