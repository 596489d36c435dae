"""Film plates for the benchmark: EXR half (PIZ, DWAA) and DPX 10-bit log frames of a real face.

The picture is the astronaut's face (``skimage.data.astronaut()``, converted from
sRGB to the plate's space with OCIO) moving a little each frame over a
scene-linear background with values up to 8.0 and a little noise (so frames
compress like camera plates, not like flat colour).  :func:`plate_frame` gives
a frame's pixels and header in memory, so writing it can be what is measured;
:func:`write_prores` encodes the same frames, converted to the model space, as
a ProRes 4444 ``.mov``.  Nothing is downloaded and nothing comes from ``tests/``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import OpenImageIO as oiio
import PyOpenColorIO as ocio

from pipeline.video.sequence_types import DEFAULT_CONFIG, DEFAULT_MODEL_SPACE

SIZES = {"2K": (2048, 1080), "4K": (4096, 2160)}
FPS = 24
FACE_SHARE = 0.3
"""Side of the face square as a share of the frame height (a medium close-up)."""


@dataclass(frozen=True)
class PlateFormat:
    """How one kind of plate is stored: extension, pixel type, compression, colour space."""

    ext: str
    pixel: str
    """``half`` (EXR) or ``uint10`` (10-bit DPX codes in 16-bit containers, as OIIO reads them)."""
    compression: str | None
    space: str

    @property
    def stated(self) -> str | None:
        """The colour space the file names (EXR only; DPX plates are named in the spec)."""
        return self.space if self.ext == "exr" else None


FORMATS = {
    "exr-half-piz": PlateFormat("exr", "half", "piz", "ACEScg"),
    "exr-half-dwaa": PlateFormat("exr", "half", "dwaa", "ACEScg"),
    "dpx-10bit-log": PlateFormat("dpx", "uint10", None, "ACEScct"),
}


def dims(size: str) -> tuple[int, int]:
    """Width and height of ``2K``, ``4K`` or ``WxH``."""
    if size in SIZES:
        return SIZES[size]
    w, h = size.lower().split("x")
    return int(w), int(h)


def face_box(index: int, size: tuple[int, int]) -> tuple[int, int, int]:
    """(x0, y0, side) of the face square in frame ``index``."""
    width, height = size
    side = max(8, int(height * FACE_SHARE))
    return min(width - side, width // 3 + 2 * index), (height - side) // 3, side


class PlateMaker:
    """Frames of one size in one colour space; the background and face are made once."""

    def __init__(self, size: tuple[int, int], space: str) -> None:
        from skimage.data import astronaut
        from skimage.transform import resize

        self.size = size
        self.config = ocio.Config.CreateFromFile(DEFAULT_CONFIG)
        width, height = size
        rng = np.random.default_rng(0)
        x = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :, None]
        y = np.linspace(0.2, 1.0, height, dtype=np.float32)[:, None, None]
        linear = 8.0 * x**3 * y * np.array([1.0, 0.8, 0.6], np.float32)
        linear = linear + rng.normal(0, 0.01, (height, width, 3)).astype(np.float32)
        self.background = self.convert(linear, "ACEScg", space)
        side = face_box(0, size)[2]
        face = resize(astronaut()[:300, 100:400] / 255.0, (side, side), anti_aliasing=True)
        self.face = self.convert(face.astype(np.float32), DEFAULT_MODEL_SPACE, space)

    def convert(self, rgb: np.ndarray, src: str, dst: str) -> np.ndarray:
        out = np.ascontiguousarray(rgb, dtype=np.float32).copy()
        if src != dst:
            self.config.getProcessor(src, dst).getDefaultCPUProcessor().applyRGB(out)
        return out

    def pixels(self, index: int) -> np.ndarray:
        """Normalised plate RGB (float32 H x W x 3) of frame ``index``."""
        plate = self.background.copy()
        x0, y0, side = face_box(index, self.size)
        plate[y0 : y0 + side, x0 : x0 + side] = self.face
        return plate


def encode(values: np.ndarray, pixel: str) -> np.ndarray:
    """Normalised values as the file's pixels (10-bit codes bit-replicated as OIIO reads DPX)."""
    if pixel == "half":
        return values.astype(np.float16)
    codes = np.rint(np.clip(values, 0, 1) * 1023).astype(np.uint16)
    return (codes << 6) | (codes >> 4)


def plate_spec(index: int, size: tuple[int, int], fmt: PlateFormat) -> Any:
    """The header of frame ``index``: type, compression, rate, timecode, colour space."""
    width, height = size
    spec = oiio.ImageSpec(width, height, 3, oiio.HALF if fmt.pixel == "half" else oiio.UINT16)
    spec.channelnames = ("R", "G", "B")
    if fmt.pixel == "uint10":
        spec.attribute("oiio:BitsPerSample", 10)
        spec.attribute("dpx:FrameRate", float(FPS))
    else:
        spec.attribute("FramesPerSecond", oiio.TypeRational, (FPS, 1))
    if fmt.compression:
        spec.attribute("compression", fmt.compression)
    frames = 3600 * FPS + index  # 01:00:00:00 + index
    f, s = frames % FPS, frames // FPS
    packed = int(f"{s // 3600:02d}{s // 60 % 60:02d}{s % 60:02d}{f:02d}", 16)
    spec.attribute("smpte:TimeCode", oiio.TypeTimeCode, (packed, 0))
    if fmt.stated:
        spec.attribute("colorspace", fmt.stated)
    return spec


def plate_frame(maker: PlateMaker, index: int, fmt: PlateFormat) -> tuple[np.ndarray, Any]:
    """(pixels as stored, header) of frame ``index``."""
    return encode(maker.pixels(index), fmt.pixel), plate_spec(index, maker.size, fmt)


def frame_name(name: str, number: int, fmt: PlateFormat) -> str:
    return f"{name}.{number:04d}.{fmt.ext}"


def write_sequence(
    folder: str, name: str, fmt: PlateFormat, size: tuple[int, int], count: int, first: int = 1001
) -> str:
    """Frames ``first ..`` as ``folder/name.NNNN.ext``; returns the ``####`` pattern."""
    from pipeline.plates.frames import write_plate

    os.makedirs(folder, exist_ok=True)
    maker = PlateMaker(size, fmt.space)
    for i in range(count):
        pixels, spec = plate_frame(maker, i, fmt)
        write_plate(os.path.join(folder, frame_name(name, first + i, fmt)), pixels, spec)
    return os.path.join(folder, f"{name}.####.{fmt.ext}")


def write_prores(path: str, fmt: PlateFormat, size: tuple[int, int], count: int) -> str:
    """The same frames, converted to the model space, as ProRes 4444 (yuv444p10le, BT.709) in a .mov."""
    import av

    maker = PlateMaker(size, fmt.space)
    width, height = size
    tmp = path + ".tmp.mov"
    with av.open(tmp, "w") as container:
        stream = container.add_stream("prores_ks", rate=Fraction(FPS), options={"profile": "4444"})
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv444p10le"
        stream.codec_context.time_base = Fraction(1, FPS)
        for i in range(count):
            plate = maker.pixels(i)
            if fmt.pixel == "half":
                plate = plate.astype(np.float16).astype(np.float32)  # what the EXR holds
            model = maker.convert(plate, fmt.space, DEFAULT_MODEL_SPACE)
            rgb48 = np.rint(np.clip(model, 0, 1) * 65535).astype(np.uint16)
            frame = av.VideoFrame.from_ndarray(rgb48, format="rgb48le")
            frame = frame.reformat(format="yuv444p10le", dst_colorspace="ITU709")
            frame.pts = i
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    os.replace(tmp, path)
    return path
