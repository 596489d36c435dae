"""The ONNX Runtime backend: one session per model file, with checked providers.

ONNX Runtime quietly drops providers it cannot start (a CUDA build on a machine
without a driver, TensorRT without ``libnvinfer``), so the providers of every
session are read back with ``get_providers()`` and any difference from what was
asked is logged and kept in ``warnings`` for job stats.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from pipeline.errors import ModelPackError
from pipeline.models.contracts import Dim
from pipeline.models.runtime.heap import release_freed_heap
from pipeline.models.runtime.rewrites import winograd_model
from pipeline.models.runtime.settings import (
    CPU,
    TENSORRT,
    ExecutionConfig,
    installed_distribution_names,
    onnxruntime_conflict_warning,
    provider_options,
    resolve_providers,
)

log = logging.getLogger(__name__)


class OrtRunner:
    """An ONNX Runtime session with checked providers.

    ``overridable_initializers``: the model lists initializers as graph inputs on
    purpose (LoRA slots that adapters override per run).  ONNX Runtime warns once
    per such tensor at load time; for these models its session log is limited to
    errors (providers are still checked and reported through ``warnings``).

    ``graph``: the model's graph as the caller rewrote it (serialised), run instead of
    the file's (``path`` still names it in messages); no further rewrites are made.
    """

    accepts_run_options = True

    def __init__(
        self,
        path: str,
        config: ExecutionConfig,
        *,
        overridable_initializers: bool = False,
        graph: bytes | None = None,
    ) -> None:
        import onnxruntime as ort

        self.path = path
        self.warnings: list[str] = []
        conflict = onnxruntime_conflict_warning(installed_distribution_names())
        if conflict:
            self.warnings.append(conflict)
        wanted, missing = resolve_providers(config, ort.get_available_providers())
        self.warnings.extend(missing)
        if TENSORRT in wanted:
            os.makedirs(provider_options(TENSORRT, config)["trt_engine_cache_path"], exist_ok=True)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if config.intra_op_threads:
            options.intra_op_num_threads = config.intra_op_threads
        if overridable_initializers:
            options.log_severity_level = 3  # errors only: drops the expected per-slot warnings
            log.info("%s has overridable initializers (LoRA slots); ORT load warnings muted", path)
        model: str | bytes = path if graph is None else graph
        self.rewrites: list[str] = []
        if graph is None and config.cpu_winograd and wanted == [CPU]:
            model, self.rewrites = winograd_model(path)
            if self.rewrites:
                release_freed_heap()  # the parsed model just freed: before ONNX Runtime parses its copy
        try:
            self.session = self._create_session(ort, path, model, options, wanted, config)
        except ModelPackError as exc:
            if not self.rewrites:
                raise
            # A speed-up must never stop a job: run the file as it is.
            log.warning("%s: the Winograd-rewritten graph did not load (%s); running the original", path, exc)
            self.rewrites = []
            self.session = self._create_session(ort, path, path, options, wanted, config)
        if self.rewrites:
            del model
            release_freed_heap()
        self.providers: list[str] = list(self.session.get_providers())
        dropped = [p for p in wanted if p not in self.providers]
        if dropped:
            self.warnings.append(
                f"ONNX Runtime did not start {', '.join(dropped)} for {os.path.basename(path)}; "
                f"running on {', '.join(self.providers)}"
            )
        for message in self.warnings:
            log.warning("%s", message)
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.input_shapes = [_ort_shape(i.shape) for i in self.session.get_inputs()]
        self.output_shapes = [_ort_shape(o.shape) for o in self.session.get_outputs()]

    def _create_session(
        self,
        ort: Any,
        path: str,
        model: str | bytes,
        options: Any,
        wanted: list[str],
        config: ExecutionConfig,
    ) -> Any:
        """A session on ``wanted``; if a GPU provider fails to start, retry without it.

        Some ONNX Runtime builds raise (instead of falling back) when e.g.
        TensorRT's libraries are missing; the model is fine, so drop that
        provider, say so in ``warnings`` and go on.  Only a failure on CPU alone
        means the file itself is bad.  ``model`` is ``path`` or the rewritten graph's bytes.
        """
        providers = list(wanted)
        while True:
            try:
                return ort.InferenceSession(
                    model,
                    sess_options=options,
                    providers=[(p, provider_options(p, config)) for p in providers],
                )
            except Exception as exc:
                if providers == [CPU]:
                    raise ModelPackError(
                        path, f"ONNX Runtime cannot load it ({type(exc).__name__}: {exc})"
                    ) from exc
                failed = providers.pop(0)
                self.warnings.append(f"{failed} failed to start for {os.path.basename(path)}: {exc}")

    def overridable_initializer_names(self) -> set[str]:
        """Initializers a run may override (LoRA slots of a prepared swapper)."""
        return {i.name for i in self.session.get_overridable_initializers()}

    def run(self, feeds: dict[str, np.ndarray], run_options: Any = None) -> list[np.ndarray]:
        """Outputs in graph order; ``run_options`` (``onnxruntime.RunOptions``) e.g. carry active adapters."""
        return list(self.session.run(self.output_names, feeds, run_options))


def _ort_shape(shape: Sequence[Any]) -> tuple[Dim, ...]:
    return tuple(d if isinstance(d, int) and d > 0 else None for d in shape)
