"""Preparing a model for LoRA keeps its outputs (exactly, or to an ulp where ORT fuses differently),
and records the slots; a pattern that gives no slot says which weights could take one."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from pipeline.errors import ModelPackError
from pipeline.lora import LoraSlots, prepare_file, prepare_model
from pipeline.lora.checks import RELATIVE_TOLERANCE, check_unchanged
from pipeline.lora.prepare import sha256_bytes
from tests.lora_models import face_crops, make_fixed_batch_swapper, make_swapper


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3  # the "initializer is also an input" warning is expected
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def feeds() -> dict[str, np.ndarray]:
    target = face_crops(1).transpose(0, 3, 1, 2).astype(np.float32) / 255.0
    source = np.random.default_rng(3).normal(size=(1, 512)).astype(np.float32)
    return {"target": target, "source": source / np.linalg.norm(source)}


def test_prepared_standin_keeps_outputs_with_no_adapter(feeds: dict[str, np.ndarray]) -> None:
    original = make_swapper()
    prepared, slots = prepare_model(original, rank=4, base_sha256="0" * 64)

    base = _session(original).run(None, feeds)[0]
    session = _session(prepared)
    out = session.run(None, feeds)[0]
    assert np.array_equal(out, base)  # zero A/B add exact zeros

    # The contract inputs are unchanged; the slots are overridable initializers.
    assert [i.name for i in session.get_inputs()] == ["target", "source"]
    overridable = {i.name for i in session.get_overridable_initializers()}
    assert set(slots.parameter_shapes()) <= overridable
    # emap is still the last initializer, unchanged.
    assert prepared.graph.initializer[-1].name == "emap"
    np.testing.assert_array_equal(
        numpy_helper.to_array(prepared.graph.initializer[-1]),
        numpy_helper.to_array(original.graph.initializer[-1]),
    )
    ops = {s.weight: s.op for s in slots.slots}
    assert ops == {
        "enc.conv.weight": "Conv",
        "style.fc.weight": "Gemm",
        "mix.weight": "MatMul",
        "dec.conv.weight": "Conv",
    }
    by_weight = {s.weight: s for s in slots.slots}
    assert by_weight["enc.conv.weight"].a_shape == (4, 3, 3, 3)
    assert by_weight["enc.conv.weight"].b_shape == (8, 4, 1, 1)
    assert by_weight["style.fc.weight"].a_shape == (512, 4)  # transB weight [8, 512]: K=512
    assert by_weight["style.fc.weight"].b_shape == (4, 8)
    assert by_weight["style.fc.weight"].trans_b


def test_pattern_selects_weights_and_contract_round_trips() -> None:
    _, slots = prepare_model(make_swapper(), rank=2, base_sha256="ab" * 32, pattern=r"conv\.weight$")
    assert [s.weight for s in slots.slots] == ["enc.conv.weight", "dec.conv.weight"]
    contract = {"lora": slots.to_contract()}
    again = LoraSlots.from_contract(contract["lora"])
    assert again == slots and again.rank == 2 and again.base_sha256 == "ab" * 32
    with pytest.raises(ModelPackError, match="contract.lora"):
        LoraSlots.from_contract({"rank": 2, "slots": []})


def test_no_matching_weight_or_bad_rank_is_a_clear_error() -> None:
    with pytest.raises(ModelPackError, match="no MatMul/Gemm/Conv weight matches"):
        prepare_model(make_swapper(), rank=4, base_sha256="0" * 64, pattern="does-not-exist")
    with pytest.raises(ModelPackError, match="rank must be >= 1"):
        prepare_model(make_swapper(), rank=0, base_sha256="0" * 64)


def test_prepare_file_records_base_sha(tmp_path, feeds: dict[str, np.ndarray]) -> None:
    src = tmp_path / "swapper.onnx"
    onnx.save(make_swapper(), src)
    dest = tmp_path / "out" / "swapper.lora4.onnx"
    slots = prepare_file(str(src), str(dest), rank=4)
    assert slots.base_sha256 == sha256_bytes(src.read_bytes())
    out = _session(onnx.load(dest)).run(None, feeds)[0]
    assert np.array_equal(out, _session(onnx.load(src)).run(None, feeds)[0])
    with pytest.raises(ModelPackError, match="not an ONNX model"):
        bad = tmp_path / "bad.onnx"
        bad.write_bytes(b"not a model")
        prepare_file(str(bad), str(tmp_path / "x.onnx"), rank=4)


def test_unchanged_check_allows_ulps_on_a_fixed_batch_export_and_reports_them() -> None:
    """Zero slots on 128-channel convs change ORT's fusion: outputs move by an ulp, not more."""
    original = make_fixed_batch_swapper()
    prepared, _ = prepare_model(original, rank=4, base_sha256="0" * 64)
    report = check_unchanged(original.SerializeToString(), prepared.SerializeToString(), "swap.onnx")
    assert 0 < report.max_abs_difference < 1e-6  # not bit-identical, as the issue saw...
    assert report.relative_difference <= RELATIVE_TOLERANCE  # ...and within the scaled tolerance
    assert report.inputs == 4 and 0.9 < report.output_range <= 1.0
    assert "over 4 random inputs" in report.describe()


def test_unchanged_check_still_refuses_a_real_change() -> None:
    original = make_fixed_batch_swapper()
    prepared, slots = prepare_model(original, rank=4, base_sha256="0" * 64)
    slot = next(s for s in slots.slots if s.weight == "w_6")
    rng = np.random.default_rng(0)
    for tensor in prepared.graph.initializer:  # a slot deliberately initialised non-zero
        if tensor.name in (slot.a, slot.b):
            shape = slot.a_shape if tensor.name == slot.a else slot.b_shape
            tensor.CopyFrom(
                numpy_helper.from_array(rng.normal(0, 0.05, shape).astype(np.float32), tensor.name)
            )
    with pytest.raises(ModelPackError) as err:
        check_unchanged(original.SerializeToString(), prepared.SerializeToString(), "pack/swap.lora4.onnx")
    message = str(err.value)
    assert message.startswith("pack/swap.lora4.onnx: prepared model's output differs"), message
    assert "x the output's range" in message and "limit 1e-05" in message


def test_pattern_that_gives_no_slot_lists_weights_that_can() -> None:
    model = make_fixed_batch_swapper()
    with pytest.raises(ModelPackError) as err:  # the docs' old example, on generic names
        prepare_model(model, rank=4, base_sha256="0" * 64, pattern="style|Gemm")
    message = str(err.value)
    assert message.startswith("--pattern: no MatMul/Gemm/Conv weight matches 'style|Gemm'")
    assert "w_6 (Conv 128x128x3x3)" in message and "w_3 (Gemm 128x512)" in message
    with pytest.raises(ModelPackError) as err:  # only the depthwise conv: grouped, no slot
        prepare_model(model, rank=4, base_sha256="0" * 64, pattern="^w_8$")
    assert "matches only weights that cannot take a LoRA slot: w_8 (grouped Conv)" in str(err.value)
    assert "w_9 (Conv 128x128x3x3)" in str(err.value)
    with pytest.raises(ModelPackError, match="only other initializers: w_5, w_13"):
        prepare_model(model, rank=4, base_sha256="0" * 64, pattern="^w_(5|13)$")
    with pytest.raises(ModelPackError, match="is not a regular expression"):
        prepare_model(model, rank=4, base_sha256="0" * 64, pattern="w_(")
