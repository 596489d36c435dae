"""Read the ``colr`` box of a MOV/MP4 file's first video track (what a conform tool reads).

QuickTime's ``nclc`` carries primaries, transfer and matrix; ISO BMFF's
``nclx`` adds a full-range flag.  FFmpeg's decoders fill in values of their own
(DNxHR says BT.709 and limited range whatever the file holds), so the file's own
description is read here from the box itself rather than from a decoder.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import IO

_VISUAL_ENTRY_HEADER = 8 + 78  # box header, then SampleEntry and VisualSampleEntry fields before child boxes


@dataclass(frozen=True)
class Colr:
    """A ``colr`` box: FFmpeg's integer tags; ``full_range`` None for ``nclc`` (no range field)."""

    kind: str
    primaries: int
    transfer: int
    matrix: int
    full_range: bool | None


def read_colr(path: str) -> Colr | None:
    """The ``colr`` box of the first video track of the MOV/MP4 at ``path`` (None: the track has none)."""
    with open(path, "rb") as fh:
        return read_colr_from(fh)


def read_colr_from(fh: IO[bytes]) -> Colr | None:
    """:func:`read_colr` of an open, seekable MOV/MP4 file (local or an object-store reader).

    Boxes are walked by their headers; only ``hdlr`` and ``stsd`` payloads are read, each at most
    :data:`BOX_READ_MAX_BYTES`, so a ``moov`` that claims gigabytes is never read whole."""
    for kind, start, size in _boxes(fh, 0, None):
        if kind == b"moov":
            return _in_moov(fh, (start, start + size))
    return None


BOX_READ_MAX_BYTES = 1 << 20
"""An ``hdlr`` or ``stsd`` payload read to find the ``colr`` box (a few hundred bytes in practice)."""

Span = tuple[int, int]


def _child(fh: IO[bytes], span: Span, *path: bytes) -> Span | None:
    """The payload span of the box at ``path`` (first of each type) inside ``span``."""
    for kind in path:
        found = next(((s, s + n) for k, s, n in _boxes(fh, *span) if k == kind), None)
        if found is None:
            return None
        span = found
    return span


def _payload(fh: IO[bytes], span: Span) -> bytes:
    fh.seek(span[0])
    return fh.read(min(span[1] - span[0], BOX_READ_MAX_BYTES))


def _boxes(fh: IO[bytes], offset: int, end: int | None) -> list[tuple[bytes, int, int]]:
    """(type, payload offset, payload size) of the boxes in ``[offset, end)`` of the file."""
    found = []
    while end is None or offset + 8 <= end:
        fh.seek(offset)
        header = fh.read(8)
        if len(header) < 8:
            break
        size, kind = struct.unpack(">I4s", header)
        head = 8
        if size == 1:
            size = struct.unpack(">Q", fh.read(8))[0]
            head = 16
        elif size == 0:
            size = (end if end is not None else fh.seek(0, 2)) - offset
        if size < head:
            break
        found.append((kind, offset + head, size - head))
        offset += size
    return found


def _children(data: bytes, offset: int = 0) -> list[tuple[bytes, bytes]]:
    out = []
    while offset + 8 <= len(data):
        size, kind = struct.unpack_from(">I4s", data, offset)
        if size < 8 or offset + size > len(data):
            break
        out.append((kind, data[offset + 8 : offset + size]))
        offset += size
    return out


def _in_moov(fh: IO[bytes], moov: Span) -> Colr | None:
    for kind, start, size in _boxes(fh, *moov):
        if kind != b"trak":
            continue
        mdia = _child(fh, (start, start + size), b"mdia")
        hdlr = _child(fh, mdia, b"hdlr") if mdia is not None else None
        if mdia is None or hdlr is None or _payload(fh, hdlr)[8:12] != b"vide":
            continue
        stsd_span = _child(fh, mdia, b"minf", b"stbl", b"stsd")
        stsd = _payload(fh, stsd_span) if stsd_span is not None else b""
        for _, entry in _children(stsd, 8):  # after version/flags and the entry count
            for box, body in _children(entry, _VISUAL_ENTRY_HEADER - 8):
                if box == b"colr" and body[:4] in (b"nclc", b"nclx") and len(body) >= 10:
                    p, t, m = struct.unpack_from(">HHH", body, 4)
                    full = bool(body[10] & 0x80) if body[:4] == b"nclx" and len(body) >= 11 else None
                    return Colr(body[:4].decode(), p, t, m, full)
        return None
    return None
