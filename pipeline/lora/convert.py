"""ONNX -> torch (onnx2torch) for training, with errors that name the model and the node.

A graph onnx2torch cannot convert, or one that fails on the training batch
(a shape pinned somewhere :mod:`pipeline.lora.batch` did not rewrite), raises
:class:`ModelPackError` naming the model file and the ONNX node, never a raw
torch traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnx

from pipeline.errors import ModelPackError
from pipeline.lora.prepare import LoraSlots


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def to_torch(model: onnx.ModelProto, where: str) -> Any:
    """``onnx2torch.convert(model)`` (an fx GraphModule with ``onnx_mapping`` on its modules)."""
    import onnx2torch
    from onnx2torch.node_converters.registry import get_converter

    opsets = {o.domain: o.version for o in model.opset_import}
    for index, node in enumerate(model.graph.node):
        try:
            get_converter(operation_type=node.op_type, version=opsets.get(node.domain, 1), domain=node.domain)
        except NotImplementedError as exc:
            raise ModelPackError(
                f"{where} node {node.name or index} ({node.op_type})",
                f"cannot be converted to torch for training: {_first_line(exc)}",
            ) from exc
    try:
        return onnx2torch.convert(model, attach_onnx_mapping=True)
    except Exception as exc:  # onnx2torch raises plain exceptions for what it cannot map
        raise ModelPackError(where, f"cannot be converted to torch for training: {_first_line(exc)}") from exc


def failing_node(module: Any, model: onnx.ModelProto, inputs: Sequence[Any]) -> str | None:
    """Run ``module`` node by node on ``inputs``; the ONNX node (name and op) that raises, or None."""
    import torch
    import torch.fx

    by_output = {o: n for n in model.graph.node for o in n.output}
    found: list[str] = []

    class Locator(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            try:
                return super().run_node(n)
            except Exception:
                label = n.name
                if n.op == "call_module":
                    mapping = getattr(self.module.get_submodule(str(n.target)), "onnx_mapping", None)
                    outputs = list(getattr(mapping, "outputs", ()) or ())
                    node = by_output.get(outputs[0]) if outputs else None
                    if node is not None:
                        label = f"{node.name or outputs[0]} ({node.op_type})"
                found.append(label)
                raise

    try:
        with torch.no_grad():
            Locator(module).run(*inputs)
    except Exception:  # noqa: BLE001 - the failure is the answer; the caller raises the original
        return found[0] if found else None
    return None


def run_or_explain(module: Any, model: onnx.ModelProto, inputs: Sequence[Any], where: str) -> Any:
    """``module(*inputs)``; a failure becomes a ModelPackError naming ``where`` and the node."""
    try:
        return module(*inputs)
    except (RuntimeError, ValueError, IndexError, TypeError) as exc:
        node = failing_node(module, model, inputs)
        shapes = ", ".join(str(list(getattr(x, "shape", []))) for x in inputs)
        raise ModelPackError(
            f"{where} node {node}" if node else where,
            f"fails in torch on inputs of shape {shapes}: {_first_line(exc)}",
        ) from exc


def trainable_swapper(
    prepared: onnx.ModelProto, slots: LoraSlots, device: str, where: str
) -> tuple[Any, dict[str, Any]]:
    """The swapper as a torch module whose LoRA tensors are its only trainable parameters.

    onnx2torch needs Conv weights as initializers, so the LoRA initializers stay in
    the graph and are swapped afterwards for shared ``nn.Parameter`` objects: the
    Conv modules of the A/B paths get them as ``weight``, the MatMul operands
    (stored as buffers) are re-registered as parameters.  Every base weight stays
    a frozen copy.
    """
    import torch

    shapes = slots.parameter_shapes()
    module = to_torch(prepared, where).to(device)
    for p in module.parameters():
        p.requires_grad_(False)
    params = {n: torch.nn.Parameter(torch.zeros(*s, device=device)) for n, s in shapes.items()}
    # onnx2torch's Conv mapping omits the weight input; find it through the ONNX node.
    weight_of_output = {n.output[0]: n.input[1] for n in prepared.graph.node if n.op_type == "Conv"}
    bound: set[str] = set()
    for node in module.graph.nodes:
        if node.op != "call_module":
            continue
        sub = module.get_submodule(node.target)
        mapping = getattr(sub, "onnx_mapping", None)
        if mapping is None:
            continue
        onnx_inputs = list(mapping.inputs)
        convs = [m for m in sub.modules() if isinstance(m, torch.nn.modules.conv._ConvNd)]
        conv_weight = weight_of_output.get(mapping.outputs[0]) if mapping.outputs else None
        if convs and conv_weight in params:
            convs[0].weight = params[conv_weight]
            bound.add(conv_weight)
            continue
        for arg, name in zip(node.args, onnx_inputs):
            if name in params and getattr(arg, "op", None) == "get_attr":
                owner_path, _, attr = arg.target.rpartition(".")
                owner = module.get_submodule(owner_path)
                if attr in owner._buffers:
                    del owner._buffers[attr]
                    owner.register_parameter(attr, params[name])
                bound.add(name)
    missing = sorted(set(params) - bound)
    if missing:
        raise ModelPackError(where, f"LoRA tensors not found in the converted model: {missing[:5]}")
    return module, params
