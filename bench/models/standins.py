"""Stand-in ONNX models with the production I/O of each role, built with ``onnx.helper``.

No package ships inswapper_128, GFPGAN or 512-d ArcFace weights, so tests and
benchmarks use generated graphs with the exact input/output names, shapes and
value ranges of the production files:

* tiny ones (kilobytes, milliseconds) for contract and backend tests, with
  behaviour a test can predict (the swapper returns its target, the enhancer
  returns its input, the occluder returns the grey level, the detector fires
  on bright squares);
* production-cost ones (``size="production"``) with about the parameter count
  and FLOPs of the real models, to measure what a frame costs on a machine.

``write_pack`` writes a complete pack folder with ``manifest.json``;
``write_production_models`` the production-cost models the benchmark uses.
Weights come from fixed seeds: the same call writes the same bytes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from onnx import helper, numpy_helper

from bench.models.onnxgraph import GraphBuilder, save_model, value_info
from pipeline.store.hashing import sha256_file

Size = Literal["tiny", "production"]


# --------------------------------------------------------------------------- detector (SCRFD det_10g I/O)
SCRFD_STRIDES = (8, 16, 32)
SCRFD_TINY_KPS = np.array([[0.3, 0.4], [0.7, 0.4], [0.5, 0.6], [0.35, 0.8], [0.65, 0.8]], np.float32)
"""Where the tiny SCRFD stand-in puts the 5 landmarks, as fractions of its box."""
SCRFD_OUTPUT_NAMES = ("448", "471", "494", "451", "474", "497", "454", "477", "500")


def scrfd(
    path: str,
    size: Size = "tiny",
    *,
    batched: bool = False,
    score_gain: float = 12.0,
    box: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 1.0),
    fixed_size: int | None = None,
) -> dict[str, Any]:
    """SCRFD-style detector: input ``input.1`` [1,3,?,?], 9 outputs (scores, boxes, kps x 3 strides).

    Tiny: fires only at stride 32, where the mean normalised brightness of a
    32x32 cell of the letterboxed input is above ~0.5
    (``sigmoid(gain*(mean-0.5))``); the box is that cell and the keypoints
    sit at ``SCRFD_TINY_KPS`` (fractions of the cell).  So a white 32x32
    square aligned to the 32 px grid of the input is one "face" whose box is
    the square.  ``box`` = (left, top, right, bottom) distances from the
    anchor centre in strides; larger boxes overlap their neighbours (NMS).
    ``batched`` = dynamic batch and [N, anchors, k] outputs (otherwise [anchors, k]
    with batch fixed at 1, like det_10g).  ``fixed_size`` = exported at that square
    input the way a tracing export without dynamic axes writes it: input [1, 3, S, S]
    and reshapes to the constant anchor counts (so it runs at no other size).
    Production: a conv backbone with about det_10g's cost at 640x640.
    """
    g = GraphBuilder(seed=1)
    batch: int | str = "N" if batched else 1
    x = "input.1"
    feats: dict[int, tuple[str, int]] = {}
    if size == "tiny":
        for stride in SCRFD_STRIDES:
            pooled = g.op("AveragePool", [x], kernel_shape=[stride, stride], strides=[stride, stride])
            mean = g.op("ReduceMean", [pooled], axes=[1], keepdims=1)
            feats[stride] = (mean, 1)
    else:
        y = g.conv(x, 3, 32, 3, (320, 320), stride=2)
        y = g.conv(y, 32, 64, 3, (160, 160), stride=2)
        y = g.conv(y, 64, 64, 3, (160, 160))
        s8 = g.conv(g.conv(y, 64, 128, 3, (80, 80), stride=2), 128, 128, 3, (80, 80))
        s16 = g.conv(g.conv(s8, 128, 256, 3, (40, 40), stride=2), 256, 256, 3, (40, 40))
        s32 = g.conv(s16, 256, 256, 3, (20, 20), stride=2)
        feats = {
            8: (g.conv(s8, 128, 128, 3, (80, 80)), 128),
            16: (g.conv(s16, 256, 256, 3, (40, 40)), 256),
            32: (g.conv(s32, 256, 256, 3, (20, 20)), 256),
        }
    if fixed_size is not None and batched:
        raise ValueError("a stand-in exported at a fixed size has batch 1")
    shape_tail = [0, -1] if batched else [-1]
    outs: dict[str, list[str]] = {"scores": [], "boxes": [], "kps": []}
    for stride in SCRFD_STRIDES:
        feat, ch = feats[stride]
        hw = (640 // stride, 640 // stride)
        if size == "tiny":
            if stride == 32:
                logits = g.op(
                    "Mul", [g.op("Sub", [feat, g.const(np.float32(0.5))]), g.const(np.float32(score_gain))]
                )
            else:
                logits = g.op(
                    "Add", [g.op("Mul", [feat, g.const(np.float32(0.0))]), g.const(np.float32(-20.0))]
                )
            score2 = g.op("Concat", [logits, logits], axis=1)
            zero = g.op("Mul", [feat, g.const(np.float32(0.0))])
            # Distances from the anchor centre (the cell's top-left corner) in strides:
            # the box is the cell itself, the keypoints sit inside it in anatomical order.
            box8 = g.op(
                "Add",
                [
                    zero,
                    g.const(np.tile(np.array(box, np.float32).reshape(1, 4, 1, 1), (1, 2, 1, 1))),
                ],
            )
            kp20 = g.op("Add", [zero, g.const(np.tile(SCRFD_TINY_KPS.reshape(1, 10, 1, 1), (1, 2, 1, 1)))])
        else:
            score2 = g.conv(feat, ch, 2, 1, hw, relu=False)
            box8 = g.conv(feat, ch, 8, 1, hw, relu=False)
            kp20 = g.conv(feat, ch, 20, 1, hw, relu=False)
        for key, t, k in (("scores", g.op("Sigmoid", [score2]), 1), ("boxes", box8, 4), ("kps", kp20, 10)):
            nhwc = g.op("Transpose", [t], perm=[0, 2, 3, 1])
            if fixed_size is not None:
                shape_tail = [2 * (fixed_size // stride) ** 2]
            outs[key].append(g.op("Reshape", [nhwc, g.const(np.array([*shape_tail, k], np.int64))]))
    ordered = outs["scores"] + outs["boxes"] + outs["kps"]
    for src, dst in zip(ordered, SCRFD_OUTPUT_NAMES, strict=True):
        g.nodes.append(helper.make_node("Identity", [src], [dst]))
    ks = [1, 1, 1, 4, 4, 4, 10, 10, 10]
    anchors = [None if fixed_size is None else 2 * (fixed_size // s) ** 2 for s in SCRFD_STRIDES] * 3
    out_vi = [
        value_info(n, [batch, None, k] if batched else [a, k])
        for n, k, a in zip(SCRFD_OUTPUT_NAMES, ks, anchors, strict=True)
    ]
    side: int | None = fixed_size
    model = g.model([value_info(x, [batch, 3, side, side])], out_vi, "scrfd_standin")
    return save_model(model, path, {"params": g.params, "gflops_at_640": 2 * g.macs / 1e9})


# --------------------------------------------------------------------------- recognizer (ArcFace w600k_r50 I/O)
def arcface(
    path: str, size: Size = "tiny", *, embedding_dim: int = 512, input_size: int = 112
) -> dict[str, Any]:
    """ArcFace-style recognizer: ``input.1`` [N,3,112,112] -> ``683`` [N,512] (not normalised).

    Tiny: 8x8 average pool then a random Gemm (fixed seed), so the output
    is a known linear function of the normalised crop.  Production: a
    ResNet-ish stack with about w600k_r50's parameters and FLOPs.
    """
    g = GraphBuilder(seed=2)
    x = "input.1"
    if size == "tiny":
        pooled = g.op("AveragePool", [x], kernel_shape=[8, 8], strides=[8, 8])
        flat = g.op("Flatten", [pooled], axis=1)
        cells = input_size // 8
        y = g.gemm(flat, 3 * cells * cells, embedding_dim)
    else:
        y = g.conv(x, 3, 64, 3, (112, 112))
        plan = [(64, 64, 56, 3), (64, 128, 28, 4), (128, 256, 14, 14), (256, 512, 7, 3)]
        for cin, cout, hw, blocks in plan:
            y = g.conv(y, cin, cout, 3, (hw, hw), stride=2)
            for _ in range(blocks):
                y = g.op(
                    "Add",
                    [y, g.conv(g.conv(y, cout, cout, 3, (hw, hw)), cout, cout, 3, (hw, hw), relu=False)],
                )
        flat = g.op("Flatten", [y], axis=1)
        y = g.gemm(flat, 512 * 7 * 7, embedding_dim)
    g.nodes.append(helper.make_node("Identity", [y], ["683"]))
    model = g.model(
        [value_info(x, ["None", 3, input_size, input_size])],
        [value_info("683", ["None", embedding_dim])],
        "arcface_standin",
    )
    return save_model(model, path, {"params": g.params, "gflops": 2 * g.macs / 1e9})


# --------------------------------------------------------------------------- swapper (inswapper_128 I/O)
def inswapper(
    path: str,
    size: Size = "tiny",
    *,
    identity: bool = True,
    batched: bool = False,
    source_dim: int = 512,
    target_size: int = 128,
) -> dict[str, Any]:
    """inswapper_128-style swapper: ``target`` [1,3,128,128] in [0,1] + ``source`` [1,512] -> ``output``.

    The last initializer is ``emap`` (512x512), as in the production file.
    Tiny ``identity=True`` returns ``target`` unchanged (plus 0 x source, so
    both inputs are used); ``identity=False`` mixes a 3x3 conv of the target
    with a projection of the source through a sigmoid (for backend tests).
    Production: encoder, eight 1024-channel style-modulated convs at 32x32 and
    a decoder: about 138 M parameters and 175 GFLOPs per face.
    """
    g = GraphBuilder(seed=3)
    batch: int | str = "N" if batched else 1
    if size == "tiny":
        src_sum = g.op("ReduceSum", ["source", g.const(np.array([1], np.int64))], keepdims=1)
        src4 = g.op("Unsqueeze", [src_sum, g.const(np.array([2, 3], np.int64))])
        if identity:
            y = g.op("Add", ["target", g.op("Mul", [src4, g.const(np.float32(0.0))])])
        else:
            conv = g.conv("target", 3, 3, 3, (target_size, target_size), relu=False)
            proj = g.op("Unsqueeze", [g.gemm("source", source_dim, 3), g.const(np.array([2, 3], np.int64))])
            y = g.op("Sigmoid", [g.op("Add", [conv, proj])])
    else:
        s = target_size
        y = g.conv("target", 3, 128, 7, (s, s))
        y = g.conv(y, 128, 256, 3, (s // 2, s // 2), stride=2)
        y = g.conv(y, 256, 512, 3, (s // 4, s // 4), stride=2)
        y = g.conv(y, 512, 1024, 3, (s // 4, s // 4))
        style = g.op("Relu", [g.gemm("source", source_dim, 2048)])
        for _ in range(5):
            style = g.op("Relu", [g.gemm(style, 2048, 2048)])
        for _ in range(8):
            mod = g.gemm(style, 2048, 2048)
            g.op("Split", [mod, g.const(np.array([1024, 1024], np.int64))], n_out=2, axis=1)
            scale, shift = g.nodes[-1].output
            scale4 = g.op("Unsqueeze", [scale, g.const(np.array([2, 3], np.int64))])
            shift4 = g.op("Unsqueeze", [shift, g.const(np.array([2, 3], np.int64))])
            h = g.conv(y, 1024, 1024, 3, (s // 4, s // 4), relu=False)
            h = g.op("Add", [g.op("Mul", [h, g.op("Sigmoid", [scale4])]), shift4])
            y = g.op("Add", [y, g.op("Relu", [h])])
        y = g.conv(y, 1024, 256, 1, (s // 4, s // 4))
        y = g.op("Resize", [y, "", g.const(np.array([1, 1, 2, 2], np.float32))], mode="nearest")
        y = g.conv(y, 256, 128, 3, (s // 2, s // 2))
        y = g.op("Resize", [y, "", g.const(np.array([1, 1, 2, 2], np.float32))], mode="nearest")
        y = g.conv(y, 128, 64, 3, (s, s))
        y = g.op("Sigmoid", [g.conv(y, 64, 3, 1, (s, s), relu=False)])
    g.nodes.append(helper.make_node("Identity", [y], ["output"]))
    # emap must be the LAST initializer: the swapper reads it from there.
    emap = np.random.default_rng(7).standard_normal((512, 512), dtype=np.float32) / np.float32(np.sqrt(512))
    g.inits.append(numpy_helper.from_array(emap, "emap"))
    g.params += emap.size
    model = g.model(
        [
            value_info("target", [batch, 3, target_size, target_size]),
            value_info("source", [batch, source_dim]),
        ],
        [value_info("output", [batch, 3, target_size, target_size])],
        "inswapper_standin",
    )
    return save_model(model, path, {"params": g.params, "gflops": 2 * g.macs / 1e9})


# --------------------------------------------------------------------------- enhancer (GFPGAN 1.4 I/O)
def gfpgan(path: str, size: Size = "tiny", *, input_size: int = 512, identity: bool = True) -> dict[str, Any]:
    """GFPGAN-style enhancer: ``input`` [1,3,512,512] in [-1,1] -> ``output`` [1,3,512,512] in [-1,1].

    Tiny: returns its input clipped to [-1,1] (an exact round trip through
    the pre/post-processing); ``identity=False``: tanh of a random 3x3 conv.
    Production: a U-Net-ish encoder/decoder with style modulation, about
    GFPGANv1.4's ~85 M parameters (its FLOPs here, ~99 G, are an estimate).
    """
    g = GraphBuilder(seed=4)
    s = input_size
    if size == "tiny" and identity:
        y = g.op("Clip", ["input", g.const(np.float32(-1.0)), g.const(np.float32(1.0))])
    elif size == "tiny":
        y = g.op("Tanh", [g.conv("input", 3, 3, 3, (s, s), relu=False)])
    else:
        chans = [32, 64, 128, 256, 512, 512, 512]
        y = g.conv("input", 3, chans[0], 3, (s, s))
        skips = []
        for i in range(1, len(chans)):
            hw = s >> i
            y = g.conv(y, chans[i - 1], chans[i], 3, (hw, hw), stride=2)
            y = g.conv(y, chans[i], chans[i], 3, (hw, hw))
            skips.append((y, chans[i], hw))
        # Style mapping from the pooled bottleneck, modulating every decoder level
        # (GFPGAN's StyleGAN2 decoder is where most of its parameters live).
        latent = g.op("Flatten", [g.op("GlobalAveragePool", [y])], axis=1)
        style = g.op("Relu", [g.gemm(latent, 512, 4096)])
        for _ in range(3):
            style = g.op("Relu", [g.gemm(style, 4096, 4096)])
        for i in range(len(chans) - 1, 0, -1):
            y_skip, c, hw = skips[i - 1]
            y = g.op("Add", [y, y_skip])
            y = g.conv(y, c, c, 3, (hw, hw))
            y = g.op("Resize", [y, "", g.const(np.array([1, 1, 2, 2], np.float32))], mode="nearest")
            y = g.conv(y, c, chans[i - 1], 3, (hw * 2, hw * 2))
            mod = g.op("Unsqueeze", [g.gemm(style, 4096, chans[i - 1]), g.const(np.array([2, 3], np.int64))])
            y = g.op("Mul", [y, g.op("Sigmoid", [mod])])
        y = g.op("Tanh", [g.conv(y, chans[0], 3, 3, (s, s), relu=False)])
    g.nodes.append(helper.make_node("Identity", [y], ["output"]))
    model = g.model(
        [value_info("input", [1, 3, s, s])], [value_info("output", [1, 3, s, s])], "gfpgan_standin"
    )
    return save_model(model, path, {"params": g.params, "gflops": 2 * g.macs / 1e9})


# --------------------------------------------------------------------------- occluder (XSeg I/O)
def xseg(
    path: str, *, input_size: int = 256, channels_last: bool = True, identity: bool = True
) -> dict[str, Any]:
    """XSeg-style occluder: ``input`` [N,256,256,3] in [0,1] -> ``output`` [N,256,256,1].

    Returns the grey level (mean of the channels), so a test knows the mask;
    ``identity=False``: sigmoid of a random 3x3 conv (for backend tests).
    ``channels_last=False`` builds a wrongly laid out NCHW model (contract tests).
    """
    g = GraphBuilder(seed=5)
    s = input_size
    axis = 3 if channels_last else 1
    if identity:
        y = g.op("ReduceMean", ["input"], axes=[axis], keepdims=1)
    else:
        nchw = g.op("Transpose", ["input"], perm=[0, 3, 1, 2])
        mask = g.op("Sigmoid", [g.conv(nchw, 3, 1, 3, (s, s), relu=False)])
        y = g.op("Transpose", [mask], perm=[0, 2, 3, 1])
    g.nodes.append(helper.make_node("Identity", [y], ["output"]))
    in_shape: list[int | str] = ["N", s, s, 3] if channels_last else ["N", 3, s, s]
    out_shape: list[int | str] = ["N", s, s, 1] if channels_last else ["N", 1, s, s]
    model = g.model([value_info("input", in_shape)], [value_info("output", out_shape)], "xseg_standin")
    return save_model(model, path, {"params": g.params})


# --------------------------------------------------------------------------- packs
PRODUCTION_FILES = {
    "detector": ("scrfd", "det_10g.onnx"),
    "recognizer": ("arcface", "w600k_r50.onnx"),
    "swapper": ("inswapper", "inswapper_128.onnx"),
    "enhancer": ("gfpgan", "GFPGANv1.4.onnx"),
    "occluder": ("xseg", "xseg.onnx"),
}
CONTRACTS: dict[str, dict[str, Any]] = {
    "detector": {"input_size": [640, 640], "score_threshold": 0.5, "nms_threshold": 0.4},
    "recognizer": {"input_size": [112, 112]},
    "swapper": {"input_size": [128, 128]},
    "enhancer": {"input_size": [512, 512], "blend": 0.8},
    "occluder": {"input_size": [256, 256]},
}


def write_model(role: str, path: str, size: Size = "tiny") -> dict[str, Any]:
    """Write the stand-in for ``role`` at ``path``."""
    if role == "detector":
        return scrfd(path, size)
    if role == "recognizer":
        return arcface(path, size)
    if role == "swapper":
        return inswapper(path, size)
    if role == "enhancer":
        return gfpgan(path, size)
    if role == "occluder":
        return xseg(path)
    raise ValueError(f"unknown role {role!r}")


def write_manifest(
    folder: str, entries: list[dict[str, Any]], name: str = "standin-pack", version: str = "1"
) -> str:
    """Write ``manifest.json`` for ``entries`` (sha256 filled in from the files when absent)."""
    models = []
    for entry in entries:
        entry = dict(entry)
        if entry.get("file") and "sha256" not in entry:
            entry["sha256"] = sha256_file(os.path.join(folder, entry["file"]))
        models.append(entry)
    path = os.path.join(folder, "manifest.json")
    with open(path, "w") as fh:
        json.dump({"name": name, "version": version, "models": models}, fh, indent=1)
    return path


def write_pack(
    folder: str,
    roles: Sequence[str] = ("detector", "recognizer", "swapper", "enhancer", "occluder"),
    size: Size = "tiny",
) -> list[dict[str, Any]]:
    """A complete stand-in pack (models + manifest) in ``folder``; returns the manifest entries."""
    os.makedirs(folder, exist_ok=True)
    entries = []
    for role in roles:
        kind, file = PRODUCTION_FILES[role]
        write_model(role, os.path.join(folder, file), size)
        entries.append({"role": role, "kind": kind, "file": file, "contract": CONTRACTS[role]})
    write_manifest(folder, entries)
    with open(os.path.join(folder, "manifest.json")) as fh:
        return json.load(fh)["models"]


def write_production_models(folder: str) -> dict[str, dict[str, Any]]:
    """Write the production-cost stand-ins into ``folder`` once (kept between runs); their sizes."""
    stats_path = os.path.join(folder, "standins-stats.json")
    stats: dict[str, dict[str, Any]] = {}
    if os.path.isfile(stats_path):
        with open(stats_path) as fh:
            stats = json.load(fh)
    for role in ("detector", "recognizer", "swapper", "enhancer"):
        file = PRODUCTION_FILES[role][1]
        path = os.path.join(folder, file)
        if role in stats and os.path.isfile(path):
            continue
        info = write_model(role, path, "production")
        stats[role] = {k: v for k, v in info.items() if k != "path"}
        stats[role]["mb"] = round(os.path.getsize(path) / 1e6, 1)
        with open(stats_path, "w") as fh:
            json.dump(stats, fh)
    return stats
