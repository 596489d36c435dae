"""Paste an aligned crop back into a frame, face masks, blending and colour matching.

Masks of template-aligned crops: :func:`face_ellipse_mask` (brows to chin, the colour
statistics' region) and :func:`inner_face_region` (eyes, nose, mouth and inner brows, the
built-in swapper's); :func:`multiband_blend` blends one crop into another band by band.

Paste-back warps the crop (and its mask) with the inverse affine into the region of
interest only: the crop's footprint in the frame, clipped to the face box grown by a
margin.  A full-frame ``warpAffine`` per face would cost tens of ms at 1080p; the ROI
costs well under one.  Blending runs in float32 on the ROI and is written back in the
frame's own dtype (uint8 or uint16), so 10-bit sources keep their depth.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from pipeline.geometry.align import Template, invert_affine, template_points


def feather_mask(crop_size: int, *, erode: float, blur: float) -> np.ndarray:
    """A (S, S) float32 mask: 1 inside, 0 at and near the crop border, no edge between.

    ``erode`` and ``blur`` are fractions of the crop size: the mask is 0 within
    ``erode*S`` px of the border, then rises along a smoothstep over ``2*blur*S`` px
    (a blur of sigma ``blur*S`` spans about that).  It is exactly 0 on the border, so a
    paste never leaves a step where the crop ends.
    """
    centres = np.arange(crop_size, dtype=np.float64) + 0.5
    distance = np.minimum(centres, crop_size - centres)  # to the nearest border, per axis
    start, width = max(erode, 0.0) * crop_size, 2.0 * max(blur, 0.0) * crop_size
    if width > 0:
        t = np.clip((distance - start) / width, 0.0, 1.0)
        ramp = t * t * (3.0 - 2.0 * t)
    else:
        ramp = (distance > start).astype(np.float64)
    return np.outer(ramp, ramp).astype(np.float32)


def face_ellipse_mask(crop_size: int, *, blur: float = 0.06) -> np.ndarray:
    """Feathered ellipse over the inner face (brows to chin) in ArcFace-template crops."""
    mask: np.ndarray = np.zeros((crop_size, crop_size), dtype=np.float32)
    s = crop_size / 128.0  # geometry below is in 128 px ArcFace-template units
    # brows (y ~ 38) to chin (y ~ 118), cheek to cheek; eyes at y 51.6, mouth at y 92
    center = (round(64 * s), round(77 * s))
    axes = (round(38 * s), round(43 * s))
    cv2.ellipse(mask, center, axes, 0, 0, 360, 1.0, thickness=-1)
    sigma = blur * crop_size
    if sigma > 0:
        mask = cv2.GaussianBlur(mask, (0, 0), sigmaX=sigma, sigmaY=sigma)
        # keep the blur inside the ellipse's area: shrink then renormalise the peak
        mask = np.clip((mask - 0.1) / 0.8, 0.0, 1.0)
    return mask


INNER_FACE_OUTLINE = (
    (0, -0.45, -0.30),
    (0, 0.0, -0.50),
    (1, 0.0, -0.50),
    (1, 0.45, -0.30),
    (1, 0.55, 0.10),
    (1, 0.50, 0.45),
    (4, 0.40, 0.0),
    (4, 0.0, 0.50),
    (3, 0.0, 0.50),
    (3, -0.40, 0.0),
    (0, -0.50, 0.45),
    (0, -0.55, 0.10),
)
"""The inner face's outline: (template point, dx, dy), offsets in eye distances from one of
the five ArcFace points (0/1 the eyes, 3/4 the mouth corners).  Its convex hull spans the
brows up to half an eye distance above the eyes (cut off 0.45 beyond each eye's centre,
before the brows' outer ends), the temples and cheeks 0.55 beside the eyes, the mouth with
0.4 to spare on each side, and down to half an eye distance below the mouth: the chin's
top, not the jaw line, not the hair."""


def inner_face_region(crop_size: int, template: Template = "arcface") -> np.ndarray:
    """(S, S) bool: the inner face (eyes, nose, mouth, inner brows) of a ``template`` crop.

    The convex hull of :data:`INNER_FACE_OUTLINE` around the template's five points at
    ``crop_size``: every aligned face has its eyes, nose and mouth inside it, and its
    hair, brow ends and jaw line outside.
    """
    points = template_points(crop_size, template)
    eyes = float(np.linalg.norm(points[1] - points[0]))
    outline = np.array([points[k] + (dx * eyes, dy * eyes) for k, dx, dy in INNER_FACE_OUTLINE])
    hull = cv2.convexHull(outline.astype(np.float32)).reshape(-1, 2)
    region = np.zeros((crop_size, crop_size), np.uint8)
    cv2.fillConvexPoly(region, np.round(hull * 16.0).astype(np.int32), 1, lineType=cv2.LINE_8, shift=4)
    return region.astype(bool)


def soft_region(region: np.ndarray, sigma: float) -> np.ndarray:
    """(S, S) float32 in [0, 1]: ``region`` eroded by 2 ``sigma`` then blurred by ``sigma``.

    1 inside, falling smoothly to about 0.02 at the region's edge and exactly 0 outside it.
    """
    mask = region.astype(np.uint8)
    if sigma <= 0:
        return mask.astype(np.float32)
    radius = int(np.ceil(2.0 * sigma))
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))
    core = cv2.erode(mask, kernel).astype(np.float32)
    soft = cv2.GaussianBlur(core, (0, 0), sigmaX=sigma, sigmaY=sigma)
    soft[~region] = 0.0
    return np.clip(soft, 0.0, 1.0)


def gaussian_pyramid(image: np.ndarray, levels: int) -> list[np.ndarray]:
    """``image`` (float32) and ``levels`` halvings of it (``cv2.pyrDown``)."""
    pyramid = [image]
    for _ in range(levels):
        pyramid.append(cv2.pyrDown(pyramid[-1]))
    return pyramid


def multiband_blend(src: np.ndarray, dst: np.ndarray, weights: Sequence[np.ndarray]) -> np.ndarray:
    """Laplacian-pyramid blend of ``src`` over ``dst`` (float32, same shape), float32 out.

    ``weights``: the Gaussian pyramid of the blend weight (:func:`gaussian_pyramid`, one
    level more than the bands): each band of ``src`` is weighted by its level, so fine
    detail switches over within a few pixels (no doubled edges) and tone over a wide
    band (no step in colour).  Pure OpenCV arithmetic: the same bytes on every run.
    """
    levels = len(weights) - 1
    src_pyr, dst_pyr = gaussian_pyramid(src, levels), gaussian_pyramid(dst, levels)
    blended = []
    for k in range(levels + 1):
        if k < levels:
            size = src_pyr[k].shape[1::-1]
            s = src_pyr[k] - cv2.pyrUp(src_pyr[k + 1], dstsize=size)
            d = dst_pyr[k] - cv2.pyrUp(dst_pyr[k + 1], dstsize=size)
        else:
            s, d = src_pyr[k], dst_pyr[k]
        w = weights[k][..., None] if s.ndim == 3 else weights[k]
        blended.append(d + w * (s - d))
    image = blended[-1]
    for band in reversed(blended[:-1]):
        image = cv2.pyrUp(image, dstsize=band.shape[1::-1]) + band
    return image


def match_color(src: np.ndarray, ref: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """``src`` (S, S, 3) with the per-channel mean and std of ``ref`` inside ``mask``.

    ``mask`` (S, S) selects the pixels whose statistics are compared (> 0.5); the whole
    crop is recoloured.  Any numeric dtype; returns float32 in the same value scale
    (the caller rounds and clips).
    """
    src_f = np.asarray(src, dtype=np.float32)
    ref_f = np.asarray(ref, dtype=np.float32)
    select = None if mask is None else (np.asarray(mask) > 0.5).astype(np.uint8)
    s_mean, s_std = (v.reshape(3) for v in cv2.meanStdDev(src_f, mask=select))
    r_mean, r_std = (v.reshape(3) for v in cv2.meanStdDev(ref_f, mask=select))
    # cap the gain: a flat source patch must not be blown up into noise
    gain = np.clip(r_std / np.maximum(s_std, 1e-3), 0.5, 2.0)
    matrix = np.concatenate([np.diag(gain), (r_mean - s_mean * gain)[:, None]], axis=1)
    return cv2.transform(src_f, matrix)


PASTE_BOX_MARGIN = 0.25
"""Paste-back never touches pixels beyond the face box grown by this fraction of its size per side."""
PASTE_BOX_FADE = 0.1
"""Where that limit cuts a paste, the paste fades out over this fraction of the box size
before it (inside the margin, never over the face): a model that also changes pixels
around the face (an enhancer restoring its whole 512 px crop) leaves no hard-edged
rectangle there."""


def _box_limits(box: np.ndarray, margin: float) -> tuple[int, int, int, int]:
    """(left, top, right, bottom): the face box grown by ``margin`` of its size per side, in whole px."""
    bx1, by1, bx2, by2 = (float(v) for v in box)
    mx, my = (bx2 - bx1) * margin, (by2 - by1) * margin
    return int(np.floor(bx1 - mx)), int(np.floor(by1 - my)), int(np.ceil(bx2 + mx)), int(np.ceil(by2 + my))


def paste_region(
    affine: np.ndarray,
    crop_size: int,
    frame_hw: tuple[int, int],
    box: np.ndarray | None,
    margin: float = PASTE_BOX_MARGIN,
) -> tuple[int, int, int, int] | None:
    """(x0, y0, x1, y1) that a crop aligned by ``affine`` may change, or None if empty.

    The crop's footprint in the frame, clipped to ``box`` grown by ``margin`` per side
    and to the frame: the pixels :func:`paste_back` may change.
    """
    height, width = frame_hw
    inverse = invert_affine(affine)
    corners = np.array([[0, 0], [crop_size, 0], [0, crop_size], [crop_size, crop_size]], dtype=np.float64)
    mapped = corners @ inverse[:, :2].T + inverse[:, 2]
    x0, y0 = (int(v) for v in np.floor(mapped.min(axis=0)))
    x1, y1 = (int(v) + 1 for v in np.ceil(mapped.max(axis=0)))
    if box is not None:
        left, top, right, bottom = _box_limits(box, margin)
        x0, y0, x1, y1 = max(x0, left), max(y0, top), min(x1, right), min(y1, bottom)
    x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, width), min(y1, height)
    if x1 <= x0 or y1 <= y0:
        return None
    return x0, y0, x1, y1


def box_fade(
    region: tuple[int, int, int, int],
    frame_hw: tuple[int, int],
    box: np.ndarray | None,
    margin: float = PASTE_BOX_MARGIN,
    fade: float = PASTE_BOX_FADE,
) -> tuple[np.ndarray, np.ndarray]:
    """Row and column weights (H,), (W,) of ``region`` that fade a paste to 0 at its box-cut edges.

    Only the sides where the box margin (not the crop's own footprint, whose feather is
    already 0 there, and not the frame border) limits the region fade.
    """
    x0, y0, x1, y1 = region
    height, width = frame_hw
    rows = np.ones(y1 - y0, np.float32)
    cols = np.ones(x1 - x0, np.float32)
    if box is None:
        return rows, cols
    left, top, right, bottom = _box_limits(box, margin)
    bx1, by1, bx2, by2 = (float(v) for v in box)

    def ramp(n: int, span: float, cut_low: bool, cut_high: bool) -> np.ndarray:
        centres = np.arange(n, dtype=np.float64) + 0.5
        weight = np.ones(n, np.float64)
        if cut_low:
            weight = np.minimum(weight, centres / span)
        if cut_high:
            weight = np.minimum(weight, (n - centres) / span)
        return np.clip(weight, 0.0, 1.0).astype(np.float32)

    cols = ramp(x1 - x0, max(1.0, (bx2 - bx1) * fade), x0 == left > 0, x1 == right < width)
    rows = ramp(y1 - y0, max(1.0, (by2 - by1) * fade), y0 == top > 0, y1 == bottom < height)
    return rows, cols


def paste_back(
    frame: np.ndarray,
    crop: np.ndarray,
    affine: np.ndarray,
    *,
    mask: np.ndarray | None = None,
    erode: float = 0.05,
    blur: float = 0.08,
    box: np.ndarray | None = None,
    box_margin: float = PASTE_BOX_MARGIN,
    matte: np.ndarray | None = None,
) -> np.ndarray:
    """Blend ``crop`` (aligned with ``affine``: frame -> crop) into ``frame`` in place.

    ``crop`` is (S, S, 3) in the frame's value scale (any dtype; float keeps sub-integer
    precision).  ``mask`` (S, S) in [0, 1] multiplies the border feather (occlusion or
    face-shape masks).  When ``box`` (x1, y1, x2, y2) is given, nothing outside the box
    grown by ``box_margin`` of its size on each side is touched, and the paste fades
    out before that limit (:func:`box_fade`).  Returns ``frame``.

    ``matte`` (H, W) float32 in [0, 1], when given, takes this paste's per-pixel alpha
    ``a`` (the one the blend used) in place, composed "over" what it holds:
    ``matte + a * (1 - matte)``, i.e. ``1 - (1 - matte) * (1 - a)``.  Handed to
    successive pastes it holds the exact blend mask of all of them (see :func:`accumulate_matte`).
    """
    if matte is not None:
        check_matte(matte, frame.shape[:2])
    size = crop.shape[0]
    region = paste_region(affine, size, frame.shape[:2], box, box_margin)
    if region is None:
        return frame
    x0, y0, x1, y1 = region
    inverse = invert_affine(affine)

    alpha = feather_mask(size, erode=erode, blur=blur)
    if mask is not None:
        alpha = alpha * np.asarray(mask, dtype=np.float32)
    roi_inverse = inverse.copy()
    roi_inverse[:, 2] -= (x0, y0)
    roi_size = (x1 - x0, y1 - y0)
    warped = cv2.warpAffine(
        np.asarray(crop, dtype=np.float32),
        roi_inverse,
        roi_size,
        flags=cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_REPLICATE,
    )
    warped_alpha = cv2.warpAffine(alpha, roi_inverse, roi_size, flags=cv2.INTER_LINEAR, borderValue=0.0)
    rows, cols = box_fade(region, frame.shape[:2], box, box_margin)
    warped_alpha *= rows[:, None] * cols[None, :]
    if warped.ndim == 2:
        warped = warped[..., None]
    roi = frame[y0:y1, x0:x1]
    a = warped_alpha[..., None]
    blended = roi.astype(np.float32) * (1.0 - a) + warped * a
    top = float(np.iinfo(frame.dtype).max) if np.issubdtype(frame.dtype, np.integer) else None
    if top is not None:
        blended = np.clip(np.rint(blended), 0.0, top)
    frame[y0:y1, x0:x1] = blended.astype(frame.dtype)
    if matte is not None:
        accumulate_matte(matte[y0:y1, x0:x1], warped_alpha)
    return frame


def accumulate_matte(matte: np.ndarray, alpha: np.ndarray) -> None:
    """``matte`` (in place) composed with one more paste's ``alpha``: ``1 - (1 - matte) * (1 - alpha)``.

    Written as ``matte + alpha * (1 - matte)``, the same value, because on a zero matte
    it gives ``alpha`` bit for bit: a region pasted once has the very alpha its blend
    used.  Stays in [0, 1] when both are.
    """
    matte += alpha * (1.0 - matte)


def check_matte(matte: np.ndarray, frame_hw: tuple[int, ...]) -> None:
    """ValueError unless ``matte`` is a float32 array of the frame's height and width."""
    if matte.dtype != np.float32 or matte.shape != tuple(frame_hw):
        raise ValueError(
            f"matte must be float32 {tuple(frame_hw)} like the frame, got {matte.dtype} {matte.shape}"
        )
