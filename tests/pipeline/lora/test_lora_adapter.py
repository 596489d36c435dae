"""Adapters switched per call on one warm session match merged weights; the cache stays bounded."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from pipeline.errors import ModelPackError
from pipeline.lora import (
    AdapterCache,
    LoraSlots,
    load_adapter,
    merge_adapter,
    prepare_model,
    read_adapter_parameters,
    run,
    split_by_adapter,
    verify_adapter,
    write_adapter,
)
from pipeline.store import storage
from tests.lora_models import face_crops, make_swapper


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def _random_params(slots: LoraSlots, seed: int, scale: float = 0.2) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: (rng.normal(0, scale, s)).astype(np.float32) for n, s in slots.parameter_shapes().items()}


@dataclass
class Setup:
    original: onnx.ModelProto
    slots: LoraSlots
    session: ort.InferenceSession
    adapters: list[Path]
    params: list[dict[str, np.ndarray]]
    feeds: dict[str, np.ndarray]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    tmp = tmp_path_factory.mktemp("lora_adapter")
    original = make_swapper()
    prepared, slots = prepare_model(original, rank=4, base_sha256=hashlib.sha256(b"standin").hexdigest())
    params = [_random_params(slots, seed) for seed in (10, 11)]
    paths = []
    for i, p in enumerate(params):
        path = tmp / f"identity{i}.onnx_adapter"
        write_adapter(str(path), slots, p)
        paths.append(path)
    target = face_crops(2, seed=4).transpose(0, 3, 1, 2).astype(np.float32) / 255.0
    source = np.random.default_rng(5).normal(size=(1, 512)).astype(np.float32)
    feeds = {"target": target[:1], "source": source / np.linalg.norm(source)}
    return Setup(original, slots, _session(prepared), paths, params, feeds)


def test_written_adapter_holds_the_parameters(setup: Setup) -> None:
    stored = read_adapter_parameters(str(setup.adapters[0]))
    assert set(stored) == set(setup.params[0])
    for name, value in setup.params[0].items():
        np.testing.assert_array_equal(stored[name], value)


def test_switching_per_call_matches_merged_weights(setup: Setup) -> None:
    base = _session(setup.original).run(None, setup.feeds)[0]
    loaded = [load_adapter(str(p), setup.slots) for p in setup.adapters]
    merged = [
        _session(merge_adapter(setup.original, setup.slots, p)).run(None, setup.feeds)[0]
        for p in setup.params
    ]
    assert np.abs(merged[0] - merged[1]).max() > 1e-2  # the adapters really differ

    assert np.array_equal(run(setup.session, setup.feeds, None)[0], base)
    for adapter, reference in zip(loaded, merged):
        out = run(setup.session, setup.feeds, adapter)[0]
        np.testing.assert_allclose(out, reference, atol=2e-5)
        assert np.abs(out - base).max() > 1e-2


def test_switching_back_and_forth_stays_exact(setup: Setup) -> None:
    loaded = [load_adapter(str(p), setup.slots) for p in setup.adapters]
    choices: list = [None, *loaded]
    first = [run(setup.session, setup.feeds, a)[0] for a in choices]
    rng = np.random.default_rng(0)
    for _ in range(60):
        k = int(rng.integers(len(choices)))
        assert np.array_equal(run(setup.session, setup.feeds, choices[k])[0], first[k])


def test_wrong_base_model_or_shapes_is_rejected(setup: Setup, tmp_path: Path) -> None:
    other = setup.slots.model_copy(update={"base_sha256": hashlib.sha256(b"other model").hexdigest()})
    with pytest.raises(ModelPackError, match="made for another base model"):
        load_adapter(str(setup.adapters[0]), other)
    # Same base, other rank: tensor shapes do not fit the slots.
    _, rank2 = prepare_model(setup.original, rank=2, base_sha256=setup.slots.base_sha256)
    with pytest.raises(ModelPackError, match="shape"):
        load_adapter(str(setup.adapters[0]), rank2)
    bad = tmp_path / "garbage.onnx_adapter"
    bad.write_bytes(b"\x00" * 64)
    with pytest.raises(ModelPackError, match="not an ONNX Runtime adapter"):
        load_adapter(str(bad), setup.slots)
    with pytest.raises(ModelPackError, match="no LoRA slot"):
        write_adapter(str(tmp_path / "x.onnx_adapter"), setup.slots, {"nope": np.zeros(3, np.float32)})


def test_cache_checks_checksum_and_fetches_from_s3(setup: Setup, s3_bucket: str, tmp_path: Path) -> None:
    data = setup.adapters[0].read_bytes()
    url = storage.join(s3_bucket, "adapters", "identity0.onnx_adapter")
    storage.write_bytes(url, data)
    cache = AdapterCache(setup.slots, str(tmp_path / "cache"), max_count=4, max_bytes=10 * len(data))
    with pytest.raises(ModelPackError, match="checksum mismatch"):
        cache.get(url, "0" * 64)
    assert cache.count == 0 and os.listdir(tmp_path / "cache") == []
    sha = hashlib.sha256(data).hexdigest()
    loaded = cache.get(url, sha)
    assert cache.get(url, sha) is loaded and cache.hits == 1
    np.testing.assert_array_equal(
        run(setup.session, setup.feeds, loaded)[0],
        run(setup.session, setup.feeds, load_adapter(str(setup.adapters[0]), setup.slots))[0],
    )
    other = setup.slots.model_copy(update={"base_sha256": "f" * 64})
    with pytest.raises(ModelPackError, match="another base model"):
        AdapterCache(other, str(tmp_path / "cache2")).get(url, sha)


def test_cache_evicts_by_count_and_bytes_and_never_exceeds(setup: Setup, tmp_path: Path) -> None:
    urls, shas = [], []
    for i in range(6):
        path = tmp_path / f"a{i}.onnx_adapter"
        sha = write_adapter(str(path), setup.slots, _random_params(setup.slots, 100 + i))
        urls.append(str(path))
        shas.append(sha)
    size = os.path.getsize(urls[0])

    by_count = AdapterCache(setup.slots, str(tmp_path / "c1"), max_count=3, max_bytes=100 * size)
    for i in [0, 1, 2, 0, 3, 4, 0, 5]:
        by_count.get(urls[i], shas[i])
        assert by_count.count <= 3
        assert len(os.listdir(tmp_path / "c1")) == by_count.count
    # LRU: 0 was used most recently before 5 came, so 0, 4 and 5 remain.
    assert {s for s in shas if s in by_count} == {shas[0], shas[4], shas[5]}

    bound = int(2.5 * size)
    by_bytes = AdapterCache(setup.slots, str(tmp_path / "c2"), max_count=100, max_bytes=bound)
    for i in [0, 1, 2, 1, 3]:
        by_bytes.get(urls[i], shas[i])
        assert by_bytes.nbytes <= bound and by_bytes.count <= 2
    assert {s for s in shas if s in by_bytes} == {shas[1], shas[3]}

    tiny = AdapterCache(setup.slots, str(tmp_path / "c3"), max_count=5, max_bytes=size - 1)
    with pytest.raises(ModelPackError, match="more than the cache bound"):
        tiny.get(urls[0], shas[0])
    assert tiny.count == 0


def _variants_model() -> onnx.ModelProto:
    """Strided, dilated and SAME-padded convs, a grouped conv (no slot), Gemm with alpha, batched MatMul."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)

    def init(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.normal(0, 0.3, shape).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "c1"], ["a"], strides=[2, 2], pads=[1, 2, 1, 0]),
        helper.make_node("Conv", ["a", "c2", "c2b"], ["b"], dilations=[2, 2], pads=[2, 2, 2, 2]),
        helper.make_node("Conv", ["b", "g"], ["c0"], group=2, pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["c0", "same"], ["c"], auto_pad="SAME_UPPER"),
        helper.make_node("Conv", ["c", "c1x1"], ["d"], strides=[3, 3], kernel_shape=[1, 1]),
        helper.make_node("Flatten", ["d"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "fcb"], ["e"], alpha=0.5, beta=2.0),
        helper.make_node("Reshape", ["e", "shape"], ["e3"]),
        helper.make_node("MatMul", ["e3", "mm"], ["y"]),
    ]
    inits = [
        init("c1", (4, 3, 3, 3)), init("c2", (6, 4, 3, 3)), init("c2b", (6,)), init("g", (6, 3, 3, 3)), init("same", (6, 6, 2, 2)),
        init("c1x1", (5, 6, 1, 1)), init("fc", (5 * 3 * 3, 12)), init("fcb", (12,)),
        numpy_helper.from_array(np.array([1, 3, 4], np.int64), "shape"), init("mm", (4, 7)),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes, "variants",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 17, 15])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 7])],
        inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def test_conv_gemm_matmul_variants_match_merged(tmp_path: Path) -> None:
    original = _variants_model()
    prepared, slots = prepare_model(original, rank=3, base_sha256="1" * 64)
    assert {s.weight for s in slots.slots} == {"c1", "c2", "same", "c1x1", "fc", "mm"}  # grouped "g" has none
    params = _random_params(slots, 21, scale=0.3)
    write_adapter(str(tmp_path / "v.onnx_adapter"), slots, params)
    adapter = load_adapter(str(tmp_path / "v.onnx_adapter"), slots)
    feeds = {"x": np.random.default_rng(8).normal(size=(1, 3, 17, 15)).astype(np.float32)}
    session = _session(prepared)
    base = _session(original).run(None, feeds)[0]
    assert np.array_equal(run(session, feeds, None)[0], base)
    merged = _session(merge_adapter(original, slots, params)).run(None, feeds)[0]
    out = run(session, feeds, adapter)[0]
    np.testing.assert_allclose(out, merged, rtol=1e-4, atol=1e-4)
    assert np.abs(out - base).max() > 1e-2


def test_mixed_batch_split_by_adapter_and_verify(setup: Setup, tmp_path: Path) -> None:
    a = load_adapter(str(setup.adapters[0]), setup.slots)
    b = load_adapter(str(setup.adapters[1]), setup.slots)
    groups = split_by_adapter([a, None, b, a, None])
    assert [(g[0], g[1]) for g in groups] == [(a, [0, 3]), (None, [1, 4]), (b, [2])]

    sha = hashlib.sha256(setup.adapters[1].read_bytes()).hexdigest()
    assert verify_adapter(str(setup.adapters[1]), sha, setup.slots) == setup.adapters[1].stat().st_size
    with pytest.raises(ModelPackError, match="checksum mismatch"):
        verify_adapter(str(setup.adapters[1]), "f" * 64, setup.slots)
