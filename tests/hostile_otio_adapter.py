"""An OpenTimelineIO adapter plugin that does to its reader's process what a hostile document can do
to a C++ reader: the file's first word says what (``crash``: SIGSEGV; ``hang``: sleep without end;
``hog``: take memory without end).  It first writes its pid to ``$HOSTILE_PID_FILE`` (or beside the
file), so a test can see that the process is gone.

Registered through ``OTIO_PLUGIN_MANIFEST_PATH`` (:func:`manifest`), as a studio's own adapter is.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

NAME = "recast_hostile"


def manifest(folder: Path) -> str:
    """A plugin manifest naming this adapter, written in ``folder``; its path."""
    path = folder / "hostile_manifest.json"
    path.write_text(
        json.dumps(
            {
                "OTIO_SCHEMA": "PluginManifest.1",
                "adapters": [
                    {"OTIO_SCHEMA": "Adapter.1", "name": NAME, "filepath": __file__, "suffixes": ["hostile"]}
                ],
            }
        )
    )
    return str(path)


def read_from_file(filepath: str, **_: object) -> object:
    Path(os.environ.get("HOSTILE_PID_FILE", filepath + ".pid")).write_text(str(os.getpid()))
    what = Path(filepath).read_text().split()[0]
    if what == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if what == "hog":
        hoard = []
        while True:
            hoard.append(bytearray(64 << 20))
    time.sleep(3600)
    raise AssertionError("unreachable")
