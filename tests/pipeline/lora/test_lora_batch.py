"""Training on swappers exported with a fixed batch of 1 (``tests/lora_models.make_fixed_batch_swapper``):
the batch pins are rewritten exactly, or training falls back to batch-1 calls with gradient
accumulation; what cannot be converted or run is a clear error naming the model and the node."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

pytest.importorskip("onnx2torch", reason="training needs the torch extra (torch, onnx2torch)")

import torch

from pipeline.errors import ModelPackError
from pipeline.lora import prepare_model
from pipeline.lora.batch import batch_works, dynamic_batch
from pipeline.lora.convert import run_or_explain, to_torch
from pipeline.lora.train import TrainConfig, train_adapter
from tests.lora_models import face_crops, make_fixed_batch_swapper, make_recognizer


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def _feeds(batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    target = face_crops(batch, seed=seed).transpose(0, 3, 1, 2).astype(np.float32) / 255.0
    source = rng.normal(size=(batch, 512)).astype(np.float32)
    return {"target": target, "source": source / np.linalg.norm(source, axis=1, keepdims=True)}


def test_rewritten_graph_has_a_dynamic_batch_and_the_original_outputs() -> None:
    original = make_fixed_batch_swapper()
    rewritten, changes = dynamic_batch(original)
    assert "Reshape n_7 ([1, 128, 1, 1] -> [-1, 128, 1, 1])" in changes
    assert "Reshape n_19 ([1, 3, 128, 128] -> [-1, 3, 128, 128])" in changes
    assert {"target: batch 1 -> dynamic", "source: batch 1 -> dynamic"} <= set(changes)
    # The shape constants themselves are untouched (another node could share them); emap stays last.
    by_name = {t.name: numpy_helper.to_array(t) for t in rewritten.graph.initializer}
    assert by_name["w_5"].tolist() == [1, 128, 1, 1]
    assert rewritten.graph.initializer[-1].name == original.graph.initializer[-1].name == "w_18"

    base, dyn = _session(original), _session(rewritten)
    four = _feeds(4)
    singles = [base.run(None, {k: v[i : i + 1] for k, v in four.items()})[0] for i in range(4)]
    for i in range(4):  # batch 1: the original's numbers, to float32 rounding (ORT fuses differently)
        one = dyn.run(None, {k: v[i : i + 1] for k, v in four.items()})[0]
        np.testing.assert_allclose(one, singles[i], rtol=0, atol=5e-7)
    with pytest.raises(Exception, match="Got: 4 Expected: 1"):
        base.run(None, four)  # the original cannot take a batch...
    batched = dyn.run(None, four)[0]  # ...the rewritten one can, and each row is that crop's output
    np.testing.assert_allclose(batched, np.concatenate(singles), rtol=0, atol=1e-5)
    assert batch_works(original, rewritten) is None

    # In torch too: the converted rewritten graph takes the batch.
    module = to_torch(rewritten, "swap.onnx")
    with torch.no_grad():
        out = module(torch.from_numpy(four["target"]), torch.from_numpy(four["source"])).numpy()
    np.testing.assert_allclose(out, batched, rtol=0, atol=1e-4)


def test_a_pin_that_cannot_be_rewritten_is_reported_and_named() -> None:
    pinned = make_fixed_batch_swapper(shape_from_concat=True)  # the Reshape's shape is computed
    rewritten, changes = dynamic_batch(pinned)
    assert not any("n_7" in c for c in changes)
    reason = batch_works(pinned, rewritten)
    assert reason is not None and "batch 2" in reason and "n_7" in reason
    module = to_torch(rewritten, "pack/swap.onnx")
    with pytest.raises(ModelPackError) as err:
        run_or_explain(module, rewritten, (torch.rand(4, 3, 128, 128), torch.rand(4, 512)), "pack/swap.onnx")
    message = str(err.value)
    assert message.startswith("pack/swap.onnx node n_7 (Reshape)"), message
    assert "[1, 128, 1, 1]' is invalid for input of size 512" in message


def test_unconvertible_graph_names_model_and_node() -> None:
    model = make_fixed_batch_swapper(unconvertible=True)
    assert _session(model).run(None, _feeds(1))[0].shape == (1, 3, 128, 128)  # valid ONNX, ORT runs it
    with pytest.raises(ModelPackError) as err:
        to_torch(model, "s3://packs/p/swap.onnx")
    assert str(err.value).startswith(
        "s3://packs/p/swap.onnx node n_lp (LpNormalization): cannot be converted"
    )


def test_batch_one_calls_with_accumulation_train_like_a_batch() -> None:
    """The same function with a rewritable pin (trained batched) and an unrewritable one (trained
    one crop per call, gradients accumulated): the same adapter after the same steps."""
    recognizer = make_recognizer()
    identity = np.random.default_rng(2).normal(size=512).astype(np.float32)
    targets = face_crops(6, seed=4)
    config = TrainConfig(steps=2, batch_size=3, learning_rate=1e-2, device="cpu")
    results = []
    for pinned in (False, True):
        model = make_fixed_batch_swapper(channels=16, shape_from_concat=pinned)
        prepared, slots = prepare_model(model, rank=2, base_sha256="0" * 64, pattern="^w_(6|9)$")
        results.append(train_adapter(prepared, recognizer, slots, targets, identity, config))
    batched, looped = results
    np.testing.assert_allclose(looped.losses, batched.losses, rtol=1e-4)
    for name, value in batched.params.items():
        np.testing.assert_allclose(looped.params[name], value, rtol=1e-3, atol=1e-5)
    assert any(np.abs(v).max() > 0 for n, v in batched.params.items() if n.endswith("lora_B"))
