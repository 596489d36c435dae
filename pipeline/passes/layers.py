"""The matte and face layers of a rendered frame, and how they are written.

``face = out - plate * (1 - matte)``: the replaced face premultiplied by the matte
that blended it, so compositing it over the plate (``face + plate * (1 - matte)``)
gives the output back.  Both are EXR frames with the plate's frame header (timecode,
frame rate; a video's from :mod:`pipeline.passes.video`); the
matte is a single half-float channel ``A``; the face is in scene-linear (the plate's
own space when it is scene-linear, else the OCIO config's ``scene_linear`` role,
e.g. ACEScg for an ACEScct DPX plate or a video), premultiplied there, so the compositor's
recipe is the plate made scene-linear, then ``face + plate * (1 - matte)`` (a
``merge over``) in that space.  Its header names the space (``colorspace``,
``oiio:ColorSpace``) and its ``chromaticities`` (the matte carries those too).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import OpenImageIO as oiio

from pipeline.video.probe import VideoInfo

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


@dataclass(frozen=True)
class PassHeader:
    """What a shot's pass frames state besides the plate frame's header: the shot's frame rate (the
    rate the job renders it at, which a DPX plate states in its own way or a spec sets), and the
    colour space of the ``face`` pass (an OCIO config's canonical name) with its EXR
    ``chromaticities`` (None: not known, the plate's kept where it has some)."""

    frame_rate: Fraction | None
    space: str
    chromaticities: tuple[float, ...] | None = None


def pass_header(info: VideoInfo) -> PassHeader:
    """The :class:`PassHeader` of a plate shot's pass frames: its frame rate, and the face pass's colour
    space (:func:`~pipeline.plates.colour.pass_space`) and chromaticities; the same for the frames the
    actors render and those the publish fills in."""
    from pipeline.plates.colour import chromaticities, load_config, pass_space

    if info.sequence is None:
        raise ValueError(f"{info.url}: pass frames are written for image sequences")
    colour = info.sequence.colour
    config = load_config(colour.config)
    space = pass_space(config, colour.plate_space)
    return PassHeader(info.frame_rate, space, chromaticities(config, space))


def _pass_spec(
    plate_spec: Any, channels: list[str], fmt: Any, compression: str, header: PassHeader | None, *, face: bool
) -> Any:
    spec = oiio.ImageSpec(int(plate_spec.width), int(plate_spec.height), len(channels), fmt)
    spec.channelnames = tuple(channels)
    spec.attribute("compression", compression)
    # The face's colour space is tagged below; a matte has none (it is coverage, not colour).
    retagged = ("colorspace", "chromaticities") if header is not None else ()
    for param in plate_spec.extra_attribs:
        if param.name in PASS_HEADER_ATTRIBUTES and param.name not in retagged:
            spec.attribute(param.name, param.type, param.value)
    if header is None:
        return spec
    if header.frame_rate is not None:
        rate = Fraction(header.frame_rate)
        spec.attribute("FramesPerSecond", oiio.TypeDesc("rational"), [rate.numerator, rate.denominator])
    if face:
        spec.attribute("colorspace", header.space)
        spec.attribute("oiio:ColorSpace", header.space)
    chroma = header.chromaticities or plate_spec.getattribute("chromaticities")
    if chroma is not None:  # the matte's too: the shot's comp space, where it is used
        spec.attribute("chromaticities", oiio.TypeDesc("float[8]"), [float(v) for v in chroma])
    return spec


def sequence_pass_pixels(
    plate: np.ndarray, out: np.ndarray, matte: np.ndarray, rgb: tuple[int, int, int], to_pass: Any
) -> dict[str, np.ndarray]:
    """The ``matte`` (H x W x 1) and ``face`` (H x W x 4, RGBA) pass pixels of one plate frame, float32.

    ``plate``/``out``: the source and output pixels (every channel, the plate's dtype);
    ``to_pass`` turns their RGB into the face pass's colour space (scene-linear,
    :meth:`~pipeline.plates.colour.PlateConverter.to_pass`), where the face is premultiplied.

    Converted and computed only inside the box of what the render touched (the matte, and any
    pixel the output changed, e.g. a burnt-in label): outside it the output is the plate's own
    pixels and the matte 0, so the face is exactly 0 there, as the whole frame's sum would give."""
    idx = list(rgb)
    height, width = matte.shape
    face = np.zeros((height, width, 4), np.float32)
    face[..., 3] = matte
    box = _touched_box(plate[..., idx], out[..., idx], matte)
    if box is not None:
        y0, y1, x0, x1 = box
        src = to_pass(plate[y0:y1, x0:x1][..., idx])
        dst = to_pass(out[y0:y1, x0:x1][..., idx])
        face[y0:y1, x0:x1, :3] = face_layer(dst, src, matte[y0:y1, x0:x1])
    return {"matte": matte[..., None].astype(np.float32), "face": face}


def _touched_box(plate: np.ndarray, out: np.ndarray, matte: np.ndarray) -> tuple[int, int, int, int] | None:
    """(top, bottom, left, right) bounds of the pixels where the matte is not 0 or the output differs
    from the plate; None: none."""
    touched = (matte != 0) | (out != plate).any(axis=-1)
    rows, cols = np.flatnonzero(touched.any(axis=1)), np.flatnonzero(touched.any(axis=0))
    if rows.size == 0:
        return None
    return int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1


def pass_dtype(name: str, plate_dtype: np.dtype) -> np.dtype:
    """The pixels of pass ``name`` of a plate read as ``plate_dtype``: half, but a float plate's face float."""
    return np.dtype(np.float32 if name == "face" and plate_dtype == np.float32 else np.float16)


def sequence_pass_spec(
    plate_spec: Any, name: str, plate_dtype: np.dtype, header: PassHeader | None = None
) -> Any:
    """The EXR header of pass ``name``: the plate frame's size and timing (the shot's frame rate as EXR
    states one, also for a DPX plate), :func:`pass_dtype` pixels, ZIP; the ``face`` pass's colour
    space and chromaticities tagged (``header``)."""
    fmt = oiio.FLOAT if pass_dtype(name, plate_dtype) == np.float32 else oiio.HALF
    channels = ["A"] if name == "matte" else ["R", "G", "B", "A"]
    return _pass_spec(plate_spec, channels, fmt, "zip", header, face=name == "face")
