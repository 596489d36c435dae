"""Fine-tune one identity's LoRA adapter in torch (onnx2torch), training only the A/B tensors.

The prepared swapper is converted with onnx2torch and its LoRA tensors (A/B
initializers, zero in the file) are replaced by ``nn.Parameter`` objects, the
only ones with gradients; every base weight stays a frozen copy.  The loss is

    identity_weight * (1 - cos(recognizer(swapped aligned crop), identity embedding))
  + reconstruction_weight * (L1 outside a central face ellipse + L1 of low frequencies)

The second term keeps what is not identity (background, hair, pose, lighting)
from the target.  Crops are aligned 128 px inswapper crops (the ArcFace template
shifted by 8 px in x), so the recognizer's 112 px crop is ``[0:112, 8:120]``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import onnx
from onnx import numpy_helper

from pipeline.configbase import Frozen
from pipeline.errors import ModelPackError
from pipeline.lora.batch import batch_works, dynamic_batch
from pipeline.lora.convert import run_or_explain, to_torch, trainable_swapper
from pipeline.lora.prepare import LoraSlots

log = logging.getLogger(__name__)

CROP_SIZE = 128
RECOGNIZER_SIZE = 112


class TrainConfig(Frozen):
    """Training knobs; the defaults are the CPU small scale used in tests."""

    steps: int = 100
    batch_size: int = 4
    learning_rate: float = 5e-3
    identity_weight: float = 1.0
    reconstruction_weight: float = 1.0
    init_std: float | None = None  # std of A at start; None = 1/sqrt(fan_in) (B starts at zero)
    device: Literal["cpu", "cuda", "auto"] = "auto"
    seed: int = 0
    log_every: int = 10


@dataclass
class TrainResult:
    """Trained A/B arrays (float32, by slot tensor name) and the loss history."""

    params: dict[str, np.ndarray]
    losses: list[float] = field(default_factory=list)
    identity_losses: list[float] = field(default_factory=list)
    reconstruction_losses: list[float] = field(default_factory=list)
    steps_per_second: float = 0.0
    device: str = "cpu"


def read_emap(model: onnx.ModelProto, where: str = "swapper") -> np.ndarray:
    """inswapper's ``emap``: the last initializer, 512x512."""
    emap = numpy_helper.to_array(model.graph.initializer[-1])
    if emap.ndim != 2 or emap.shape[0] != emap.shape[1]:
        raise ModelPackError(where, f"last initializer is not a square emap (shape {list(emap.shape)})")
    return emap.astype(np.float32)


def source_latent(identity_embedding: np.ndarray, emap: np.ndarray) -> np.ndarray:
    """inswapper's source input: normalise(normed embedding @ emap), shape (1, 512)."""
    emb = np.asarray(identity_embedding, dtype=np.float32).reshape(1, -1)
    emb = emb / np.linalg.norm(emb)
    latent = emb @ emap
    return (latent / np.linalg.norm(latent)).astype(np.float32)


def _batchable(model: onnx.ModelProto, where: str) -> tuple[onnx.ModelProto, bool]:
    """``model`` with its batch pins rewritten if that verifiably works (True), else as is (False)."""
    rewritten, changes = dynamic_batch(model)
    reason = batch_works(model, rewritten)
    if reason is None:
        if changes:
            log.info("%s: batch made dynamic for training: %s", where, "; ".join(changes))
        return rewritten, True
    log.warning("%s: %s; training with one crop per call and gradient accumulation", where, reason)
    return model, False


def _outside_face_mask(size: int) -> np.ndarray:
    """1 outside a central ellipse covering the aligned face, 0 inside (soft edge)."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / (size - 1)
    r = ((xx - 0.5) / 0.36) ** 2 + ((yy - 0.52) / 0.44) ** 2
    return np.clip((r - 1.0) / 0.3, 0.0, 1.0).astype(np.float32)


def train_adapter(
    prepared: onnx.ModelProto,
    recognizer: onnx.ModelProto,
    slots: LoraSlots,
    targets: np.ndarray,
    identity_embedding: np.ndarray,
    config: TrainConfig | None = None,
    *,
    progress: Callable[[int, float], None] | None = None,
    swapper_where: str = "swapper",
    recognizer_where: str = "recognizer",
) -> TrainResult:
    """Train the A/B tensors of ``slots`` so swaps of ``targets`` look like the identity.

    ``targets`` (N, 128, 128, 3) uint8 RGB aligned crops of target footage;
    ``identity_embedding`` the identity's recognizer embedding (any norm).
    Models with a batch fixed at 1 are rewritten to a dynamic batch when that is
    exact (:mod:`pipeline.lora.batch`), else trained one crop per call with
    gradient accumulation.  ``swapper_where`` / ``recognizer_where`` name the
    models in errors (ModelPackError naming the node when a model cannot be
    converted or run in torch).
    """
    import torch
    import torch.nn.functional as F

    config = config or TrainConfig()
    if targets.ndim != 4 or targets.shape[1:] != (CROP_SIZE, CROP_SIZE, 3) or targets.dtype != np.uint8:
        raise ValueError(
            f"targets must be (N, {CROP_SIZE}, {CROP_SIZE}, 3) uint8, got {targets.shape} {targets.dtype}"
        )
    device = config.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)

    swap_model, swap_batches = _batchable(prepared, swapper_where)
    rec_model, rec_batches = _batchable(recognizer, recognizer_where)
    micro = config.batch_size if swap_batches and rec_batches else 1
    swapper, params = trainable_swapper(swap_model, slots, device, swapper_where)
    swapper.eval()
    rec = to_torch(rec_model, recognizer_where).to(device).eval()
    for p in rec.parameters():
        p.requires_grad_(False)
    with torch.no_grad():
        # Standard LoRA start: A random, B zero, so step 0 is the base model.
        for slot in slots.slots:
            fan_in = int(np.prod(slot.a_shape[1:])) if slot.op == "Conv" else slot.a_shape[0]
            std = config.init_std if config.init_std is not None else 1.0 / np.sqrt(fan_in)
            params[slot.a].normal_(0.0, std)
    optim = torch.optim.Adam(list(params.values()), lr=config.learning_rate)

    emb = torch.from_numpy(np.asarray(identity_embedding, np.float32).reshape(1, -1)).to(device)
    emb = F.normalize(emb, dim=1)
    latent = torch.from_numpy(source_latent(identity_embedding, read_emap(prepared))).to(device)
    data = torch.from_numpy(targets).to(device).permute(0, 3, 1, 2).float() / 255.0
    outside = torch.from_numpy(_outside_face_mask(CROP_SIZE)).to(device)[None, None]
    x0 = (CROP_SIZE - RECOGNIZER_SIZE) // 2  # 8: the ArcFace template's x shift at 128 px
    result = TrainResult(params={}, device=device)

    start = time.perf_counter()
    for step in range(config.steps):
        idx = rng.choice(len(data), size=min(config.batch_size, len(data)), replace=False)
        optim.zero_grad(set_to_none=True)
        loss_sum = id_sum = rec_sum = 0.0
        for first in range(0, len(idx), micro):
            batch = data[idx[first : first + micro]]
            share = len(batch) / len(idx)  # the batch loss is the mean over its crops
            out = run_or_explain(swapper, swap_model, (batch, latent.expand(len(batch), -1)), swapper_where)
            crop = out[:, :, :RECOGNIZER_SIZE, x0 : x0 + RECOGNIZER_SIZE]
            feat = F.normalize(run_or_explain(rec, rec_model, (crop * 2.0 - 1.0,), recognizer_where), dim=1)
            id_loss = (1.0 - (feat * emb).sum(dim=1)).mean()
            rec_loss = ((out - batch).abs() * outside).mean() + (
                F.avg_pool2d(out, 16) - F.avg_pool2d(batch, 16)
            ).abs().mean()
            loss = config.identity_weight * id_loss + config.reconstruction_weight * rec_loss
            (loss * share).backward()
            loss_sum += loss.item() * share
            id_sum += id_loss.item() * share
            rec_sum += rec_loss.item() * share
        optim.step()
        result.losses.append(loss_sum)
        result.identity_losses.append(id_sum)
        result.reconstruction_losses.append(rec_sum)
        if progress is not None:
            progress(step, result.losses[-1])
        if step % config.log_every == 0 or step == config.steps - 1:
            log.info(
                "step %d/%d loss %.4f identity %.4f reconstruction %.4f",
                step + 1,
                config.steps,
                result.losses[-1],
                result.identity_losses[-1],
                result.reconstruction_losses[-1],
            )
    elapsed = time.perf_counter() - start
    result.steps_per_second = config.steps / elapsed if elapsed > 0 else 0.0
    result.params = {n: p.detach().cpu().numpy().astype(np.float32) for n, p in params.items()}
    return result


def identity_loss(
    swapped: np.ndarray, recognizer_embed: Callable[[np.ndarray], np.ndarray], identity_embedding: np.ndarray
) -> float:
    """Mean 1 - cosine between recognizer embeddings of swapped 128 px crops and the identity.

    ``recognizer_embed`` maps (N, 3, 112, 112) float32 in [-1, 1] to (N, D).
    """
    x0 = (CROP_SIZE - RECOGNIZER_SIZE) // 2
    crop = swapped[:, :, :RECOGNIZER_SIZE, x0 : x0 + RECOGNIZER_SIZE] * 2.0 - 1.0
    feats = recognizer_embed(crop.astype(np.float32))
    feats = feats / np.linalg.norm(feats, axis=1, keepdims=True)
    emb = np.asarray(identity_embedding, np.float32).ravel()
    emb = emb / np.linalg.norm(emb)
    return float(np.mean(1.0 - feats @ emb))
