"""Repack a downloaded wheel without the files no import needs, so the device call can carry it.

The PyNvVideoCodec 2.2.4 wheel is 26.9 MB; with the other carried wheels (about 48 MB)
it would pass the device tool's 64 MiB.  Of it, 12 MB are FFmpeg's source tarball
(``*.data/data/external``, kept in the wheel for the LGPL) and 4.6 MB samples and
notebooks; the importable package is about 10 MB.  This keeps the package, its
``.libs`` folder and ``dist-info`` (RECORD rewritten to list what is kept)::

    python infra/device/slim_wheel.py .whl/pynvvideocodec-2.2.4-cp312-cp312-manylinux_2_28_x86_64.whl

The wheel is replaced in place; a wheel already slim is left as it is.  For the lent
test machine only: install the full wheel everywhere else (``pip install '.[gpu]'``).
"""

from __future__ import annotations

import os
import sys
import zipfile


def _dropped(name: str) -> bool:
    """FFmpeg's sources (``<dist>.data/``), samples and benchmarks: nothing an import reads."""
    return name.split("/", 1)[0].endswith(".data") or name.startswith(("samples/", "benchmarks/"))


def slim(path: str) -> tuple[int, int]:
    """Rewrite the wheel at ``path`` without the dropped files; (bytes before, bytes after)."""
    before = os.path.getsize(path)
    with zipfile.ZipFile(path) as src:
        names = [n for n in src.namelist() if not _dropped(n)]
        if len(names) == len(src.namelist()):
            return before, before
        tmp = path + ".slim"
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
            for name in names:
                data = src.read(name)
                if name.endswith(".dist-info/RECORD"):
                    rows = data.decode().splitlines()
                    data = ("\n".join(r for r in rows if not _dropped(r.split(",", 1)[0])) + "\n").encode()
                dst.writestr(src.getinfo(name), data)
    os.replace(tmp, path)
    return before, os.path.getsize(path)


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        old, new = slim(arg)
        print(f"{arg}: {old / 1e6:.1f} MB -> {new / 1e6:.1f} MB")
