"""Reading a timeline in a child process: whatever the document does to OpenTimelineIO's reader
(a crash, a stall, memory without end), the driver gets a refusal naming the file.

:func:`read_isolated` runs ``otio_child.py`` (OpenTimelineIO alone, no Recast) with
:data:`READ_SECONDS` of CPU and wall time and :data:`READ_MEMORY` bytes of address space; the
child writes the timeline as ``otio_json`` beside the input, and the driver reads that back after
the same bounds (:mod:`cluster.edit.bounds`) as any ``.otio``.  A signal to the driver while it
waits (``ray job stop``) stops the child too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import opentimelineio as otio

from cluster.edit.bounds import check_counts, json_counts
from pipeline.errors import SpecError

READ_SECONDS = 45
"""CPU and wall time a timeline's reader may take (a 20,000-event EDL takes about 2 s): with the
driver's own checks, a refusal comes within a minute."""
READ_MEMORY = 6 << 30
"""Address space of the reader's process (6 GiB: a 64 MiB ``.otio`` needs under 1 GiB)."""
READ_OUTPUT_BYTES = 1 << 30
"""Largest timeline the reader may hand back (as ``otio_json``)."""
_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "otio_child.py")


def read_isolated(
    path: str,
    adapter: str,
    *,
    field: str,
    url: str,
    options: dict[str, object] | None = None,
    seconds: int = READ_SECONDS,
) -> object:
    """What the adapter ``adapter`` reads from the local file ``path`` (no media linker), read in a
    child process; SpecError naming ``field`` and ``url`` when the adapter refuses it, crashes, runs
    past ``seconds`` or out of memory, or hands back a timeline past the bounds."""
    out = path + ".read.otio"
    command = [sys.executable, "-I", _CHILD, path, adapter, json.dumps(options or {}), out, str(seconds)]
    command.append(str(READ_MEMORY))
    try:
        try:
            done = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                timeout=seconds + 5,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SpecError(
                field, f"{url}: the {adapter} reader did not finish in {seconds} s; the timeline is refused"
            ) from None
        if done.returncode == 3:
            with open(out + ".error", encoding="utf-8", errors="replace") as fh:
                why = fh.read()
            raise SpecError(field, f"{url} is not a readable {adapter} timeline: {why}")
        if done.returncode != 0:
            raise SpecError(
                field, f"{url}: the {adapter} reader {_ended(done, seconds)}; the timeline is refused"
            )
        size = os.path.getsize(out)
        if size > READ_OUTPUT_BYTES:
            raise SpecError(field, f"{url}: the {adapter} reader made a timeline of {size:,} bytes; refused")
        with open(out, "rb") as fh:
            text = fh.read()
    finally:
        for leftover in (out, out + ".error"):
            if os.path.exists(leftover):
                os.remove(leftover)
    check_counts(json_counts(text), field=field, url=url)
    return otio.adapters.read_from_string(text.decode("utf-8"), adapter_name="otio_json")


def _ended(done: subprocess.CompletedProcess[bytes], seconds: int) -> str:
    """How the reader's process ended, in words."""
    code = done.returncode
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:  # a number with no name here
            name = str(-code)
        why = {
            "SIGXCPU": f"did not finish in {seconds} s of CPU time",
            "SIGALRM": f"did not finish in {seconds} s",
            "SIGKILL": "was killed (out of memory?)",
        }.get(name, "crashed")
        return f"{why} ({name})"
    last = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] if done.stderr else []
    if last and "MemoryError" in last[0]:
        return "ran out of memory"
    return f"failed (exit {code})" + (f": {last[0][:300]}" if last else "")
