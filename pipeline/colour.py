"""Colour tag names, the output colour policy, and the explicit YUV<->RGB conversion they imply.

FFmpeg stores colour tags as small integers; we keep FFmpeg's own names
(``av_color_*_name``) so tags read from a source can be written back unchanged.
In :class:`~pipeline.video.probe.VideoInfo` ``None`` means "unspecified"; a
:class:`ColourTags` spells it ``"unspecified"``.

Policy (every encoder): the output carries the source's primaries, transfer,
matrix and range exactly, "unspecified" included, unless ``output.colour``
(:class:`OutputColour`) names others; RGB<->YUV conversion always goes through
:func:`sws_matrix` / :func:`sws_range` of the tags in question, so decode and
encode use the same matrix and range.  Where the output keeps the source's pixel
format, matrix and range, untouched pixels keep the source's own samples
(:mod:`pipeline.video.untouched`); elsewhere they come back within about half a level
on average through RGB.  An untagged matrix converts as BT.709 for HD (720 lines and more) and
BT.601 below; an untagged range as limited (full for ``yuvj*`` formats).  What
a codec cannot say is fixed by :func:`written_tags`: ProRes stores limited
range only, and HEVC and DNxHR (and H.264 once it describes colours) always
state a range, so an unspecified one is written ``tv`` (which converts the same).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol

from av.video.reformatter import Colorspace
from pydantic import field_validator

from pipeline.configbase import Frozen

# fmt: off
PRIMARIES: dict[int, str] = {
    1: "bt709", 4: "bt470m", 5: "bt470bg", 6: "smpte170m", 7: "smpte240m", 8: "film",
    9: "bt2020", 10: "smpte428", 11: "smpte431", 12: "smpte432", 22: "ebu3213",
}
TRANSFERS: dict[int, str] = {
    1: "bt709", 4: "gamma22", 5: "gamma28", 6: "smpte170m", 7: "smpte240m", 8: "linear",
    9: "log100", 10: "log316", 11: "iec61966-2-4", 12: "bt1361e", 13: "iec61966-2-1",
    14: "bt2020-10", 15: "bt2020-12", 16: "smpte2084", 17: "smpte428", 18: "arib-std-b67",
}
MATRICES: dict[int, str] = {
    0: "gbr", 1: "bt709", 4: "fcc", 5: "bt470bg", 6: "smpte170m", 7: "smpte240m", 8: "ycgco",
    9: "bt2020nc", 10: "bt2020c", 11: "smpte2085", 12: "chroma-derived-nc", 13: "chroma-derived-c",
    14: "ictcp",
}
RANGES: dict[int, str] = {1: "tv", 2: "pc"}

# swscale only knows a handful of matrices; map every tag to the one it implements.
_SWS_MATRIX: dict[str, str] = {
    "bt709": "ITU709", "fcc": "FCC", "bt470bg": "ITU601", "smpte170m": "ITU601",
    "smpte240m": "SMPTE240M", "bt2020nc": "BT2020", "bt2020c": "BT2020",
}
# fmt: on
UNSPECIFIED = "unspecified"
_UNSPECIFIED_CODE = {"primaries": 2, "transfer": 2, "matrix": 2, "range": 0}
# Matrices an output may be converted to exactly (bt2020c is constant-luminance: swscale has no such matrix).
WRITABLE_MATRICES = tuple(m for m in _SWS_MATRIX if m != "bt2020c")
_LIMITED_ONLY = ("prores", "prores_4444", "prores_4444xq")
_STATES_RANGE = ("hevc", "dnxhr_hqx")


def name_of(table: dict[int, str], value: int | None) -> str | None:
    """FFmpeg's name for a tag value, or None when unspecified/unknown."""
    if value is None:
        return None
    return table.get(int(value))


def code_of(table: dict[int, str], name: str | None, unspecified: int) -> int:
    """The integer tag for ``name`` (``unspecified`` for None or ``"unspecified"``)."""
    if name is None or name == UNSPECIFIED:
        return unspecified
    for code, known in table.items():
        if known == name:
            return code
    raise ValueError(f"unknown colour tag {name!r}")


@dataclass(frozen=True)
class ColourTags:
    """A stream's colour description in FFmpeg's names, ``"unspecified"`` where it says nothing."""

    primaries: str = UNSPECIFIED
    transfer: str = UNSPECIFIED
    matrix: str = UNSPECIFIED
    range: str = UNSPECIFIED

    @classmethod
    def of(
        cls, primaries: str | None, transfer: str | None, matrix: str | None, colour_range: str | None
    ) -> ColourTags:
        """Tags from :class:`~pipeline.video.probe.VideoInfo`'s fields (None: unspecified)."""
        return cls(
            primaries or UNSPECIFIED,
            transfer or UNSPECIFIED,
            matrix or UNSPECIFIED,
            colour_range or UNSPECIFIED,
        )

    @classmethod
    def from_codes(cls, primaries: int, transfer: int, matrix: int, colour_range: int) -> ColourTags:
        """Tags from FFmpeg's integers (values it has no name for count as unspecified)."""
        return cls.of(
            name_of(PRIMARIES, primaries),
            name_of(TRANSFERS, transfer),
            name_of(MATRICES, matrix),
            name_of(RANGES, colour_range),
        )

    def codes(self) -> tuple[int, int, int, int]:
        """FFmpeg's integers: primaries, transfer, matrix, range."""
        return (
            code_of(PRIMARIES, self.primaries, _UNSPECIFIED_CODE["primaries"]),
            code_of(TRANSFERS, self.transfer, _UNSPECIFIED_CODE["transfer"]),
            code_of(MATRICES, self.matrix, _UNSPECIFIED_CODE["matrix"]),
            code_of(RANGES, self.range, _UNSPECIFIED_CODE["range"]),
        )

    def describes_colour(self) -> bool:
        """Whether primaries, transfer or matrix is specified."""
        return any(v != UNSPECIFIED for v in (self.primaries, self.transfer, self.matrix))

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


class Tagged(Protocol):
    """What describes a source's colour (:class:`~pipeline.video.probe.VideoInfo` does)."""

    @property
    def color_primaries(self) -> str | None: ...
    @property
    def color_trc(self) -> str | None: ...
    @property
    def colorspace(self) -> str | None: ...
    @property
    def color_range(self) -> str | None: ...
    @property
    def pix_fmt(self) -> str: ...


def source_tags(info: Tagged) -> ColourTags:
    """A source's tags; a ``yuvj*`` format without a range tag is full range by its format."""
    colour_range = info.color_range
    if colour_range is None and info.pix_fmt.startswith("yuvj"):
        colour_range = "pc"
    return ColourTags.of(info.color_primaries, info.color_trc, info.colorspace, colour_range)


class OutputColour(Frozen):
    """``output.colour``: tags to write instead of the source's (a field left out keeps the source's).

    Names are FFmpeg's (``bt709``, ``smpte2084``, ``bt2020nc``, ``tv``...) or
    ``unspecified``.  Only the description and the YUV encoding change: the RGB
    pixels are converted with the written matrix and range, never re-graded
    between primaries or transfers.
    """

    primaries: str | None = None
    """Colour primaries to write (``bt709``, ``bt2020``...); None: the source's."""
    transfer: str | None = None
    """Transfer characteristics to write (``bt709``, ``smpte2084``, ``arib-std-b67``...); None: the source's."""
    matrix: str | None = None
    """YUV matrix to encode with and write (``bt709``, ``bt2020nc``...); None: the source's."""
    range: str | None = None
    """``tv`` (limited) or ``pc`` (full) range to encode with and write; None: the source's."""

    @field_validator("primaries")
    @classmethod
    def _primaries(cls, value: str | None) -> str | None:
        return _known(value, tuple(PRIMARIES.values()), "primaries")

    @field_validator("transfer")
    @classmethod
    def _transfer(cls, value: str | None) -> str | None:
        return _known(value, tuple(TRANSFERS.values()), "transfer")

    @field_validator("matrix")
    @classmethod
    def _matrix(cls, value: str | None) -> str | None:
        if value in MATRICES.values() and value not in WRITABLE_MATRICES:
            raise ValueError(
                f"{value!r} cannot be converted to (swscale has no such matrix); "
                f"use one of {', '.join(WRITABLE_MATRICES)} or {UNSPECIFIED}"
            )
        return _known(value, WRITABLE_MATRICES, "matrix")

    @field_validator("range")
    @classmethod
    def _range(cls, value: str | None) -> str | None:
        return _known(value, tuple(RANGES.values()), "range")

    def over(self, tags: ColourTags) -> ColourTags:
        """``tags`` with the fields this block names replaced."""
        return ColourTags(
            self.primaries or tags.primaries,
            self.transfer or tags.transfer,
            self.matrix or tags.matrix,
            self.range or tags.range,
        )

    def range_problem(self, codec: str) -> str | None:
        """Why ``codec`` cannot write the range asked for (None: it can, or none is asked)."""
        if self.range == "pc" and codec in _LIMITED_ONLY:
            return f"{codec} stores limited range only; use tv"
        if self.range == UNSPECIFIED and (codec in _LIMITED_ONLY or codec in _STATES_RANGE):
            return f"{codec} always states a range; use tv or pc"
        return None


def _known(value: str | None, names: tuple[str, ...], what: str) -> str | None:
    if value is None or value == UNSPECIFIED or value in names:
        return value
    raise ValueError(
        f"{value!r} is not an FFmpeg {what} name; use one of {', '.join(names)} or {UNSPECIFIED}"
    )


def written_tags(codec: str, tags: ColourTags) -> ColourTags:
    """What an output of ``codec`` asked to carry ``tags`` actually says (see the module docstring)."""
    colour_range = tags.range
    if (
        codec in _LIMITED_ONLY
        or colour_range == UNSPECIFIED
        and (codec in _STATES_RANGE or tags.describes_colour())
    ):
        colour_range = "tv"
    return ColourTags(tags.primaries, tags.transfer, tags.matrix, colour_range)


def output_tags(codec: str, info: Tagged, override: OutputColour | None = None) -> ColourTags:
    """The tags an output of ``codec`` made from ``info`` carries: the source's, or ``override``'s."""
    tags = source_tags(info)
    return written_tags(codec, override.over(tags) if override is not None else tags)


def mux_options(container: str, tags: ColourTags) -> dict[str, str]:
    """MOV/MP4 muxer options that write a ``colr`` box whenever the tags describe any colour.

    FFmpeg writes one by itself only when primaries, transfer and matrix are all
    given; with none of them, no box is the file's way of saying unspecified (an
    MP4 box would also state a range, which an unspecified one does not have).
    """
    if container in ("mov", "mp4") and tags.describes_colour():
        return {"movflags": "+write_colr"}
    return {}


def conversion(tags: ColourTags, height: int, pix_fmt: str) -> tuple[Colorspace, str]:
    """The swscale matrix and range (``"JPEG"``/``"MPEG"``) that convert YUV described by ``tags``."""
    return sws_matrix(tags.matrix, height), sws_range(tags.range, pix_fmt)


def sws_matrix(colorspace: str | None, height: int) -> Colorspace:
    """The swscale matrix used to convert this source between YUV and RGB.

    Untagged sources follow the common convention (BT.709 for HD, BT.601 for SD)
    and the same rule is used when decoding and encoding, so a round trip is exact
    up to quantisation whatever the tag says.
    """
    if colorspace in _SWS_MATRIX:
        return Colorspace[_SWS_MATRIX[colorspace]]
    return Colorspace.ITU709 if height >= 720 else Colorspace.ITU601


def sws_range(color_range: str | None, pix_fmt: str) -> str:
    """``"JPEG"`` (full) or ``"MPEG"`` (limited) range for this source."""
    if color_range == "pc" or (color_range in (None, UNSPECIFIED) and pix_fmt.startswith("yuvj")):
        return "JPEG"
    return "MPEG"
