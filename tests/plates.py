"""Real film-plate sequences for tests: EXR (half/float), DPX 10-bit log, 16-bit TIFF.

The picture is a real face (``skimage.data.astronaut()``, converted from sRGB to the
plate's space with OCIO, moving a little each frame) on a scene-linear background
with values up to 8.0 and a little negative noise.  ``write_frame`` writes one
frame anywhere, so tests can break a sequence (gap, other size, truncated...).
"""

from __future__ import annotations

import os
from functools import cache

import numpy as np
import OpenImageIO as oiio
import PyOpenColorIO as ocio

SRGB = "sRGB Encoded Rec.709 (sRGB)"
OIIO_TYPES = {"half": oiio.HALF, "float": oiio.FLOAT, "uint16": oiio.UINT16, "uint10": oiio.UINT16}
EXTS = {"exr": "exr", "dpx": "dpx", "tiff": "tif"}


@cache
def _config() -> ocio.Config:
    return ocio.Config.CreateFromFile("ocio://default")


def _convert(rgb: np.ndarray, src: str, dst: str) -> np.ndarray:
    out = np.ascontiguousarray(rgb, dtype=np.float32).copy()
    if src != dst:
        _config().getProcessor(src, dst).getDefaultCPUProcessor().applyRGB(out)
    return out


def scene_linear(rgb: np.ndarray, space: str) -> np.ndarray:
    """``rgb`` (normalised values in colour space ``space``) in ACEScg, the default config's scene_linear,
    as a compositor linearises a plate (a processor of the tests' own, not the pipeline's)."""
    return _convert(rgb, space, "ACEScg")


@cache
def _face(height: int) -> np.ndarray:
    from skimage.data import astronaut
    from skimage.transform import resize

    side = max(8, int(height * 0.6))
    return resize(astronaut()[:300, 100:400] / 255.0, (side, side), anti_aliasing=True).astype(np.float32)


def frame_pixels(
    index: int,
    *,
    size: tuple[int, int],
    space: str,
    face: bool = True,
    seed: int = 0,
) -> np.ndarray:
    """Normalised plate RGB (float32 H x W x 3) of frame ``index`` in colour space ``space``."""
    width, height = size
    rng = np.random.default_rng(seed + index)
    x = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :, None]
    y = np.linspace(0.2, 1.0, height, dtype=np.float32)[:, None, None]
    linear = 8.0 * x**3 * y * np.array([1.0, 0.8, 0.6], np.float32) + rng.normal(0, 0.01, (height, width, 3))
    plate = _convert(linear.astype(np.float32), "ACEScg", space)
    if face:
        patch = _convert(_face(height), SRGB, space)
        side = patch.shape[0]
        x0 = min(width - side, width // 4 + 2 * index)
        y0 = (height - side) // 2
        plate[y0 : y0 + side, x0 : x0 + side] = patch
    return plate


def _timecode(start: str, offset: int, fps: int) -> int:
    h, m, s, f = (int(p) for p in start.split(":"))
    total = ((h * 60 + m) * 60 + s) * fps + f + offset
    f, total = total % fps, total // fps
    s, total = total % 60, total // 60
    m, h = total % 60, total // 60
    return int("".join(f"{v:02d}" for v in (h, m, s, f)), 16)


def _encode(values: np.ndarray, pixel: str) -> np.ndarray:
    if pixel == "half":
        return values.astype(np.float16)
    if pixel == "float":
        return values.astype(np.float32)
    if pixel == "uint16":
        return np.rint(np.clip(values, 0, 1) * 65535).astype(np.uint16)
    codes = np.rint(np.clip(values, 0, 1) * 1023).astype(np.uint16)  # uint10: as OIIO reads DPX
    return (codes << 6) | (codes >> 4)


def write_frame(
    path: str,
    index: int = 0,
    *,
    fmt: str = "exr",
    pixel: str = "half",
    compression: str | None = "piz",
    size: tuple[int, int] = (320, 180),
    fps: int | None = 24,
    colour_space: str | None = "ACEScg",
    timecode: str | None = "01:00:00:00",
    extra_channels: tuple[str, ...] = (),
    face: bool = True,
) -> str:
    """Write frame ``index`` of a test plate to the local file ``path``."""
    space = colour_space or {"exr": "ACEScg", "dpx": "ACEScct", "tiff": SRGB}[fmt]
    rgb = frame_pixels(index, size=size, space=space, face=face)
    width, height = size
    channels = ["R", "G", "B", *extra_channels]
    base = OIIO_TYPES[pixel]
    spec = oiio.ImageSpec(width, height, len(channels), base)
    spec.channelnames = tuple(channels)
    planes = [rgb]
    types = [base] * 3
    for name in extra_channels:
        if name == "Z" and fmt == "exr":
            planes.append(np.full((height, width, 1), 10.0 + index, np.float32))
            types.append(oiio.FLOAT)
        else:
            planes.append(np.where(rgb[..., :1] > 0.5, 1.0, 0.25).astype(np.float32))
            types.append(base)
    if any(t != base for t in types):
        spec.channelformats = tuple(types)
    if pixel == "uint10":
        spec.attribute("oiio:BitsPerSample", 10)
    if compression:
        spec.attribute("compression", compression)
    if fps and fmt == "exr":
        spec.attribute("FramesPerSecond", oiio.TypeRational, (fps, 1))
    if fps and fmt == "dpx":
        spec.attribute("dpx:FrameRate", float(fps))
    if timecode and fmt in ("exr", "dpx"):
        spec.attribute("smpte:TimeCode", oiio.TypeTimeCode, (_timecode(timecode, index, fps or 24), 0))
    if colour_space and fmt == "exr":
        spec.attribute("colorspace", colour_space)
    if fmt == "exr":
        spec.attribute("plate:camera", "ALEXA 35")
    pixels = np.concatenate(planes, axis=-1)
    data = pixels.astype(np.float32) if len(set(types)) > 1 else _encode(pixels, pixel)
    out = oiio.ImageOutput.create(path)
    assert out is not None and out.open(path, spec), oiio.geterror()
    assert out.write_image(np.ascontiguousarray(data)), out.geterror()
    out.close()
    return path


def write_sequence(
    folder: str | os.PathLike[str],
    name: str,
    *,
    fmt: str = "exr",
    pixel: str = "half",
    compression: str | None = "piz",
    first: int = 1001,
    count: int = 48,
    size: tuple[int, int] = (320, 180),
    fps: int | None = 24,
    colour_space: str | None = "ACEScg",
    timecode: str | None = "01:00:00:00",
    extra_channels: tuple[str, ...] = (),
    face: bool = True,
) -> str:
    """Write frames ``first .. first+count-1`` as ``folder/name.NNNN.ext``; returns the ``####`` path.

    ``fmt="dpx"`` wants ``pixel="uint10"`` (10-bit log, ACEScct); ``fmt="tiff"`` wants ``"uint16"``.
    """
    os.makedirs(folder, exist_ok=True)
    ext = EXTS[fmt]
    for i in range(count):
        write_frame(
            os.path.join(folder, f"{name}.{first + i:04d}.{ext}"),
            i,
            fmt=fmt,
            pixel=pixel,
            compression=compression,
            size=size,
            fps=fps,
            colour_space=colour_space,
            timecode=timecode,
            extra_channels=extra_channels,
            face=face,
        )
    return os.path.join(os.fspath(folder), f"{name}.####.{ext}")


# The kinds of plate the probe and frame tests run on, as ``write_sequence`` keywords.
FORMATS = {
    "exr-half-piz": {"fmt": "exr", "pixel": "half", "compression": "piz"},
    "exr-float-dwaa": {"fmt": "exr", "pixel": "float", "compression": "dwaa"},
    "dpx-10": {"fmt": "dpx", "pixel": "uint10", "compression": None, "colour_space": None},
    "tiff-16": {
        "fmt": "tiff",
        "pixel": "uint16",
        "compression": "zip",
        "colour_space": None,
        "fps": None,
        "timecode": None,
    },
}
