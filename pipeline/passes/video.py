"""The compositing passes of a video source: EXR frames, the face in scene-linear.

A video's pictures are display-referred (BT.709, sRGB, PQ...), and a compositor merges in
scene-linear, so a video's ``face`` pass is not a movie: it is an EXR sequence in the shot's
OCIO config's ``scene_linear`` role (ACEScg in ``ocio://default``), premultiplied there by the
matte, tagged (``colorspace``, ``oiio:ColorSpace``, ``chromaticities``), with the video's frame
rate and each frame's timecode.  The matte is a one-channel EXR sequence beside it.  Frames are
numbered as the video's frames are everywhere else in Recast (QC list, tracks): from 0.

How the video's values are made linear (the same for the plate and the output, so the comp
recipe ``linear(plate) * (1 - matte) + face == linear(output)`` holds):

* transfer ``bt709``, ``smpte170m``, ``bt2020-10``/``-12``, ``bt1886`` or unspecified: the
  BT.1886 reading, gamma 2.4 (the picture as a reference monitor shows it, the ACES configs'
  ``Gamma 2.4 Encoded Rec.709``); ``iec61966-2-1``: the sRGB curve; ``gamma22``/``gamma28``:
  those powers; ``linear``: none; ``smpte2084``: PQ to nits/100; ``arib-std-b67``: HLG's inverse
  OETF;
* primaries ``bt709`` (or unspecified, ``smpte170m``, ``bt470bg``), ``bt2020`` or ``smpte432``
  (P3-D65): the config's linear space of those primaries (found by its interop ID), converted
  to ``scene_linear``.  A config without that space or role gets the face in linear with the
  video's own primaries, tagged with the interop ID (a warning says so).
"""

from __future__ import annotations

import logging
from fractions import Fraction
from typing import Any

import numpy as np
import OpenImageIO as oiio
import PyOpenColorIO as ocio

from pipeline.colour import ColourTags
from pipeline.passes.layers import PassHeader
from pipeline.video.probe import VideoInfo
from pipeline.video.timecode import add_frames, smpte_packed

log = logging.getLogger(__name__)

_GAMMA = {"gamma22": 2.2, "gamma28": 2.8}
_LINEAR_BY_PRIMARIES = {"bt2020": "lin_rec2020_scene", "smpte432": "lin_p3d65_scene"}
"""Interop ID of the linear space of a video's primaries (any other: ``lin_rec709_scene``)."""


def _curve(transfer: str) -> ocio.Transform | None:
    """The OCIO transform from a video's code values (0..1) to linear light, by its transfer tag."""
    if transfer == "linear":
        return None
    if transfer == "iec61966-2-1":
        return ocio.ExponentWithLinearTransform(gamma=[2.4, 2.4, 2.4, 1.0], offset=[0.055, 0.055, 0.055, 0.0])
    if transfer == "smpte2084":
        return ocio.BuiltinTransform("CURVE - ST-2084_to_LINEAR")
    if transfer == "arib-std-b67":
        return ocio.BuiltinTransform("CURVE - HLG-OETF-INVERSE")
    power = _GAMMA.get(transfer, 2.4)
    return ocio.ExponentTransform(value=[power, power, power, 1.0])


def _interop_space(config: ocio.Config, interop: str) -> str | None:
    for space in config.getColorSpaces():
        if space.getInteropID() == interop:
            return str(space.getName())
    return None


class VideoPassConverter:
    """A video shot's values (decoded RGB codes) -> the ``face`` pass's scene-linear space.

    Built once per colour config, colour tags and rate (its OCIO processor made here);
    thread-safe to call from several writer threads."""

    def __init__(self, config_name: str, tags: ColourTags, frame_rate: Fraction | None) -> None:
        from pipeline.plates.colour import CHROMATICITIES, load_config

        config = load_config(config_name)
        interop = _LINEAR_BY_PRIMARIES.get(tags.primaries, "lin_rec709_scene")
        steps: list[ocio.Transform] = []
        if (curve := _curve(tags.transfer)) is not None:
            steps.append(curve)
        linear = _interop_space(config, interop)
        role = (
            config.getColorSpace(ocio.ROLE_SCENE_LINEAR) if config.hasRole(ocio.ROLE_SCENE_LINEAR) else None
        )
        if linear is not None and role is not None:
            space = str(role.getName())
            steps.append(ocio.ColorSpaceTransform(src=linear, dst=space))
            chroma = CHROMATICITIES.get(str(role.getInteropID()))
        else:
            log.warning(
                "%s has no %s colour space or no scene_linear role: a video's face pass stays in linear "
                "with the video's primaries (%s)",
                config_name,
                interop,
                interop,
            )
            space, chroma = interop, CHROMATICITIES[interop]
        self.space = space
        """The ``face`` pass's colour space (the config's name, or an interop ID)."""
        self.header = PassHeader(frame_rate, space, chroma)
        group = ocio.GroupTransform(steps)
        self._processor = config.getProcessor(group).getDefaultCPUProcessor()

    def to_pass(self, raw: np.ndarray) -> np.ndarray:
        """``(..., 3)`` decoded RGB codes (uint8/uint16, full range) -> float32 in :attr:`space`."""
        out = np.array(raw, dtype=np.float32, order="C", copy=True)
        if raw.dtype.kind == "u":
            out /= float(np.iinfo(raw.dtype).max)
        self._processor.applyRGB(out)  # in place
        return out


def video_frame_spec(info: VideoInfo, position: int) -> Any:
    """An ``oiio.ImageSpec`` standing for video frame ``position``'s header: its size, the video's
    frame rate and the frame's timecode (when the video has one): what its pass frames carry."""
    spec = oiio.ImageSpec(info.width, info.height, 3, oiio.UINT16)
    if info.frame_rate:
        rate = Fraction(info.frame_rate)
        spec.attribute("FramesPerSecond", oiio.TypeDesc("rational"), [rate.numerator, rate.denominator])
    if info.timecode:
        try:
            code = add_frames(info.timecode, position, Fraction(info.frame_rate or 24))
        except ValueError as exc:
            log.warning("%s: timecode %r not carried to the passes (%s)", info.url, info.timecode, exc)
        else:
            spec.attribute("smpte:TimeCode", oiio.TypeDesc("timecode"), [smpte_packed(code), 0])
    return spec
