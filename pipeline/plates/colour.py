"""Plate colour: resolve the spaces a plate is in and converts to, and convert its pixels.

Models see the plate in ``model_space`` (sRGB-encoded Rec.709 by default); OCIO's
CPU processors convert both ways.  Integer plates are normalised by their
container's code range (65535 for 16-bit containers, which OIIO fills with
bit-replicated 10/12-bit DPX codes) before conversion.
"""

from __future__ import annotations

import logging
import types

import numpy as np
import PyOpenColorIO as ocio

from pipeline.errors import SpecError
from pipeline.store import storage
from pipeline.video.sequence_types import ColourRequest, PlateColour, SequenceInfo

log = logging.getLogger(__name__)

SCENE_FORMATS = frozenset({"openexr", "dpx", "cineon"})
"""Formats whose pixels have no conventional colour space: the file or the spec must name it."""


def load_config(config: str) -> ocio.Config:
    """The OCIO config ``config`` names: built-in ``ocio://...``, a local path or a remote URL.

    A remote config is fetched to a temporary file; LUT files it names relative to
    itself are not fetched (use a built-in config or a local path for those).
    """
    try:
        if config.startswith("ocio://"):
            return ocio.Config.CreateFromFile(config)
        if storage.is_local(config):
            storage.check_regular(config)  # a FIFO would block OCIO's read for ever
            return ocio.Config.CreateFromFile(storage.local_path(config))
        with storage.fetched(config, suffix=".ocio") as path:
            return ocio.Config.CreateFromFile(path)
    except (ocio.Exception, ocio.ExceptionMissingFile) as exc:
        raise SpecError("colour.config", f"{config}: not a usable OCIO config ({exc})") from exc
    except storage.StorageError as exc:
        raise SpecError("colour.config", str(exc)) from exc


def find_space(config: ocio.Config, name: str) -> str | None:
    """Canonical name of colour space ``name`` (a name, alias or interop ID) in ``config``."""
    space = config.getColorSpace(name)
    if space is not None:
        return str(space.getName())
    for candidate in config.getColorSpaces():
        if candidate.getInteropID() == name:
            return str(candidate.getName())
    return None


def resolve_colour(request: ColourRequest, url: str, fmt: str, stated: str | None) -> PlateColour:
    """The plate's colour: the spec's ``plate_space`` if given, else what the file states.

    The spec wins over the file (a mis-tagged plate is corrected in the spec);
    TIFF/PNG and other display-referred formats that state nothing are taken to be
    in the model space; EXR, DPX and Cineon must be named.  SpecError names
    ``colour.plate``, ``colour.model`` or ``colour.config``.
    """
    config = load_config(request.config)
    model = find_space(config, request.model_space)
    if model is None:
        raise SpecError("colour.model", f"{request.config} has no colour space {request.model_space!r}")
    if request.plate_space:
        plate = find_space(config, request.plate_space)
        if plate is None:
            raise SpecError("colour.plate", f"{request.config} has no colour space {request.plate_space!r}")
        if stated and find_space(config, stated) != plate:
            log.warning("%s states colour space %r; the spec's %r wins", url, stated, plate)
    elif stated:
        plate = find_space(config, stated)
        if plate is None:
            raise SpecError(
                "colour.plate",
                f"{url} states colour space {stated!r}, which {request.config} does not define; "
                "set colour.plate (or colour.config)",
            )
    elif fmt in SCENE_FORMATS:
        raise SpecError(
            "colour.plate", f"{url} does not name its colour space; set colour.plate (e.g. ACEScg)"
        )
    else:
        plate = model
    return PlateColour(config=request.config, plate_space=plate, model_space=model)


CHROMATICITIES = types.MappingProxyType(
    {
        "lin_ap1_scene": (0.713, 0.293, 0.165, 0.830, 0.128, 0.044, 0.32168, 0.33767),  # ACEScg
        "lin_ap0_scene": (0.7347, 0.2653, 0.0, 1.0, 0.0001, -0.077, 0.32168, 0.33767),  # ACES2065-1
        "lin_rec709_scene": (0.64, 0.33, 0.30, 0.60, 0.15, 0.06, 0.3127, 0.3290),
        "lin_rec2020_scene": (0.708, 0.292, 0.170, 0.797, 0.131, 0.046, 0.3127, 0.3290),
        "lin_p3d65_scene": (0.680, 0.320, 0.265, 0.690, 0.150, 0.060, 0.3127, 0.3290),
    }
)
"""An EXR's ``chromaticities`` (red, green, blue and white x, y) of the scene-linear spaces a pass is
written in, by the colour space's interop ID (OCIO 2.4's IDs, as the built-in configs give them)."""


def pass_space(config: ocio.Config, plate: str) -> str:
    """The colour space a plate's ``face`` pass is written in: the plate's own when it is scene-linear
    (or data), else the config's ``scene_linear`` role (e.g. ACEScg), where a compositor merges; the
    plate's own when the config has no such role (a warning says so)."""
    space = config.getColorSpace(plate)
    if space is None or space.isData() or space.getEncoding() == "scene-linear":
        return plate
    if not config.hasRole(ocio.ROLE_SCENE_LINEAR):
        log.warning("the OCIO config has no scene_linear role: the face pass stays in the plate's %s", plate)
        return plate
    role = config.getColorSpace(ocio.ROLE_SCENE_LINEAR)
    return plate if role is None else str(role.getName())


def chromaticities(config: ocio.Config, space: str) -> tuple[float, ...] | None:
    """The EXR ``chromaticities`` of ``space`` (:data:`CHROMATICITIES`), None when it is not one of those."""
    found = config.getColorSpace(space)
    return None if found is None else CHROMATICITIES.get(str(found.getInteropID()))


class PlateConverter:
    """Converts a plate's RGB to the model space and back with OCIO CPU processors.

    Built once per shot (the processors are made in ``__init__``); thread-safe to
    call from several reader threads.
    """

    def __init__(self, colour: PlateColour, info: SequenceInfo) -> None:
        self.colour = colour
        self.dtype = info.dtype
        self.bits = info.bits
        self.rgb = info.rgb
        self.identity = colour.plate_space == colour.model_space
        config = load_config(colour.config)
        self._forward = config.getProcessor(colour.plate_space, colour.model_space).getDefaultCPUProcessor()
        self._inverse = config.getProcessor(colour.model_space, colour.plate_space).getDefaultCPUProcessor()
        self.pass_space = pass_space(config, colour.plate_space)
        """The colour space of the ``face`` pass (:func:`pass_space`)."""
        self._to_pass = (
            None
            if self.pass_space == colour.plate_space
            else config.getProcessor(colour.plate_space, self.pass_space).getDefaultCPUProcessor()
        )

    def normalise(self, raw: np.ndarray) -> np.ndarray:
        """Plate values as a new C-contiguous float32 array (integer codes divided by their dtype's max)."""
        out = np.array(raw, dtype=np.float32, order="C", copy=True)
        if raw.dtype.kind == "u":
            out /= float(np.iinfo(raw.dtype).max)
        return out

    def to_pass(self, raw: np.ndarray) -> np.ndarray:
        """``(..., 3)`` plate RGB (the raw pixel codes, or float values) -> float32 in the ``face``
        pass's colour space (:attr:`pass_space`: scene-linear)."""
        out = self.normalise(raw)
        if self._to_pass is not None:
            self._to_pass.applyRGB(out)  # in place
        return out

    def to_model(self, rgb: np.ndarray) -> np.ndarray:
        """``(..., 3)`` plate RGB -> float32 model-space RGB.

        Integer input is the raw pixel codes (normalised here); float input is taken
        as already in the plate's normalised scale.
        """
        out = self.normalise(rgb)
        if not self.identity:
            self._forward.applyRGB(out)  # in place
        return out

    def to_plate(self, rgb: np.ndarray) -> np.ndarray:
        """``(..., 3)`` model-space RGB -> float32 plate RGB in the plate's normalised scale."""
        out = np.array(rgb, dtype=np.float32, order="C", copy=True)
        if not self.identity:
            self._inverse.applyRGB(out)  # in place
        return out

    def encode(self, plate: np.ndarray) -> np.ndarray:
        """Normalised plate values -> the plate's pixel dtype.

        Integers are rounded and clipped to the stored code range (``bits``) and
        written the way OIIO reads them into 16-bit containers (bit replication).
        """
        if self.dtype.kind == "f":
            return plate.astype(self.dtype)
        container = self.dtype.itemsize * 8
        bits = min(self.bits, container)
        top = (1 << bits) - 1
        codes = np.clip(np.rint(np.nan_to_num(plate) * top), 0, top).astype(np.uint32)
        if bits < container:
            codes = (codes << (container - bits)) | (codes >> max(0, 2 * bits - container))
        return codes.astype(self.dtype)
