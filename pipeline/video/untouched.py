"""Untouched pixels written as the source's own YUV samples.

A rendered frame is RGB; converting it back to YUV costs every pixel a rounding:
8-bit YUV to 8-bit RGB and back moves pixels the render never touched by one to
three levels (swscale's 8-bit conversions truncate; full range has no spare
precision at all).  A segment written in the source's own pixel format, matrix
and range does not need that round trip outside the faces: the decoded source
frame (:attr:`pipeline.video.decode.Frame.yuv`) is converted again exactly as the
decoder did, every pixel whose RGB is unchanged is marked, and the converted
frame takes the source's samples there, luma per pixel and chroma per
subsampled block whose pixels are all unchanged.  Untouched pixels then reach
the encoder bit-exact (a lossless output decodes equal to the source there);
a chroma block that straddles a face edge takes the rendered value.

The comparison is against a fresh conversion of the source picture, never
against the array the renderer was handed, so a renderer that paints in place
cannot make its own pixels look untouched.
"""

from __future__ import annotations

import av
import numpy as np

from pipeline.video.decode import DecodeConversion


def keeps_samples(conversion: DecodeConversion, pix_fmt: str, matrix: object, colour_range: str) -> bool:
    """Whether a writer of ``pix_fmt`` converting with ``matrix``/``colour_range`` may keep the source's
    samples: the same planar YUV layout without alpha, the same matrix and range.

    Only then: converting the samples YUV to YUV instead (8 to 10 bit, 4:2:0 to 4:2:2) measured
    worse than the round trip through RGB (swscale: 1.6-2.3 levels on average against 0.8)."""
    return (
        not conversion.alpha
        and planar_yuv(pix_fmt)
        and same_layout(pix_fmt, conversion.pix_fmt)
        and matrix == conversion.matrix
        and colour_range == conversion.colour_range
    )


def planar_yuv(pix_fmt: str) -> bool:
    """Whether ``pix_fmt`` stores Y, U and V in three planes (``yuvj*`` included; no alpha)."""
    return pix_fmt.startswith("yuv") and not pix_fmt.startswith("yuva")


def same_layout(a: str, b: str) -> bool:
    """Whether two pixel formats store samples alike (``yuvj420p`` is ``yuv420p`` tagged full range)."""
    return a.replace("yuvj", "yuv", 1) == b.replace("yuvj", "yuv", 1)


def unchanged_mask(rgb: np.ndarray, source: av.VideoFrame, conversion: DecodeConversion) -> np.ndarray:
    """``H x W`` booleans: the pixels of ``rgb`` equal to ``source`` decoded as the decoder does."""
    same = rgb == conversion.to_rgb(source)
    # ``all(axis=2)`` over three channels costs ~100 ms per 1080p frame; the channel ANDs ~3 ms.
    return np.asarray(same[..., 0] & same[..., 1] & same[..., 2])


def keep_source_samples(out: av.VideoFrame, source: av.VideoFrame, unchanged: np.ndarray) -> None:
    """Overwrite ``out``'s samples with ``source``'s wherever every pixel they cover is ``unchanged``."""
    if not same_layout(out.format.name, source.format.name) or (out.width, out.height) != (
        source.width,
        source.height,
    ):
        raise ValueError(
            f"cannot keep {source.format.name} {source.width}x{source.height} samples in "
            f"{out.format.name} {out.width}x{out.height}"
        )
    dtype = np.uint16 if out.format.components[0].bits > 8 else np.uint8
    height, width = unchanged.shape
    changed_rows = np.flatnonzero(~unchanged.all(axis=1))
    box = None
    if changed_rows.size:
        changed_cols = np.flatnonzero(~unchanged[changed_rows[0] : changed_rows[-1] + 1].all(axis=0))
        box = (changed_rows[0], changed_rows[-1] + 1, changed_cols[0], changed_cols[-1] + 1)
    for dst_plane, src_plane in zip(out.planes, source.planes, strict=True):
        dst, src = _samples(dst_plane, dtype), _samples(src_plane, dtype)
        if box is None:
            dst[...] = src
            continue
        # The source everywhere, then the converted samples back inside the changed box where needed.
        fy, fx = -(-height // dst.shape[0]), -(-width // dst.shape[1])
        y0, y1, x0, x1 = box[0] // fy, -(-box[1] // fy), box[2] // fx, -(-box[3] // fx)
        inside = (slice(y0, y1), slice(x0, x1))
        converted = dst[inside].copy()
        keep = _per_sample(unchanged[y0 * fy : y1 * fy, x0 * fx : x1 * fx], converted.shape, fy, fx)
        dst[...] = src
        np.copyto(dst[inside], converted, where=~keep)


def _samples(plane: av.video.plane.VideoPlane, dtype: type[np.generic]) -> np.ndarray:
    """A writable view of ``plane``'s samples (rows without their padding)."""
    itemsize = np.dtype(dtype).itemsize
    rows = np.frombuffer(memoryview(plane), dtype=dtype).reshape(plane.height, plane.line_size // itemsize)
    return rows[:, : plane.width]


def _per_sample(unchanged: np.ndarray, shape: tuple[int, ...], fy: int, fx: int) -> np.ndarray:
    """``unchanged`` reduced by ``fy`` x ``fx`` blocks to ``shape``: a sample is kept when all its pixels are
    (pixels past the frame's edge count as unchanged)."""
    rows, cols = shape
    if (fy, fx) == (1, 1):
        return unchanged
    padded = np.ones((rows * fy, cols * fx), dtype=bool)
    padded[: unchanged.shape[0], : unchanged.shape[1]] = unchanged
    keep = padded[::fy, ::fx].copy()  # strided ANDs: a reduction over small axes is ~30x slower
    for dy in range(fy):
        for dx in range(fx):
            if dy or dx:
                keep &= padded[dy::fy, dx::fx]
    return keep
