"""Inputs made to hurt a reader that trusts them (issue 29), for the unit tests of the readers
and for the entrypoint tests that must refuse them before Ray.

- :func:`laughs` - YAML whose aliases expand without bound ("billion laughs").
- :func:`radiance_hdr` - a Radiance picture whose size only decoding tells (12000 x 12000 in 9 MB).
- :func:`wide_video` - a clip of any frame size, cheap to write (FFV1).
"""

from __future__ import annotations

import struct
from pathlib import Path

import av
import numpy as np


def laughs(levels: int = 10, fan: int = 9) -> str:
    """The "billion laughs" shape: each level ``fan`` aliases of the previous one."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * fan)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * fan)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def radiance_hdr(path: Path, width: int, height: int) -> Path:
    """A valid run-length encoded Radiance picture of one grey: about 760 bytes a row at 12000 wide."""
    runs = b"".join(bytes([128 + min(127, width - x), 128]) for x in range(0, width, 127))
    row = struct.pack(">BBH", 2, 2, width) + runs * 4
    head = f"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y {height} +X {width}\n".encode()
    path.write_bytes(head + row * height)
    return path


def wide_video(path: Path, width: int, height: int) -> str:
    """A lossless (FFV1) clip: 25 KB for 16400x16, so a huge frame size costs the test nothing."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("ffv1", rate=24)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for _ in range(3):
            frame = av.VideoFrame.from_ndarray(np.zeros((height, width, 3), np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return str(path)
