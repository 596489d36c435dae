"""One image file of a plate: open it with OIIO, describe its header, prove it is whole.

OIIO opens a truncated EXR (or DPX, TIFF) header fine and fails only when the
missing pixels are read, so a frame is whole only once the chunk written last
(the last scanline for increasing line order) has been read.  That is one chunk,
not the image: about 1 ms for a 2K EXR.

Object stores: rather than download every frame, a sparse local file of the listed
size is filled with the first ``HEAD_BYTES`` (header, offset table) and the last
``TAIL_BYTES`` (the last chunk) with two ranged reads.  A whole frame reads fine
from it; a truncated one does not.  If the sparse copy does not read (a header or
offset table larger than the head, a format that reads strips from the start),
the frame is downloaded whole and checked again, so a sparse failure never
condemns a frame on its own.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import fsspec
import OpenImageIO as oiio

from pipeline.errors import MediaError
from pipeline.limits import InputLimits

HEAD_BYTES = 256 * 1024
TAIL_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class FrameHeader:
    """What a frame's header says (``spec`` is its own ``oiio.ImageSpec``)."""

    format: str
    width: int
    height: int
    channels: tuple[str, ...]
    channel_types: tuple[str, ...]
    bits: int
    subimages: int
    deep: bool
    spec: Any

    def layout(self) -> str:
        """Size, channels and types, for comparing frames and naming differences."""
        types = sorted(set(self.channel_types))
        return f"{self.width}x{self.height} {','.join(self.channels)} {'/'.join(types)}"


@dataclass(frozen=True)
class Inspection:
    """The result of checking one frame: its header, or what is wrong with it."""

    number: int
    header: FrameHeader | None
    problem: Literal["unreadable", "truncated", "too_large"] | None = None
    detail: str = ""


@contextlib.contextmanager
def open_image(path: str, url: str) -> Iterator[Any]:
    """An open ``oiio.ImageInput`` for the local file ``path``; MediaError naming ``url``."""
    inp = oiio.ImageInput.open(path)
    if inp is None:
        raise MediaError(url, f"unreadable image ({oiio.geterror() or 'unknown format'})")
    try:
        yield inp
    finally:
        inp.close()


def header_of(inp: Any) -> FrameHeader:
    """Describe the open image ``inp`` (its first subimage)."""
    spec = oiio.ImageSpec(inp.spec())
    n = spec.nchannels
    types = (
        tuple(str(t) for t in spec.channelformats)
        if len(spec.channelformats) == n
        else (str(spec.format),) * n
    )
    return FrameHeader(
        format=str(inp.format_name()),
        width=int(spec.width),
        height=int(spec.height),
        channels=tuple(str(c) for c in spec.channelnames),
        channel_types=types,
        bits=int(spec.get_int_attribute("oiio:BitsPerSample", spec.format.size() * 8)),
        subimages=int(spec.get_int_attribute("oiio:subimages", 1)),
        deep=bool(spec.deep),
        spec=spec,
    )


def read_last_chunk(inp: Any) -> str:
    """Read the pixels written last; "" when they read, else OIIO's error."""
    spec = inp.spec()
    order = str(spec.get_string_attribute("openexr:lineOrder", "increasingY"))
    if spec.tile_width or order == "randomY":
        ok = inp.read_image(0, 0, 0, spec.nchannels, spec.format) is not None
    else:
        y = spec.y if order == "decreasingY" else spec.y + spec.height - 1
        ok = inp.read_scanlines(0, 0, y, y + 1, spec.z, 0, spec.nchannels, spec.format) is not None
    return "" if ok else (inp.geterror() or "pixels do not read")


def inspect_local(number: int, path: str, url: str, limits: InputLimits | None = None) -> Inspection:
    """Open ``path`` and read its last chunk (not when the header is larger than ``limits``)."""
    try:
        with open_image(path, url) as inp:
            header = header_of(inp)
            too_large = (limits or InputLimits()).frame_problem(header.width, header.height)
            if too_large:
                return Inspection(number, header, "too_large", too_large)
            error = read_last_chunk(inp)
    except MediaError as exc:
        return Inspection(number, None, "unreadable", exc.reason)
    if error:
        return Inspection(number, header, "truncated", error)
    return Inspection(number, header)


def _sparse_copy(fs: fsspec.AbstractFileSystem, path: str, size: int, dest: str) -> None:
    """``dest``: a file of ``size`` bytes holding the head and tail of ``path``, holes between."""
    with open(dest, "wb") as fh:
        if size <= HEAD_BYTES + TAIL_BYTES:
            fh.write(
                fs.cat_file(path, start=0, end=size)
            )  # the listed size: a grown object is not read whole
            return
        fh.write(fs.cat_file(path, start=0, end=HEAD_BYTES))
        fh.seek(size - TAIL_BYTES)
        fh.write(fs.cat_file(path, start=size - TAIL_BYTES, end=size))


def inspect_remote(
    number: int,
    fs: fsspec.AbstractFileSystem,
    path: str,
    url: str,
    size: int,
    *,
    scratch: str,
    limits: InputLimits | None = None,
) -> Inspection:
    """Check a remote frame from a sparse copy (head and tail), downloading it whole if needed.

    ``scratch`` is a local folder for the temporary copy (removed before returning).
    """
    local = os.path.join(scratch, f"{number}.{path.rpartition('.')[2]}")
    try:
        _sparse_copy(fs, path, size, local)
        found = inspect_local(number, local, url, limits)
        if found.problem not in (None, "too_large") and size > HEAD_BYTES + TAIL_BYTES:
            fs.get_file(path, local)
            found = inspect_local(number, local, url, limits)
        return found
    except Exception as exc:  # noqa: BLE001 - any storage failure is reported as this frame's
        return Inspection(number, None, "unreadable", f"cannot read ({type(exc).__name__}: {exc})")
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(local)
