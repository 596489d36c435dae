"""How models run: :class:`ExecutionConfig`, ONNX Runtime provider choice and options.

ONNX Runtime quietly drops providers it cannot start (a CUDA build on a machine
without a driver, TensorRT without ``libnvinfer``), so the runners read back the
providers of every session and report any difference; this module holds what is
decided before a session exists.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pipeline.configbase import Frozen

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
    """``onnxruntime`` (the default) or ``torch`` (ONNX models converted with onnx2torch)."""
    providers: tuple[str, ...] | None = None
    """ONNX Runtime providers in order; None = TensorRT, CUDA, CPU as available."""
    fp16: bool = False
    """Half precision: TensorRT fp16 engines, or a half torch module on CUDA."""
    device_id: int = 0
    """The CUDA device the sessions use on a machine with several GPUs."""
    trt_cache_dir: str | None = None
    """TensorRT engine/timing cache; None = ``<recast cache>/trt``."""
    intra_op_threads: int = 0
    """ONNX Runtime intra-op threads; 0 = its default (all cores)."""
    cudnn_conv_algo_search: Literal["EXHAUSTIVE", "HEURISTIC", "DEFAULT"] = "HEURISTIC"
    """cuDNN convolution algorithm search of the CUDA provider."""
    cpu_winograd: bool = True
    """Sessions on the CPU provider alone: 3x3 convolutions with >= 256 channels in and out run
    as Winograd F(4x4, 3x3) (:mod:`pipeline.models.runtime.winograd`; 1.5-2.5x faster on those
    layers, float32 rounding differences only).  False = ONNX Runtime's own convolution everywhere."""


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


def resolve_providers(config: ExecutionConfig, available: Sequence[str]) -> tuple[list[str], list[str]]:
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


def provider_options(name: str, config: ExecutionConfig) -> dict[str, Any]:
    """The ONNX Runtime options of provider ``name`` under ``config``."""
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
