"""The pixel steps of the device render path, as torch operations on batches of faces.

Each mirrors a numpy/OpenCV step of the CPU renderer (results agree within about one
code value; ``tests/pipeline/faces/test_device_render.py`` measures it):

* **align** (:func:`aligned_crops`): ``cv2.warpAffine(..., INTER_LINEAR, BORDER_REPLICATE)``
  becomes ``affine_grid`` + ``grid_sample(bilinear, padding_mode="border",
  align_corners=False)``.  OpenCV samples pixel centres at integer coordinates,
  ``affine_grid`` at normalised ``(2i + 1) / size - 1``; :func:`affine_theta` converts
  between them, so the half-pixel convention is the same.  Crops are rounded to
  integers like OpenCV's integer outputs, and the uint8 model view of a deep frame is
  ``round(x * 255 / 65535)`` (``cv2.convertScaleAbs``).
* **colour match** (:func:`match_color`): per-channel mean and (population) std inside
  the inner-face ellipse, gain clipped to 0.5-2 (:func:`~pipeline.geometry.blend.match_color`).
* **paste** (:func:`paste_faces`): the result is sampled with the inverse affine only
  inside the paste region (the crop's footprint clipped to the face box grown by 0.25
  per side and to the frame, as ``paste_back(box=...)``), blended with the warped
  feather mask (zero outside the crop), rounded and clipped.  Faces are pasted one
  after another, so overlapping faces compose exactly as in the CPU path; so do their
  alphas in the optional matte (``paste_back(matte=...)``).

``upload`` is how a small host array reaches the device (the renderer's, through
pinned memory on CUDA).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from pipeline.faces.renderers.base import RenderItem
from pipeline.geometry.align import invert_affine
from pipeline.geometry.blend import box_fade, paste_region

Upload = Callable[[np.ndarray], torch.Tensor]


def affine_theta(
    affine_out_to_in: np.ndarray, in_size: tuple[int, int], out_size: tuple[int, int]
) -> np.ndarray:
    """The ``affine_grid`` theta (2, 3) for an affine mapping output pixels to input pixels.

    Both sizes are (width, height).  Pixel coordinates put pixel centres at integers
    (OpenCV); ``affine_grid(align_corners=False)`` puts them at ``(2i + 1) / size - 1``.
    theta = to_normalised_in @ affine @ from_normalised_out.
    """
    w_in, h_in = in_size
    w_out, h_out = out_size
    from_out = np.array(
        [[w_out / 2.0, 0.0, w_out / 2.0 - 0.5], [0.0, h_out / 2.0, h_out / 2.0 - 0.5], [0.0, 0.0, 1.0]]
    )
    to_in = np.array(
        [[2.0 / w_in, 0.0, 1.0 / w_in - 1.0], [0.0, 2.0 / h_in, 1.0 / h_in - 1.0], [0.0, 0.0, 1.0]]
    )
    matrix = np.vstack([np.asarray(affine_out_to_in, dtype=np.float64), [0.0, 0.0, 1.0]])
    return (to_in @ matrix @ from_out)[:2]


def aligned_crops(
    frames: torch.Tensor, items: Sequence[RenderItem], size: int, deep: bool, upload: Upload
) -> tuple[torch.Tensor, torch.Tensor]:
    """Aligned crops (F, 3, S, S) float32: at full depth (integer values) and the uint8 view."""
    height, width = int(frames.shape[1]), int(frames.shape[2])
    thetas = np.stack([affine_theta(invert_affine(i.affine), (width, height), (size, size)) for i in items])
    theta = upload(thetas.astype(np.float32))
    index = upload(np.array([i.frame for i in items], dtype=np.int64))
    source = frames.index_select(0, index).permute(0, 3, 1, 2).float()
    grid = F.affine_grid(theta, [len(items), 3, size, size], align_corners=False)
    crops = F.grid_sample(source, grid, mode="bilinear", padding_mode="border", align_corners=False)
    crop_full = torch.round(crops)  # OpenCV writes integer crops
    crop8 = torch.round(crop_full * (255.0 / 65535.0)).clamp(0.0, 255.0) if deep else crop_full
    return crop_full, crop8


def paste_faces(
    work: torch.Tensor,
    items: Sequence[RenderItem],
    full: torch.Tensor,
    alpha: torch.Tensor,
    top: float,
    upload: Upload,
    *,
    matte: torch.Tensor | None = None,
) -> None:
    """Blend each face's ``full`` (F, 3, S, S, frame value scale) into ``work`` in place, in order.

    ``matte`` (N, H, W) float32, one per frame of ``work``, when given takes each
    paste's alpha ``a`` in place as ``matte + a * (1 - matte)``
    (:func:`~pipeline.geometry.blend.accumulate_matte`).
    """
    size = int(full.shape[-1])
    height, width = int(work.shape[1]), int(work.shape[2])
    if matte is not None and (matte.dtype != torch.float32 or matte.shape != work.shape[:3]):
        raise ValueError(
            f"matte must be float32 {tuple(work.shape[:3])} like the frames, "
            f"got {matte.dtype} {tuple(matte.shape)}"
        )
    keep: list[int] = []
    boxes: list[tuple[int, int, int, int]] = []
    for k, item in enumerate(items):
        region = paste_region(item.affine, size, (height, width), item.task.box)
        if region is not None:
            keep.append(k)
            boxes.append(region)
    if not keep:
        return
    roi_w = max(x1 - x0 for x0, _, x1, _ in boxes)
    roi_h = max(y1 - y0 for _, y0, _, y1 in boxes)
    thetas = []
    for k, (x0, y0, _, _) in zip(keep, boxes):
        roi_inverse = invert_affine(items[k].affine)
        roi_inverse[:, 2] -= (x0, y0)
        # OpenCV inverts the crop -> ROI matrix it is given; do the same for the sampling map
        thetas.append(affine_theta(invert_affine(roi_inverse), (size, size), (roi_w, roi_h)))
    theta = upload(np.stack(thetas).astype(np.float32))
    grid = F.affine_grid(theta, [len(keep), 1, roi_h, roi_w], align_corners=False)
    picked = full.index_select(0, upload(np.array(keep, dtype=np.int64)))
    warped = F.grid_sample(picked, grid, mode="bilinear", padding_mode="border", align_corners=False)
    masks = alpha.expand(len(keep), 1, size, size)
    warped_alpha = F.grid_sample(masks, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    for j, (k, (x0, y0, x1, y1)) in enumerate(zip(keep, boxes)):
        h, w = y1 - y0, x1 - x0
        rows, cols = box_fade((x0, y0, x1, y1), (height, width), items[k].task.box)
        fade = upload(rows)[:, None] * upload(cols)[None, :]  # two small vectors
        a = (warped_alpha[j, 0, :h, :w] * fade)[..., None]
        face = warped[j, :, :h, :w].permute(1, 2, 0)
        roi = work[items[k].frame, y0:y1, x0:x1]
        blended = roi.float() * (1.0 - a) + face * a
        roi.copy_(torch.round(blended).clamp(0.0, top).to(work.dtype))
        if matte is not None:
            covered = matte[items[k].frame, y0:y1, x0:x1]
            covered.add_(a[..., 0] * (1.0 - covered))


def match_color(src: torch.Tensor, ref: torch.Tensor, inner: torch.Tensor) -> torch.Tensor:
    """``src`` (F, 3, S, S) with the per-channel mean and std of ``ref`` inside ``inner`` (S, S) bool."""
    mask = inner.to(src.dtype)
    count = mask.sum().clamp(min=1.0)

    def stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean = (x * mask).sum(dim=(2, 3), keepdim=True) / count
        var = (((x - mean) ** 2) * mask).sum(dim=(2, 3), keepdim=True) / count
        return mean, var.sqrt()

    s_mean, s_std = stats(src)
    r_mean, r_std = stats(ref)
    # cap the gain: a flat source patch must not be blown up into noise
    gain = (r_std / s_std.clamp(min=1e-3)).clamp(0.5, 2.0)
    return src * gain + (r_mean - s_mean * gain)
