"""Identity pictures: read with a size limit, sized from the header, then decoded.

A picture is refused (:class:`~pipeline.errors.InputRefused`, naming its URL) when its
file is larger than ``limits.max_image_bytes``, when it is not a regular file, or when
its header declares more than ``limits.max_image_pixels`` pixels: that is found before
any pixel is decoded (Pillow reads only the header), so a small file claiming a huge
image never reaches the decoder.  Only formats whose size Pillow reads from the header
and whose signature OpenCV recognises as the same format are decoded (:data:`SIZED_FORMATS`):
any other picture (a Radiance ``.hdr``, an OpenEXR, a PFM...) would be sized only by
decoding it, so it is refused unread.  A file that is not an image is a StorageError.
Decoding is OpenCV's (``cv2.imdecode``), as it always was, so pixels are unchanged.
"""

from __future__ import annotations

import io
import warnings

import cv2
import numpy as np

from pipeline.errors import InputRefused, StorageError
from pipeline.limits import InputLimits
from pipeline.store import storage

NOT_AN_IMAGE = "not a readable image (JPEG, PNG, TIFF, WebP ...)"
SIZED_FORMATS = frozenset({"JPEG", "MPO", "PNG", "TIFF", "WEBP", "BMP", "PPM"})
"""Pillow's names of the formats decoded: each starts with a signature that OpenCV reads as the same
format, so the size Pillow read from the header is the size OpenCV decodes."""


def header_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from the picture's header, without decoding; None if Pillow cannot tell.

    Raises ``PIL.Image.DecompressionBombError`` above Pillow's own ceiling (about 179 MP),
    which is above the highest ``limits.max_image_pixels`` allowed."""
    found = _header(data)
    return None if found is None else found[1]


def _header(data: bytes) -> tuple[str, tuple[int, int]] | None:
    """(Pillow's format name, (width, height)) from the header; None if Pillow cannot tell."""
    from PIL import Image

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                return str(image.format), (int(image.width), int(image.height))
    except Image.DecompressionBombError:
        raise
    except Exception:  # noqa: BLE001 - any format Pillow cannot parse
        return None


def _too_many(url: str, width: int, height: int, limits: InputLimits) -> None:
    if width * height > limits.max_image_pixels:
        raise InputRefused(
            url,
            f"picture is {width}x{height} ({width * height:,} pixels), more than "
            f"limits.max_image_pixels {limits.max_image_pixels:,}",
        )


def decode_picture(url: str, data: bytes, limits: InputLimits | None = None) -> np.ndarray:
    """The picture ``data`` (read from ``url``) as RGB uint8, its size checked before decoding."""
    limits = limits or InputLimits()
    if not data:
        raise StorageError(url, f"{NOT_AN_IMAGE}: empty file")
    from PIL import Image

    try:
        declared = _header(data)
    except Image.DecompressionBombError as exc:
        raise InputRefused(
            url, f"{exc}; more than limits.max_image_pixels {limits.max_image_pixels:,}"
        ) from None
    if declared is None:
        raise InputRefused(
            url, f"{NOT_AN_IMAGE}: its size cannot be read from its header, so it is not decoded"
        )
    if declared[0] not in SIZED_FORMATS:
        raise InputRefused(
            url,
            f"a {declared[0]} picture is not decoded: identity pictures are JPEG, PNG, TIFF, WebP, BMP or PPM",
        )
    _too_many(url, *declared[1], limits)
    image = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise StorageError(url, NOT_AN_IMAGE)
    _too_many(url, int(image.shape[1]), int(image.shape[0]), limits)  # a decoder that disagreed
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def read_picture(url: str, limits: InputLimits | None = None) -> bytes:
    """The bytes of the picture at ``url``: a regular file of at most ``limits.max_image_bytes``."""
    return storage.read_bytes(url, max_bytes=(limits or InputLimits()).max_image_bytes)


def load_picture(url: str, limits: InputLimits | None = None) -> np.ndarray:
    """Read and decode the picture at ``url`` (RGB uint8) within ``limits``."""
    return decode_picture(url, read_picture(url, limits), limits)
