"""Give a pack's swapper LoRA slots and record them in the pack manifest.

In a pack (rewrites ``<role>``'s file to ``<stem>.lora<rank>.onnx`` beside it, then
updates that entry's ``file``, ``sha256`` and ``contract["lora"]`` in
``manifest.json``; the original file is kept)::

    python -m jobs.prepare_lora --pack s3://studio/packs/recast-v1 --rank 8 --pattern '.*'

One file (prints the ``contract["lora"]`` record to put in a manifest yourself)::

    python -m jobs.prepare_lora --model inswapper_128.onnx --out inswapper_128.lora8.onnx --rank 8

On a cluster (CPU only; the rewrite takes about as long as reading the model)::

    ray job submit --address http://HEAD:8265 --working-dir . -- \\
        python -m jobs.prepare_lora --pack s3://studio/packs/recast-v1 --rank 8

With no adapter active the prepared model computes exactly what the original did;
the job checks that on a random input before publishing.  Exit status: 0 done,
2 bad input (the message names the file or field).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from jobs.cli import configure_logging

EXIT_OK, EXIT_BAD_INPUT = 0, 2


def check_unchanged(original: bytes, prepared: bytes, where: str) -> float:
    """Max abs difference of the two models' outputs on one random input; ModelPackError unless 0."""
    import numpy as np
    import onnxruntime as ort

    from pipeline.errors import ModelPackError

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    a = ort.InferenceSession(original, opts, providers=["CPUExecutionProvider"])
    b = ort.InferenceSession(prepared, opts, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for i in a.get_inputs():
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
        feeds[i.name] = rng.random(shape, dtype=np.float32)
    worst = 0.0
    for x, y in zip(a.run(None, feeds), b.run(None, feeds), strict=True):
        worst = max(worst, float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64)))))
    if worst != 0.0:
        raise ModelPackError(where, f"prepared model's output differs from the original's by {worst:g}")
    return worst


def prepare_in_pack(pack_url: str, role: str, rank: int, pattern: str) -> dict[str, object]:
    """Prepare the ``role`` model of the pack at ``pack_url``; returns the updated manifest entry."""
    import onnx

    from pipeline import storage
    from pipeline.errors import ModelPackError
    from pipeline.limits import MANIFEST_MAX_BYTES, ONNX_MAX_BYTES
    from pipeline.lora.prepare import prepare_model, sha256_bytes

    manifest_url = storage.join(pack_url, "manifest.json")
    manifest = json.loads(storage.read_bytes(manifest_url, max_bytes=MANIFEST_MAX_BYTES))
    entries = [e for e in manifest.get("models", []) if e.get("role") == role]
    if len(entries) != 1 or not entries[0].get("file"):
        raise ModelPackError(manifest_url, f"needs exactly one {role} entry with a file")
    entry = entries[0]
    if "lora" in entry.get("contract", {}):
        raise ModelPackError(f"{manifest_url} {entry['file']}", "already has LoRA slots (contract.lora)")
    src_url = storage.join(pack_url, entry["file"])
    data = storage.read_bytes(src_url, max_bytes=ONNX_MAX_BYTES)
    if sha256_bytes(data) != entry.get("sha256"):
        raise ModelPackError(src_url, f"checksum mismatch with the manifest ({entry.get('sha256')})")
    prepared, slots = prepare_model(
        onnx.load_model_from_string(data), rank=rank, base_sha256=sha256_bytes(data), pattern=pattern
    )
    out = prepared.SerializeToString()
    check_unchanged(data, out, src_url)
    stem, _ = os.path.splitext(entry["file"])
    new_file = f"{stem}.lora{rank}.onnx"
    storage.write_bytes(storage.join(pack_url, new_file), out)  # model first, then the manifest naming it
    entry["file"] = new_file
    entry["sha256"] = sha256_bytes(out)
    entry.setdefault("contract", {})["lora"] = slots.to_contract()
    storage.write_bytes(manifest_url, (json.dumps(manifest, indent=2) + "\n").encode())
    return entry


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.prepare_lora", description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--pack", help="pack folder URL holding manifest.json")
    where.add_argument("--model", help="one ONNX model URL (with --out)")
    parser.add_argument("--out", help="where to write the prepared model (with --model)")
    parser.add_argument("--role", default="swapper", help="pack role to prepare (default swapper)")
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--pattern", default=".*", help="regex (re.search) on weight initializer names")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    from pipeline import storage
    from pipeline.errors import RecastError
    from pipeline.lora.prepare import prepare_file

    try:
        if args.pack:
            entry = prepare_in_pack(args.pack, args.role, args.rank, args.pattern)
            lora = entry["contract"]["lora"]  # type: ignore[index]
            print(f"prepared {entry['file']}: {len(lora['slots'])} LoRA slots of rank {lora['rank']}")
            return EXIT_OK
        if not args.out:
            parser.error("--model needs --out")
        slots = prepare_file(args.model, args.out, rank=args.rank, pattern=args.pattern)
        check_unchanged(storage.read_bytes(args.model), storage.read_bytes(args.out), args.out)
        print(json.dumps({"lora": slots.to_contract()}, indent=2))
        return EXIT_OK
    except RecastError as exc:
        print(f"recast: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
