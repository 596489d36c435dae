"""The child process of :mod:`cluster.edit.isolated`: one timeline read with an OpenTimelineIO adapter
and written back as ``otio_json``, under limits on CPU time, memory and wall time.

Run as a script (``python -I otio_child.py PATH ADAPTER OPTIONS OUT SECONDS MEMORY``), so it imports
OpenTimelineIO and nothing of Recast.  Exit 0: ``OUT`` holds the timeline; 3: the adapter refused the
document and ``OUT.error`` says why (``Type: message``); killed by a signal: the reader crashed, ran
out of CPU time (SIGXCPU) or wall time (SIGALRM).
"""

from __future__ import annotations

import json
import resource
import signal
import sys


def main(argv: list[str]) -> int:
    path, adapter, options, out, seconds, memory = argv
    limit = int(seconds)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash leaves no core file behind
    resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 1))
    resource.setrlimit(resource.RLIMIT_AS, (int(memory), int(memory)))
    signal.alarm(limit)  # a reader that waits on nothing still ends
    import opentimelineio as otio

    try:
        result = otio.adapters.read_from_file(
            path, adapter_name=adapter, media_linker_name=None, **json.loads(options)
        )
        text = otio.adapters.write_to_string(result, adapter_name="otio_json", indent=-1)
    except Exception as exc:  # noqa: BLE001 - each adapter raises its own errors (EDLParseError, XML...)
        with open(out + ".error", "w", encoding="utf-8") as fh:
            fh.write(f"{type(exc).__name__}: {exc}"[:2000])
        return 3
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
