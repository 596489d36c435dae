"""The ``recast`` command: one name for every entrypoint, installed by the package.

    recast render spec.yaml [--fixes notes.yaml] [--summary-json s.json] ...
    recast verify delivered.mp4 [--trust-anchors root.pem]
    recast detect-watermark delivered.mp4 --job-id ep101-faces
    recast demo
    recast train-adapter ... | recast prepare-lora ... | recast benchmark ...

Each subcommand is the module's own ``main`` (``recast render`` is ``python -m jobs.render``, which
``ray job submit`` runs on a cluster's head) with the same arguments, output and exit status.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

COMMANDS: dict[str, tuple[str, str]] = {
    "render": ("jobs.render", "render a job spec (a local Ray, or the cluster at RAY_ADDRESS)"),
    "verify": ("jobs.verify", "check a delivery's Content Credentials (video, sequence or sidecar)"),
    "detect-watermark": ("jobs.detect_watermark", "look for a job's invisible watermark in a video"),
    "demo": ("jobs.demo", "render the one-minute demo shot into ./out/demo"),
    "train-adapter": ("jobs.train_adapter", "train a per-identity LoRA adapter"),
    "prepare-lora": ("jobs.prepare_lora", "check and hash a LoRA adapter for a spec"),
    "benchmark": ("jobs.benchmark", "the benchmark suite (from a checkout: not in the wheel)"),
    "spec-reference": ("jobs.spec_reference", "write or check the job-spec reference page"),
}
"""Subcommand -> (its module, what it does)."""

EXIT_USAGE = 2


def usage() -> str:
    """The list of subcommands, as ``recast --help`` prints it."""
    width = max(len(name) for name in COMMANDS)
    lines = ["usage: recast <command> [arguments]", "", "commands:"]
    lines += [f"  {name:<{width}}  {about}" for name, (_, about) in COMMANDS.items()]
    lines += ["", "recast <command> --help: the command's own arguments"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``recast <command> [arguments]``; its exit status is the command's."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if args else EXIT_USAGE
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"recast: no command {name!r}\n\n{usage()}", file=sys.stderr)
        return EXIT_USAGE
    try:
        module = importlib.import_module(COMMANDS[name][0])
    except ModuleNotFoundError as exc:  # the benchmark suite is tooling, in a checkout, not the wheel
        print(f"recast {name}: needs a checkout of Recast ({exc.name} is not installed)", file=sys.stderr)
        return EXIT_USAGE
    sys.argv = [f"recast {name}", *rest]  # what the command's argparse names itself in its messages
    code = module.main(rest)
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
