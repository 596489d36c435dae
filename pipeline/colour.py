"""Colour tag names and the explicit YUV<->RGB conversion parameters they imply.

FFmpeg stores colour tags as small integers; we keep FFmpeg's own names
(``av_color_*_name``) so tags read from a source can be written back unchanged.
``None`` means "unspecified".  Conversion between YUV and RGB always goes through
:func:`sws_matrix` / :func:`sws_range` so that decode and encode use the same
matrix (never swscale's silent BT.601 default for an HD source).
"""

from __future__ import annotations

from av.video.reformatter import Colorspace

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


def name_of(table: dict[int, str], value: int | None) -> str | None:
    """FFmpeg's name for a tag value, or None when unspecified/unknown."""
    if value is None:
        return None
    return table.get(int(value))


def code_of(table: dict[int, str], name: str | None, unspecified: int) -> int:
    """The integer tag for ``name`` (``unspecified`` for None)."""
    if name is None:
        return unspecified
    for code, known in table.items():
        if known == name:
            return code
    raise ValueError(f"unknown colour tag {name!r}")


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
    if color_range == "pc" or (color_range is None and pix_fmt.startswith("yuvj")):
        return "JPEG"
    return "MPEG"
