"""Plain records of film plates: a parsed sequence pattern, colour requests and a probed
sequence's description.

They live in ``pipeline.video`` (not ``pipeline.plates``) and import nothing of either, so
that ``VideoInfo`` can carry a ``SequenceInfo`` while ``pipeline.plates`` reads frames into
``pipeline.video`` types: plates import video, never the reverse.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_CONFIG = "ocio://default"
DEFAULT_MODEL_SPACE = "sRGB Encoded Rec.709 (sRGB)"


@dataclass(frozen=True)
class SequencePattern:
    """A parsed sequence URL: ``directory/head<number>tail``, numbers zero-padded to ``padding``."""

    url: str
    directory: str
    head: str
    tail: str
    padding: int

    @property
    def ext(self) -> str:
        """File extension, lower case, without the dot (``exr``)."""
        return self.tail.rpartition(".")[2].lower()

    def frame_name(self, number: int) -> str:
        return f"{self.head}{number:0{self.padding}d}{self.tail}"

    def frame_url(self, number: int) -> str:
        return f"{self.directory}/{self.frame_name(number)}"


@dataclass(frozen=True)
class ColourRequest:
    """What the job spec asks for; ``plate_space`` None means "what the file states"."""

    config: str = DEFAULT_CONFIG
    plate_space: str | None = None
    model_space: str = DEFAULT_MODEL_SPACE


@dataclass(frozen=True)
class PlateColour:
    """Resolved colour of a plate: OCIO config, the plate's space, the models' space.

    Names are the config's canonical colour space names (aliases resolved).
    """

    config: str = DEFAULT_CONFIG
    plate_space: str = ""
    model_space: str = DEFAULT_MODEL_SPACE


@dataclass(frozen=True)
class SequenceInfo:
    """What a probe learnt about an image sequence, beyond ``VideoInfo``.

    ``channels`` are all channel names in file order; ``rgb`` the indices of R, G, B
    among them.  ``pixel_type`` is the type of every channel when they agree, else
    ``"mixed"``; ``channel_types`` always has one entry per channel.  ``bits`` is the
    bits per sample as stored (10 for 10-bit DPX read into 16-bit containers).
    ``sizes`` and ``stamps`` are per frame, in ``numbers`` order (for fingerprints).
    """

    pattern: SequencePattern
    numbers: tuple[int, ...]
    format: str
    channels: tuple[str, ...]
    rgb: tuple[int, int, int]
    pixel_type: str
    channel_types: tuple[str, ...]
    bits: int
    compression: str | None
    colour: PlateColour
    sizes: tuple[int, ...]
    stamps: tuple[str, ...]

    @property
    def dtype(self) -> np.dtype:
        """The dtype frames of this sequence are read into (see :func:`pixel_dtype`)."""
        dtype = pixel_dtype(self.channel_types)
        if dtype is None:
            raise ValueError(f"{self.pattern.url}: channel types {self.channel_types} have no exact dtype")
        return dtype


def pixel_dtype(channel_types: tuple[str, ...]) -> np.dtype | None:
    """The numpy dtype that holds every channel of these OIIO types exactly, or None.

    All half: float16; half and float: float32; all uint16 / all uint8: themselves.
    Anything else (uint32 IDs, integers mixed with floats) has no exact common dtype.
    """
    kinds = set(channel_types)
    if kinds == {"half"}:
        return np.dtype(np.float16)
    if kinds and kinds <= {"half", "float"}:
        return np.dtype(np.float32)
    if kinds in ({"uint16"}, {"uint8"}):
        return np.dtype(kinds.pop())
    return None
