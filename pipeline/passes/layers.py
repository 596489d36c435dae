"""The matte and face layers of a rendered frame, and how they are written.

``face = out - plate * (1 - matte)``: the replaced face premultiplied by the matte
that blended it, so compositing it over the plate (``face + plate * (1 - matte)``)
gives the output back.  Video: 16-bit RGB frames with alpha for the ProRes 4444
pass writers (the matte movie shows the matte and carries it in alpha).  Image
sequences: EXR frames in the plate's own colour space with its frame header
(timecode, frame rate); the matte is a single half-float channel ``A``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import OpenImageIO as oiio

from pipeline.video.decode import Frame

_TOP16 = 65535.0
PASS_HEADER_ATTRIBUTES = (
    "smpte:TimeCode",
    "FramesPerSecond",
    "framesPerSecond",
    "dpx:FrameRate",
    "chromaticities",
    "colorspace",
    "PixelAspectRatio",
    "screenWindowCenter",
    "screenWindowWidth",
)
"""Header attributes of a plate frame that its pass frames carry too (others describe the plate's pixels)."""


def face_layer(out: np.ndarray, plate: np.ndarray, matte: np.ndarray) -> np.ndarray:
    """``out - plate * (1 - matte)`` in float32 (``out``/``plate``: H x W x 3 in one value scale)."""
    a = matte[..., None].astype(np.float32)
    return out.astype(np.float32) - plate.astype(np.float32) * (1.0 - a)


def video_pass_frames(frame: Frame, out: np.ndarray, matte: np.ndarray | None) -> dict[str, Frame]:
    """The ``matte`` and ``face`` frames (16-bit RGB with alpha) of one rendered video frame."""
    height, width = out.shape[:2]
    a = np.zeros((height, width), np.float32) if matte is None else matte
    alpha = np.rint(np.clip(a, 0.0, 1.0) * _TOP16).astype(np.uint16)
    scale = _TOP16 / float(np.iinfo(out.dtype).max)
    face = face_layer(out, frame.rgb, a) * scale
    face16 = np.rint(np.clip(face, 0.0, _TOP16)).astype(np.uint16)
    grey = np.repeat(alpha[..., None], 3, axis=-1)
    return {
        "matte": Frame(index=frame.index, pts=frame.pts, rgb=grey, alpha=alpha),
        "face": Frame(index=frame.index, pts=frame.pts, rgb=face16, alpha=alpha),
    }


def _pass_spec(plate_spec: Any, channels: list[str], fmt: Any, compression: str) -> Any:
    spec = oiio.ImageSpec(int(plate_spec.width), int(plate_spec.height), len(channels), fmt)
    spec.channelnames = tuple(channels)
    spec.attribute("compression", compression)
    for param in plate_spec.extra_attribs:
        if param.name in PASS_HEADER_ATTRIBUTES:
            spec.attribute(param.name, param.type, param.value)
    return spec


def sequence_pass_pixels(
    plate: np.ndarray, out: np.ndarray, matte: np.ndarray, rgb: tuple[int, int, int], normalise: Any
) -> dict[str, np.ndarray]:
    """The ``matte`` (H x W x 1) and ``face`` (H x W x 4, RGBA) pass pixels of one plate frame, float32.

    ``plate``/``out``: the source and output pixels (every channel, the plate's dtype);
    ``normalise`` turns their RGB into the plate's 0-1 (or scene-linear) scale."""
    idx = list(rgb)
    src = normalise(plate[..., idx])
    dst = normalise(out[..., idx])
    face = face_layer(dst, src, matte)
    return {
        "matte": matte[..., None].astype(np.float32),
        "face": np.concatenate([face, matte[..., None]], axis=-1),
    }


def pass_dtype(name: str, plate_dtype: np.dtype) -> np.dtype:
    """The pixels of pass ``name`` of a plate read as ``plate_dtype``: half, but a float plate's face float."""
    return np.dtype(np.float32 if name == "face" and plate_dtype == np.float32 else np.float16)


def sequence_pass_spec(plate_spec: Any, name: str, plate_dtype: np.dtype) -> Any:
    """The EXR header of pass ``name``: the plate frame's size and timing, :func:`pass_dtype` pixels, ZIP."""
    fmt = oiio.FLOAT if pass_dtype(name, plate_dtype) == np.float32 else oiio.HALF
    return _pass_spec(plate_spec, ["A"] if name == "matte" else ["R", "G", "B", "A"], fmt, "zip")
