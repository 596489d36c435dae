"""Execution backends behind every role class: ONNX Runtime (default) or torch.

A :class:`Runner` runs one ONNX graph: numpy arrays in by input name, numpy
arrays out in graph output order.  Role classes only see this interface, so
the same class works on either backend.

ONNX Runtime quietly drops providers it cannot start (a CUDA build on a
machine without a driver, TensorRT without ``libnvinfer``), so the providers
of every session are read back with ``get_providers()`` and any difference
from what was asked is logged and kept in ``Runner.warnings`` for job stats.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
from collections.abc import Iterable, Sequence
from typing import Any, Literal, Protocol

import numpy as np
import onnx

from pipeline.configbase import Frozen
from pipeline.errors import ModelPackError
from pipeline.models.contracts import Dim, read_graph_io

log = logging.getLogger(__name__)

TENSORRT = "TensorrtExecutionProvider"
CUDA = "CUDAExecutionProvider"
CPU = "CPUExecutionProvider"
PREFERRED_PROVIDERS: tuple[str, ...] = (TENSORRT, CUDA, CPU)
ONNXRUNTIME_BUILDS: frozenset[str] = frozenset(
    {
        "onnxruntime",
        "onnxruntime-gpu",
        "onnxruntime-directml",
        "onnxruntime-openvino",
        "onnxruntime-rocm",
        "onnxruntime-qnn",
        "onnxruntime-cann",
        "onnxruntime-silicon",
        "onnxruntime-training",
    }
)
"""Distributions that each install the ``onnxruntime`` module."""


class ExecutionConfig(Frozen):
    """How models run; the same object serves the job spec, the CLI and actors."""

    backend: Literal["onnxruntime", "torch"] = "onnxruntime"
    providers: tuple[str, ...] | None = None
    """ONNX Runtime providers in order; None = TensorRT, CUDA, CPU as available."""
    fp16: bool = False
    """Half precision: TensorRT fp16 engines, or a half torch module on CUDA."""
    device_id: int = 0
    trt_cache_dir: str | None = None
    """TensorRT engine/timing cache; None = ``<recast cache>/trt``."""
    intra_op_threads: int = 0
    """ONNX Runtime intra-op threads; 0 = its default (all cores)."""
    cudnn_conv_algo_search: Literal["EXHAUSTIVE", "HEURISTIC", "DEFAULT"] = "HEURISTIC"
    """cuDNN convolution algorithm search of the CUDA provider."""
    cpu_winograd: bool = True
    """Sessions on the CPU provider alone: 3x3 convolutions with >= 256 channels in and out run
    as Winograd F(4x4, 3x3) (:mod:`pipeline.models.winograd`; 1.5-2.5x faster on those layers,
    float32 rounding differences only).  False = ONNX Runtime's own convolution everywhere."""


class Runner(Protocol):
    """One loaded model.  ``input_shapes``/``output_shapes`` use None for dynamic dims."""

    path: str
    input_names: list[str]
    output_names: list[str]
    input_shapes: list[tuple[Dim, ...]]
    output_shapes: list[tuple[Dim, ...]]
    providers: list[str]
    warnings: list[str]

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]: ...


def supports_run_options(runner: Runner) -> bool:
    """True if ``runner.run`` takes ONNX Runtime ``RunOptions`` (LoRA adapters need them)."""
    return bool(getattr(runner, "accepts_run_options", False))


def recast_cache_root() -> str:
    """``$RECAST_CACHE_DIR`` or ``~/.cache/recast``: root of packs and engine caches."""
    return os.environ.get("RECAST_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "recast")


def onnxruntime_conflict_warning(distribution_names: Iterable[str]) -> str | None:
    """A warning if more than one ONNX Runtime distribution is installed.

    ``onnxruntime`` and ``onnxruntime-gpu`` (and the other builds) install the
    same module; whichever was installed last wins, and removing either breaks
    the other, so a GPU machine can end up running on CPU without an error.
    """
    names = sorted({n.lower().replace("_", "-") for n in distribution_names if n})
    builds = [n for n in names if n in ONNXRUNTIME_BUILDS]
    if len(builds) > 1:
        return (
            f"several ONNX Runtime builds are installed ({', '.join(builds)}); they share one module and "
            "the last one installed wins: keep only one (onnxruntime-gpu on GPU machines)"
        )
    return None


def installed_distribution_names() -> list[str]:
    """Names of the installed Python distributions (importlib.metadata)."""
    return [d.metadata["Name"] or "" for d in importlib.metadata.distributions()]


def batch_dim(runner: Runner, index: int = 0) -> Dim:
    """The declared batch size of input ``index`` (None = dynamic)."""
    shape = runner.input_shapes[index]
    return shape[0] if shape else None


def run_batched(runner: Runner, feeds: dict[str, np.ndarray], run_options: Any = None) -> list[np.ndarray]:
    """Run ``feeds`` whose first axis is the batch; loops when the model fixes batch 1.

    Production exports such as inswapper_128 and GFPGAN declare batch 1, so
    several faces go through one at a time on the same warm session.
    ``run_options`` (an ``onnxruntime.RunOptions``, e.g. with an active LoRA
    adapter) apply to every call; only runners that :func:`supports_run_options` take them.
    """
    if run_options is not None and not supports_run_options(runner):
        raise ValueError(f"{runner.path}: this runner ({runner.providers}) takes no ONNX Runtime RunOptions")

    def call(part: dict[str, np.ndarray]) -> list[np.ndarray]:
        # Runners without RunOptions support are called exactly as before.
        return runner.run(part) if run_options is None else runner.run(part, run_options)  # type: ignore[call-arg]

    n = next(iter(feeds.values())).shape[0]
    fixed = {batch_dim(runner, i) for i in range(len(runner.input_names))} - {None}
    if n == 0:
        raise ValueError("run_batched needs at least one item")
    if not fixed or fixed == {n}:
        return call(feeds)
    if fixed != {1}:
        raise ValueError(f"{runner.path}: model fixes batch size {sorted(fixed)}, cannot run a batch of {n}")
    parts = [call({k: v[i : i + 1] for k, v in feeds.items()}) for i in range(n)]
    return [np.concatenate([p[j] for p in parts], axis=0) for j in range(len(parts[0]))]


def _resolve_providers(config: ExecutionConfig, available: Sequence[str]) -> tuple[list[str], list[str]]:
    """Providers to ask for, plus warnings for requested ones that are not available."""
    warnings: list[str] = []
    if config.providers is None:
        wanted = [p for p in PREFERRED_PROVIDERS if p in available]
    else:
        wanted = [p for p in config.providers if p in available]
        missing = [p for p in config.providers if p not in available]
        if missing:
            warnings.append(
                f"requested providers {', '.join(missing)} are not available in this onnxruntime "
                f"(available: {', '.join(available)})"
            )
    if CPU not in wanted:
        wanted.append(CPU)  # always keep a provider that can run every op
    return wanted, warnings


def _provider_options(name: str, config: ExecutionConfig) -> dict[str, Any]:
    if name == TENSORRT:
        cache = config.trt_cache_dir or os.path.join(recast_cache_root(), "trt")
        return {
            "device_id": config.device_id,
            "trt_fp16_enable": config.fp16,
            "trt_engine_cache_enable": True,
            "trt_engine_cache_path": cache,
            "trt_timing_cache_enable": True,
        }
    if name == CUDA:
        return {
            "device_id": config.device_id,
            "cudnn_conv_algo_search": config.cudnn_conv_algo_search,
            "do_copy_in_default_stream": True,
        }
    return {}


class OrtRunner:
    """An ONNX Runtime session with checked providers.

    ``overridable_initializers``: the model lists initializers as graph inputs on
    purpose (LoRA slots that adapters override per run).  ONNX Runtime warns once
    per such tensor at load time; for these models its session log is limited to
    errors (providers are still checked and reported through ``warnings``).
    """

    accepts_run_options = True

    def __init__(self, path: str, config: ExecutionConfig, *, overridable_initializers: bool = False) -> None:
        import onnxruntime as ort

        self.path = path
        self.warnings: list[str] = []
        conflict = onnxruntime_conflict_warning(installed_distribution_names())
        if conflict:
            self.warnings.append(conflict)
        wanted, missing = _resolve_providers(config, ort.get_available_providers())
        self.warnings.extend(missing)
        if TENSORRT in wanted:
            os.makedirs(_provider_options(TENSORRT, config)["trt_engine_cache_path"], exist_ok=True)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if config.intra_op_threads:
            options.intra_op_num_threads = config.intra_op_threads
        if overridable_initializers:
            options.log_severity_level = 3  # errors only: drops the expected per-slot warnings
            log.info("%s has overridable initializers (LoRA slots); ORT load warnings muted", path)
        model: str | bytes = path
        self.rewrites: list[str] = []
        """Graph rewrites applied before the session was made (e.g. Winograd convolutions)."""
        if config.cpu_winograd and wanted == [CPU]:
            model, self.rewrites = _winograd_model(path)
            if self.rewrites:
                _release_freed_heap()  # the parsed model just freed: before ONNX Runtime parses its copy
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
            _release_freed_heap()
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
                    providers=[(p, _provider_options(p, config)) for p in providers],
                )
            except Exception as exc:
                if providers == [CPU]:
                    raise ModelPackError(
                        path, f"ONNX Runtime cannot load it ({type(exc).__name__}: {exc})"
                    ) from exc
                failed = providers.pop(0)
                self.warnings.append(f"{failed} failed to start for {os.path.basename(path)}: {exc}")

    def run(self, feeds: dict[str, np.ndarray], run_options: Any = None) -> list[np.ndarray]:
        """Outputs in graph order; ``run_options`` (``onnxruntime.RunOptions``) e.g. carry active adapters."""
        return list(self.session.run(self.output_names, feeds, run_options))


def _release_freed_heap() -> None:
    """Give memory freed by Python back to the OS (glibc ``malloc_trim``; elsewhere nothing).

    Loading a rewritten model frees hundreds of MB of parsed protobuf; glibc
    keeps such holes in the heap, where they count in the process's RSS.
    """
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        trim = None
    if trim is not None:
        trim(0)


def _winograd_model(path: str) -> tuple[str | bytes, list[str]]:
    """The model at ``path`` with its large 3x3 convolutions as Winograd F(4x4, 3x3), as bytes.

    Returns ``path`` itself (and no rewrites) when nothing qualifies, when the
    file cannot be read here (ONNX Runtime then says what is wrong with it), or
    when the rewrite fails: it is a speed-up, never a reason for a job to stop.
    """
    from google.protobuf.message import DecodeError

    from pipeline.models.winograd import rewrite_winograd

    try:
        model = onnx.load(path)
    except (OSError, DecodeError, ValueError):
        return path, []
    try:
        sites = rewrite_winograd(model)
    except Exception as exc:  # noqa: BLE001 - any failure on a user's graph means: run it as it is
        log.warning("%s: Winograd rewrite skipped (%s: %s)", path, type(exc).__name__, exc)
        return path, []
    if not sites:
        return path, []
    if model.ByteSize() >= 2**31 - 2**24:
        log.warning("%s: Winograd rewrite skipped: the rewritten graph is over protobuf's 2 GB limit", path)
        return path, []
    note = f"winograd F(4x4,3x3) on {len(sites)} conv(s)"
    log.info("%s: %s", os.path.basename(path), note)
    return model.SerializeToString(), [note]


def _ort_shape(shape: Sequence[Any]) -> tuple[Dim, ...]:
    return tuple(d if isinstance(d, int) and d > 0 else None for d in shape)


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
        io = read_graph_io(path)
        self.input_names = [t.name for t in io.inputs]
        self.output_names = [t.name for t in io.outputs]
        self.input_shapes = [t.shape for t in io.inputs]
        self.output_shapes = [t.shape for t in io.outputs]
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

    def run_torch(self, tensors: Sequence[Any]) -> list[Any]:
        """Run on torch tensors (inputs in ``input_names`` order); outputs stay on the device."""
        import torch

        args = [t.to(self.device, self.dtype) for t in tensors]
        with torch.inference_mode():
            out = self.module(*args)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """Outputs in graph order, as float32 numpy arrays."""
        import torch

        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise ValueError(f"{self.path}: missing inputs {missing}")
        outs = self.run_torch([torch.from_numpy(np.ascontiguousarray(feeds[n])) for n in self.input_names])
        return [o.detach().float().cpu().numpy() for o in outs]


def make_runner(path: str, config: ExecutionConfig, *, overridable_initializers: bool = False) -> Runner:
    """A runner for the ONNX file at ``path`` on the configured backend.

    ``overridable_initializers``: the model has LoRA slots (see :class:`OrtRunner`).
    """
    if config.backend == "torch":
        return TorchRunner(path, config)
    return OrtRunner(path, config, overridable_initializers=overridable_initializers)
