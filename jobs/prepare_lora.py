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

With no adapter active the prepared model computes what the original did: the job
checks that on four random inputs before publishing (max |difference| at most
1e-5 x the range of the original output: zero slots change how ONNX Runtime
fuses the arithmetic, so an ulp or so is normal) and prints the figure.  Exit status: 0 done,
2 bad input (the message names the file or field).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobs.cli import configure_logging

if TYPE_CHECKING:
    from pipeline.lora.checks import UnchangedReport
    from pipeline.lora.prepare import LoraSlots

EXIT_OK, EXIT_BAD_INPUT = 0, 2


def prepare_bytes(
    data: bytes, where: str, rank: int, pattern: str
) -> tuple[bytes, LoraSlots, UnchangedReport]:
    """Prepare the model in ``data`` and check it in memory: (prepared bytes, slots, check figures)."""
    import onnx

    from pipeline.errors import ModelPackError
    from pipeline.lora.checks import check_unchanged
    from pipeline.lora.prepare import prepare_model, sha256_bytes

    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # any parse failure means a bad model file
        raise ModelPackError(where, f"not an ONNX model ({exc})") from exc
    prepared, slots = prepare_model(model, rank=rank, base_sha256=sha256_bytes(data), pattern=pattern)
    out = prepared.SerializeToString()
    return out, slots, check_unchanged(data, out, where)


def prepare_in_pack(
    pack_url: str, role: str, rank: int, pattern: str
) -> tuple[dict[str, object], UnchangedReport]:
    """Prepare the ``role`` model of the pack at ``pack_url``; returns the updated manifest entry
    and what the unchanged-output check measured."""
    from pipeline.errors import ModelPackError
    from pipeline.limits import MANIFEST_MAX_BYTES, ONNX_MAX_BYTES
    from pipeline.lora.prepare import sha256_bytes
    from pipeline.store import jsonload, storage

    manifest_url = storage.join(pack_url, "manifest.json")
    try:
        manifest = jsonload.loads(storage.read_bytes(manifest_url, max_bytes=MANIFEST_MAX_BYTES))
    except ValueError as exc:  # not JSON, too deep, a key twice
        raise ModelPackError(manifest_url, f"not valid JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise ModelPackError(manifest_url, "not a JSON object")
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
    out, slots, report = prepare_bytes(data, src_url, rank, pattern)
    stem, _ = os.path.splitext(entry["file"])
    new_file = f"{stem}.lora{rank}.onnx"
    storage.write_bytes(storage.join(pack_url, new_file), out)  # model first, then the manifest naming it
    entry["file"] = new_file
    entry["sha256"] = sha256_bytes(out)
    entry.setdefault("contract", {})["lora"] = slots.to_contract()
    storage.write_bytes(manifest_url, (json.dumps(manifest, indent=2) + "\n").encode())
    return entry, report


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.prepare_lora", description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--pack", help="pack folder URL holding manifest.json")
    where.add_argument("--model", help="one ONNX model URL (with --out)")
    parser.add_argument("--out", help="where to write the prepared model (with --model)")
    parser.add_argument("--role", default="swapper", help="pack role to prepare (default swapper)")
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument(
        "--pattern",
        default=".*",
        help="regex (re.search) on weight initializer names; for inswapper_128 '^styles\\.' (see README)",
    )
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    from pipeline.errors import RecastError
    from pipeline.limits import ONNX_MAX_BYTES
    from pipeline.store import storage

    try:
        if args.pack:
            entry, report = prepare_in_pack(args.pack, args.role, args.rank, args.pattern)
            lora = entry["contract"]["lora"]  # type: ignore[index]
            print(f"prepared {entry['file']}: {len(lora['slots'])} LoRA slots of rank {lora['rank']}")
            print(f"outputs with no adapter match the original: {report.describe()}")
            return EXIT_OK
        if not args.out:
            parser.error("--model needs --out")
        out, slots, report = prepare_bytes(
            storage.read_bytes(args.model, max_bytes=ONNX_MAX_BYTES), args.model, args.rank, args.pattern
        )
        storage.write_bytes(args.out, out)  # only a model that passed the check is written
        print(f"outputs with no adapter match the original: {report.describe()}", file=sys.stderr)
        print(json.dumps({"lora": slots.to_contract()}, indent=2))
        return EXIT_OK
    except RecastError as exc:
        print(f"recast: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
