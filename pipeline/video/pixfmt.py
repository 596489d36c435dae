"""The pixel format a segment is encoded in: the source's bit depth and chroma subsampling where the
codec allows it (see :mod:`pipeline.video.encode`)."""

from __future__ import annotations

from pipeline.video.decode import has_alpha
from pipeline.video.probe import VideoInfo

PRORES_444 = {"prores_4444": "4444", "prores_4444xq": "4444xq"}
"""prores_ks profile names of the 4:4:4 ProRes codecs (``prores`` itself picks 422 HQ or 4444)."""


def chroma_shift(pix_fmt: str) -> tuple[int, int]:
    """log2 of the horizontal and vertical chroma subsampling of a YUV format."""
    if "420" in pix_fmt or pix_fmt in ("nv12", "nv21", "p010le", "p016le"):
        return 1, 1
    if "422" in pix_fmt or pix_fmt in ("nv16", "p210le"):
        return 1, 0
    return 0, 0


def subsampling(pix_fmt: str) -> str:
    x, y = chroma_shift(pix_fmt)
    return {(1, 1): "420", (1, 0): "422"}.get((x, y), "444")


def pick_pix_fmt(codec: str, info: VideoInfo, hardware_encoder: bool) -> str | None:
    """The segment pixel format keeping the source's depth and subsampling (None: this encoder cannot)."""
    deep = info.bit_depth > 8
    sub = subsampling(info.pix_fmt) if info.pix_fmt.startswith(("yuv", "nv", "p0")) else "444"
    if codec == "prores":
        return "yuv444p10le" if sub == "444" else "yuv422p10le"
    if codec in PRORES_444:
        return "yuva444p10le" if has_alpha(info.pix_fmt) else "yuv444p10le"
    if codec == "dnxhr_hqx":
        return "yuv422p10le"
    if hardware_encoder:
        if sub == "422":
            return None  # NVENC (before Blackwell) has no 4:2:2; the software encoder keeps it
        if sub == "444":
            return "yuv444p16le" if deep else "yuv444p"
        return "p010le" if deep else "yuv420p"
    return f"yuv{sub}p10le" if deep else f"yuv{sub}p"
