"""Face alignment: five landmarks -> similarity transform -> square crop.

Templates:

- ``"arcface"``: the insightface 5-point template at 112 px.  For crop sizes that are
  multiples of 128 (inswapper_128, 256 ...) it is scaled by ``size/128`` and shifted
  right by ``8*size/128`` px, exactly like insightface's ``estimate_norm``; for other
  sizes it is scaled by ``size/112``.
- ``"ffhq"``: the FFHQ template used by GFPGAN (normalised coordinates times the size).

The transform is a least-squares similarity (Umeyama), which is what
``skimage.transform.SimilarityTransform.estimate`` computes for insightface.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import cv2
import numpy as np

Template = Literal["arcface", "ffhq"]

#: insightface ``arcface_dst``: left eye, right eye, nose, left mouth, right mouth (112 px).
ARCFACE_112 = np.array(
    [
        [38.2946, 51.6963],
        [73.5318, 51.5014],
        [56.0252, 71.7366],
        [41.5493, 92.3655],
        [70.7299, 92.2041],
    ],
    dtype=np.float64,
)

#: FFHQ alignment template (GFPGAN / FaceFusion ``ffhq_512``), normalised to [0, 1].
FFHQ_UNIT = np.array(
    [
        [0.37691676, 0.46864664],
        [0.62285697, 0.46912813],
        [0.50123859, 0.61331904],
        [0.39308822, 0.72541100],
        [0.61150205, 0.72490465],
    ],
    dtype=np.float64,
)


def template_points(crop_size: int, template: Template = "arcface") -> np.ndarray:
    """The five template points (5, 2) for a square crop of ``crop_size`` px."""
    if crop_size <= 0:
        raise ValueError(f"crop_size must be positive, got {crop_size}")
    if template == "ffhq":
        return FFHQ_UNIT * crop_size
    if template != "arcface":
        raise ValueError(f"template must be 'arcface' or 'ffhq', got {template!r}")
    if crop_size % 112 == 0:
        return ARCFACE_112 * (crop_size / 112.0)
    ratio = crop_size / 128.0
    points = ARCFACE_112 * ratio
    points[:, 0] += 8.0 * ratio
    return points


def umeyama_similarity(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Least-squares similarity (rotation, uniform scale, translation) src -> dst, (2, 3)."""
    src = np.asarray(src, dtype=np.float64)
    dst = np.asarray(dst, dtype=np.float64)
    src_mean, dst_mean = src.mean(axis=0), dst.mean(axis=0)
    src_c, dst_c = src - src_mean, dst - dst_mean
    cov = dst_c.T @ src_c / len(src)
    u, s, vt = np.linalg.svd(cov)
    d = np.eye(2)
    if np.linalg.det(u) * np.linalg.det(vt) < 0:
        d[1, 1] = -1.0  # no reflections
    rotation = u @ d @ vt
    var_src = (src_c**2).sum() / len(src)
    scale = float(np.trace(np.diag(s) @ d) / var_src) if var_src > 0 else 1.0
    matrix = np.empty((2, 3), dtype=np.float64)
    matrix[:, :2] = scale * rotation
    matrix[:, 2] = dst_mean - matrix[:, :2] @ src_mean
    return matrix


def estimate_similarity(landmarks: np.ndarray, crop_size: int, template: Template = "arcface") -> np.ndarray:
    """Affine (2, 3) mapping frame coordinates to the aligned crop."""
    landmarks = np.asarray(landmarks, dtype=np.float64)
    if landmarks.shape != (5, 2):
        raise ValueError(f"landmarks must have shape (5, 2), got {landmarks.shape}")
    return umeyama_similarity(landmarks, template_points(crop_size, template))


def invert_affine(affine: np.ndarray) -> np.ndarray:
    """Inverse of a (2, 3) affine."""
    return cv2.invertAffineTransform(np.asarray(affine, dtype=np.float64))


def transform_points(points: np.ndarray, affine: np.ndarray) -> np.ndarray:
    """Apply a (2, 3) affine to (N, 2) points."""
    points = np.asarray(points, dtype=np.float64)
    return points @ affine[:, :2].T + affine[:, 2]


def warp_crops(
    rgb: np.ndarray,
    landmarks_list: Sequence[np.ndarray],
    crop_size: int,
    template: Template = "arcface",
) -> tuple[np.ndarray, np.ndarray]:
    """Aligned crops (N, S, S, 3) in the frame's dtype and their affines (N, 2, 3).

    Works for uint8 and uint16 frames; borders replicate the edge so that faces at the
    frame edge do not get black wedges that a model would try to "repair".
    """
    n = len(landmarks_list)
    crops = np.empty((n, crop_size, crop_size, rgb.shape[2]), dtype=rgb.dtype)
    affines = np.empty((n, 2, 3), dtype=np.float64)
    for i, landmarks in enumerate(landmarks_list):
        affine = estimate_similarity(landmarks, crop_size, template)
        affines[i] = affine
        crops[i] = cv2.warpAffine(
            rgb, affine, (crop_size, crop_size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
        )
    return crops, affines
