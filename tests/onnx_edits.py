"""Edits to an exported ONNX model file, to make it look like what other exporters write."""

from __future__ import annotations

import onnx


def generic_names(path: str) -> None:
    """Rename every initializer as a tracing export names them (``onnx::Reshape_12``)."""
    model = onnx.load(path)
    renamed = {t.name: f"onnx::{t.data_type}_{i}" for i, t in enumerate(model.graph.initializer)}
    for tensor in model.graph.initializer:
        tensor.name = renamed[tensor.name]
    for node in model.graph.node:
        node.input[:] = [renamed.get(name, name) for name in node.input]
    onnx.save(model, path)
