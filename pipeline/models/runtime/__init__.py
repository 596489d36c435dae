"""Execution backends behind every role class: ONNX Runtime (default) or torch.

* :mod:`~pipeline.models.runtime.settings`: :class:`ExecutionConfig`, provider choice and options;
* :mod:`~pipeline.models.runtime.protocols`: :class:`Runner` and :class:`TorchModelRunner`,
  what role classes and renderers rely on;
* :mod:`~pipeline.models.runtime.ort_runner` / :mod:`~pipeline.models.runtime.torch_runner`:
  the two backends;
* :mod:`~pipeline.models.runtime.batching`: batches through models that fix batch 1;
* :mod:`~pipeline.models.runtime.rewrites` and :mod:`~pipeline.models.runtime.winograd`:
  graph rewrites made before a CPU session is created;
* :mod:`~pipeline.models.runtime.resize`: a fixed input's height and width made free, and
  the checks that the graph then runs at other sizes and as before at its own.
"""

from __future__ import annotations

from pipeline.models.runtime.ort_runner import OrtRunner
from pipeline.models.runtime.protocols import Runner
from pipeline.models.runtime.settings import ExecutionConfig
from pipeline.models.runtime.torch_runner import TorchRunner


def make_runner(path: str, config: ExecutionConfig, *, overridable_initializers: bool = False) -> Runner:
    """A runner for the ONNX file at ``path`` on the configured backend.

    ``overridable_initializers``: the model has LoRA slots (see :class:`OrtRunner`).
    """
    if config.backend == "torch":
        return TorchRunner(path, config)
    return OrtRunner(path, config, overridable_initializers=overridable_initializers)
