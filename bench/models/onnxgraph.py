"""A small builder of ONNX graphs that counts parameters and multiply-adds as it goes.

The stand-in models (:mod:`bench.models.standins`) and tests that need a one-off graph
build their graphs with it.  Weights come from a seeded generator, so the same
calls write the same bytes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class GraphBuilder:
    """Tiny helper over onnx.helper that also counts parameters and multiply-adds."""

    def __init__(self, seed: int = 0) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.rng = np.random.default_rng(seed)
        self.params = 0
        self.macs = 0
        self._n = 0

    def name(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}_{self._n}"

    def const(self, value: npt.ArrayLike, prefix: str = "c") -> str:
        name = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(self, shape: Sequence[int], fan_in: int, prefix: str = "w") -> str:
        self.params += int(np.prod(shape))
        w = self.rng.standard_normal(size=tuple(shape), dtype=np.float32) * np.float32(1.0 / np.sqrt(fan_in))
        return self.const(w, prefix)

    def op(self, op_type: str, inputs: Sequence[str], n_out: int = 1, **attrs: Any) -> str:
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, **attrs))
        return outs[0]

    def conv(
        self,
        x: str,
        cin: int,
        cout: int,
        k: int,
        hw_out: tuple[int, int],
        *,
        stride: int = 1,
        relu: bool = True,
    ) -> str:
        w = self.weight((cout, cin, k, k), cin * k * k)
        b = self.const(np.zeros(cout, np.float32), "b")
        self.params += cout
        self.macs += cin * cout * k * k * hw_out[0] * hw_out[1]
        y = self.op("Conv", [x, w, b], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4)
        return self.op("Relu", [y]) if relu else y

    def gemm(self, x: str, cin: int, cout: int) -> str:
        w = self.weight((cin, cout), cin)
        b = self.const(np.zeros(cout, np.float32), "b")
        self.params += cout
        self.macs += cin * cout
        return self.op("Gemm", [x, w, b])

    def model(
        self, inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto], name: str
    ) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, initializer=self.inits)
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="recast-standins"
        )
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model


def value_info(name: str, shape: Sequence[int | str | None]) -> onnx.ValueInfoProto:
    """A float tensor's name and shape (``None`` or a string: a dynamic axis)."""
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def save_model(model: onnx.ModelProto, path: str, stats: dict[str, Any]) -> dict[str, Any]:
    """Write ``model`` to ``path`` (folders made as needed); returns ``stats`` with the path."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    onnx.save(model, path)
    return {"path": path, **stats}
