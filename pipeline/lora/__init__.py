"""Per-identity LoRA adapters: slots in a base model, adapter files, training.

``prepare`` rewrites a model so chosen weights get zero-by-default low-rank slots;
``adapter`` writes, verifies, caches and activates adapter files per run;
``train`` (needs torch and onnx2torch) fine-tunes an adapter for one identity.
"""

from pipeline.lora.adapter import (
    AdapterCache,
    LoadedAdapter,
    activate,
    load_adapter,
    model_version_for,
    read_adapter_parameters,
    run,
    split_by_adapter,
    verify_adapter,
    write_adapter,
)
from pipeline.lora.prepare import LoraSlot, LoraSlots, merge_adapter, prepare_file, prepare_model

__all__ = [
    "AdapterCache",
    "LoadedAdapter",
    "LoraSlot",
    "LoraSlots",
    "activate",
    "load_adapter",
    "merge_adapter",
    "model_version_for",
    "prepare_file",
    "prepare_model",
    "read_adapter_parameters",
    "run",
    "split_by_adapter",
    "verify_adapter",
    "write_adapter",
]
