"""inswapper_128 face swapper, on any Runner.

Model I/O: ``target`` [N|1, 3, 128, 128] RGB in [0, 1], the target face aligned
to the ArcFace template scaled to 128 (insightface ``estimate_norm``);
``source`` [N|1, 512], the latent ``normed_embedding @ emap`` L2-normalised,
where ``emap`` (512x512) is the graph's last initializer; output
[N|1, 3, 128, 128] RGB in [0, 1].  Exports with a fixed batch of 1 are called
once per face on the same session.  :meth:`InSwapper.swap` (numpy, any backend)
and :meth:`InSwapper.swap_tensor` (torch tensors on the model's device, for the
device render path) share this maths, which lives only here.

LoRA: a swapper prepared with slots (``contract["lora"]``, see
:mod:`pipeline.lora`) serves identities that carry an adapter.  A batch mixing
identities is split by adapter, run once per group on the same warm ONNX Runtime
session with that adapter active (``RunOptions.add_active_adapter``), and put
back in order; identities without an adapter run the base model unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

from pipeline.errors import FaceError, ModelPackError, SpecError
from pipeline.lora.adapter import LoadedAdapter, activate, split_by_adapter
from pipeline.lora.prepare import LoraSlots
from pipeline.models.contracts import contract_size
from pipeline.models.runtime.batching import run_batched
from pipeline.models.runtime.ort_runner import OrtRunner
from pipeline.models.runtime.torch_runner import torch_device_of, torch_runner_of

if TYPE_CHECKING:
    import torch

    from pipeline.geometry.types import Identity
    from pipeline.models.pack import ModelEntry
    from pipeline.models.runtime.protocols import Runner


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


@dataclass(frozen=True, eq=False)
class PreparedSource:
    """What :meth:`InSwapper.prepare` computes once per identity: its latent and its adapter.

    Converts to the latent array (``np.asarray(prepared)``), so code written for
    plain latents keeps working.
    """

    latent: np.ndarray  # (512,) float32, L2-normalised
    adapter: LoadedAdapter | None = None

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        return self.latent if dtype is None else self.latent.astype(dtype)


def lora_slots_of(entry: ModelEntry) -> LoraSlots | None:
    """The LoRA slot record of a swapper entry (``contract["lora"]``), or None."""
    record = entry.contract.get("lora")
    if record is None:
        return None
    if not isinstance(record, dict):
        raise ModelPackError(f"{entry.file} contract.lora", f"must be an object, got {type(record).__name__}")
    return LoraSlots.from_contract(record, f"{entry.file} contract.lora")


def _check_slots_in_session(runner: Runner, slots: LoraSlots, where: str) -> None:
    """ModelPackError if the manifest declares LoRA slots the ONNX Runtime session does not have.

    Otherwise a manifest pointing at an unprepared file would only fail at the first
    adapter run, mid-shot.  Torch runners cannot switch adapters and are not checked.
    """
    if not isinstance(runner, OrtRunner):
        return
    missing = sorted(set(slots.parameter_shapes()) - runner.overridable_initializer_names())
    if missing:
        raise ModelPackError(
            where,
            f"contract.lora names {len(missing)} LoRA tensors the model does not have as overridable "
            f"initializers (e.g. {missing[:3]}); is this the prepared swapper file?",
        )


class InSwapper:
    """Replaces aligned 128 px target faces with a prepared source identity."""

    template = "arcface"
    paste_mask: np.ndarray | None = None
    """Whole faces: the renderer colour matches and feathers them (see :class:`~pipeline.models.roles.Swapper`)."""

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
        self.lora_slots: LoraSlots | None = lora_slots_of(entry)
        if self.lora_slots is not None:
            _check_slots_in_session(runner, self.lora_slots, where)

    @property
    def device(self) -> torch.device | None:
        """The torch device of the model (torch backend); None on ONNX Runtime."""
        return torch_device_of(self.runner)

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

    def prepare(self, identity: Identity) -> PreparedSource:
        """The source latent and adapter of ``identity`` (computed once per identity).

        SpecError if the identity has an adapter but this swapper cannot apply one
        (no LoRA slots in the pack, or the torch backend, which has no adapter switching).
        """
        adapter = identity.adapter
        if adapter is not None:
            self._check_adapter_support(f"identities.{identity.name}.adapter", adapter)
        try:
            latent = self.latent_from_embedding(identity.embedding)
        except ValueError as exc:
            raise FaceError(identity.name, str(exc)) from exc
        return PreparedSource(latent=latent, adapter=adapter)

    def _check_adapter_support(self, field: str, adapter: LoadedAdapter) -> None:
        if self.lora_slots is None:
            raise SpecError(
                field,
                f"adapter {adapter.url} needs a swapper prepared with LoRA slots, but the pack's swapper "
                f"{self.runner.path} has no contract.lora",
            )
        if not self.runner.accepts_run_options:
            raise SpecError(
                field,
                f"adapter {adapter.url} needs the onnxruntime backend (per-call adapter switching); "
                f"the swapper runs on {', '.join(self.runner.providers)}: set execution.backend "
                "to 'onnxruntime' or drop the adapter",
            )

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
        adapters = [p.adapter if isinstance(p, PreparedSource) else None for p in prepared]
        groups = split_by_adapter(adapters)
        if len(groups) == 1 and groups[0][0] is None:
            out = run_batched(self.runner, {"target": target, "source": source})[0]
        else:
            # One ORT run applies one adapter set to the whole batch: run each group
            # on the same session and scatter its rows back to their places.
            out = np.empty(target.shape, np.float32)
            for adapter, rows in groups:
                options = None
                if adapter is not None:
                    self._check_adapter_support("swap.adapter", adapter)
                    options = activate(ort.RunOptions(), adapter)
                index = np.asarray(rows)
                feeds = {"target": target[index], "source": source[index]}
                out[index] = run_batched(self.runner, feeds, options)[0]
        return (np.clip(out.transpose(0, 2, 3, 1), 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)

    def source_tensor(self, prepared: Any, device: torch.device) -> torch.Tensor:
        """The latent of ``prepared`` (from :meth:`prepare`), (512,) float32 on ``device``."""
        import torch

        return torch.from_numpy(np.asarray(prepared, dtype=np.float32).reshape(-1)).to(device)

    def swap_tensor(self, crops8: torch.Tensor, sources: torch.Tensor, *, batch_size: int) -> torch.Tensor:
        """:meth:`swap` on the torch device: crops (N, 3, S, S) float holding uint8 values, and
        the stacked :meth:`source_tensor` latents (N, 512); returns (N, 3, S, S) float uint8 values.

        ``batch_size`` faces per model call.  Adapters need ONNX Runtime and are refused
        by :meth:`prepare` on this backend.
        """
        import torch

        runner = torch_runner_of(self.runner, "InSwapper.swap_tensor")
        feeds = {"target": crops8 / 255.0, "source": sources}
        raw = runner.run_batches([feeds[name] for name in runner.input_names], batch_size)
        return torch.floor(raw.float().clamp(0.0, 1.0) * 255.0 + 0.5)  # the uint8 values of swap
