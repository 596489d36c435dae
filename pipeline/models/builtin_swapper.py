"""The built-in, weight-free swapper of the default pack.  PREVIEW QUALITY.

It aligns the source face to each target face with the shared ArcFace template (both
crops then have eyes, nose and mouth at the same place) and replaces only the target's
**inner face**: the region :func:`~pipeline.geometry.blend.inner_face_region` derives
from the template's five points (eyes, nose, mouth, the brows but their outer ends, the
cheeks beside them; not the hair, the brows' outer ends or the jaw line).  For each face:

1. the source is recoloured to the target: mean and spread of each Lab channel over the
   region (:func:`_match_lab`);
2. where the source has dark hair at the region's sides (a sideburn, a strand: darker than
   :data:`HAIR` times its inner face's median grey, beside or below the eyes) the target is
   kept;
3. the two are blended with a Laplacian pyramid
   (:func:`~pipeline.geometry.blend.multiband_blend`, three bands at 256 px) weighted by the
   region with a soft edge (:data:`FEATHER`): fine detail changes over within a few pixels,
   so no feature is doubled, and tone over a wide band, so there is no step in colour.

Outside the region the swapped crop is the target crop, and
:attr:`BuiltinSwapper.paste_mask` has the renderer paste through the region's soft edge
only (and not recolour it), so the plate's pixels outside the inner face stay bit-exact.

The target's pose is followed (through the alignment); its expression and lighting
direction are not.  Pure OpenCV/numpy arithmetic, the same bytes on every run.  (A
gradient-domain blend was tried: ``cv2.seamlessClone`` returns different pixels from one
call to the next in OpenCV 5.1 and changes pixels outside its mask; an exact Poisson
solve washed the face out towards the target's and cost about 0.1 of recognizer
similarity to the identity.)  Good enough to check a job end to end with nothing but
``pip``; not for delivery.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import cv2
import numpy as np

from pipeline.geometry.align import Template, template_points, warp_crops
from pipeline.geometry.blend import gaussian_pyramid, inner_face_region, multiband_blend, soft_region

if TYPE_CHECKING:
    import torch

    from pipeline.geometry.types import Identity
    from pipeline.models.pack import ModelEntry
    from pipeline.models.runtime.protocols import Runner

QUALITY = "preview"
FEATHER = 0.015
"""Sigma of the inner face's soft edge, as a fraction of the crop size (4 px at 256)."""
HAIR = 0.55
"""A source pixel at the inner face's sides (beside and below the eyes) darker than this
fraction of the inner face's median grey is hair (a sideburn, a strand): the target is kept there."""


class BuiltinSwapper:
    """Swapper role without a model: the aligned source's inner face, colour matched, blended in bands."""

    template = "arcface"
    quality = QUALITY

    def __init__(self, runner: Runner | None, entry: ModelEntry) -> None:
        contract: dict[str, Any] = dict(entry.contract)
        self.crop_size = int(contract.get("input_size", (256, 256))[0])
        self.strength = float(contract.get("strength", 1.0))
        size = self.crop_size
        self.region = inner_face_region(size, cast(Template, self.template))
        """(S, S) bool: the inner face, the only pixels :meth:`swap` changes."""
        self.paste_mask: np.ndarray = soft_region(self.region, FEATHER * size)
        """(S, S) float32: the region with a soft edge, 0 outside it (what the renderer pastes through)."""
        self._region_u8 = self.region.astype(np.uint8)
        self._levels = max(1, round(math.log2(size / 32)))  # bands down to 32x smaller: 3 at 256 px
        # The blend runs on the region's bounding box grown by the coarsest band's reach.
        x, y, w, h = cv2.boundingRect(self._region_u8)
        margin = 2 ** (self._levels + 1)
        self._roi = (
            slice(max(0, y - margin), min(size, y + h + margin)),
            slice(max(0, x - margin), min(size, x + w + margin)),
        )
        self._inside = self.region[self._roi]
        self._weight = np.ascontiguousarray((self.paste_mask * self.strength)[self._roi], dtype=np.float32)
        self._weights = gaussian_pyramid(self._weight, self._levels)
        # Where a source's hair may reach into the region: beside the eyes and below them.
        points = template_points(size, cast(Template, self.template))
        eyes = float(np.linalg.norm(points[1] - points[0]))
        rows, cols = np.mgrid[0:size, 0:size]
        centre = (points[0] + points[1]) / 2.0
        sides = (np.abs(cols + 0.5 - centre[0]) > 0.75 * eyes) & (rows + 0.5 > centre[1] + 0.15 * eyes)
        self._sides = (sides & self.region)[self._roi]
        self._hair_sigma = FEATHER * size

    @property
    def device(self) -> torch.device | None:
        """None: no model, nothing runs on a torch device."""
        return None

    def prepare(self, identity: Identity) -> np.ndarray:
        """The identity's source face aligned to the template, (S, S, 3) uint8 RGB."""
        source = identity.source_rgb
        if source.dtype != np.uint8:
            source = cv2.convertScaleAbs(source, alpha=255.0 / float(np.iinfo(source.dtype).max))
        crops, _ = warp_crops(
            source, [identity.source_landmarks], self.crop_size, cast(Template, self.template)
        )
        return crops[0]

    def swap(self, crops: np.ndarray, prepared: Sequence[Any]) -> np.ndarray:
        """Replace the inner face of each aligned target crop (N, S, S, 3) uint8; the rest is kept."""
        if len(crops) != len(prepared):
            raise ValueError(f"swap got {len(crops)} crops but {len(prepared)} prepared sources")
        out = np.array(crops, dtype=np.uint8, copy=True)
        for i, (target, source) in enumerate(zip(crops, prepared)):
            roi = np.ascontiguousarray(target[self._roi])
            src = np.ascontiguousarray(source[self._roi])
            matched = _match_lab(src, roi, self._region_u8[self._roi])
            blended = multiband_blend(
                matched.astype(np.float32), roi.astype(np.float32), self._blend_weights(src)
            )
            face = np.clip(np.rint(blended), 0.0, 255.0).astype(np.uint8)
            out[i][self._roi][self._inside] = face[self._inside]
        return out

    def _blend_weights(self, source_roi: np.ndarray) -> list[np.ndarray]:
        """The blend weight's pyramid for one source: 0 on and around its hair at the region's sides."""
        grey = cv2.cvtColor(source_roi, cv2.COLOR_RGB2GRAY)
        hair = (grey < HAIR * float(np.median(grey[self._inside]))) & self._sides
        if not hair.any():
            return self._weights
        radius = int(np.ceil(2.0 * self._hair_sigma))
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))
        grown = cv2.dilate(hair.astype(np.uint8), kernel).astype(np.float32)
        covered = cv2.GaussianBlur(grown, (0, 0), sigmaX=self._hair_sigma, sigmaY=self._hair_sigma)
        return gaussian_pyramid(self._weight * (1.0 - np.clip(covered, 0.0, 1.0)), self._levels)

    def source_tensor(self, prepared: Any, device: torch.device) -> torch.Tensor:
        """The prepared source face (S, S, 3) uint8 as a tensor on ``device``."""
        import torch

        return torch.from_numpy(np.ascontiguousarray(prepared)).to(device)

    def swap_tensor(self, crops8: torch.Tensor, sources: torch.Tensor, *, batch_size: int) -> torch.Tensor:
        """:meth:`swap` for crops (N, 3, S, S) float holding uint8 values and stacked
        :meth:`source_tensor` faces (N, S, S, 3); the same layout out.

        The colour transfer and the blend are OpenCV's, so the faces go through the host
        and back; ``batch_size`` is accepted for the :class:`~pipeline.models.roles.Swapper` protocol.
        """
        import torch

        crops = crops8.permute(0, 2, 3, 1).to("cpu", torch.uint8).numpy()
        out = self.swap(crops, list(sources.to("cpu").numpy()))
        return torch.from_numpy(out).to(crops8.device).permute(0, 3, 1, 2).to(crops8.dtype)


def _match_lab(source: np.ndarray, target: np.ndarray, mask_u8: np.ndarray) -> np.ndarray:
    """``source`` recoloured to ``target``'s mean and spread (Lab, inside ``mask_u8``), uint8 RGB."""
    src = cv2.cvtColor(source, cv2.COLOR_RGB2LAB)
    dst = cv2.cvtColor(target, cv2.COLOR_RGB2LAB)
    s_mean, s_std = (v.reshape(3) for v in cv2.meanStdDev(src, mask=mask_u8))
    d_mean, d_std = (v.reshape(3) for v in cv2.meanStdDev(dst, mask=mask_u8))
    gain = np.clip(d_std / np.maximum(s_std, 1.0), 0.5, 2.0)
    # one affine per channel: lab' = lab * gain + (d_mean - s_mean * gain)
    matrix = np.concatenate([np.diag(gain), (d_mean - s_mean * gain)[:, None]], axis=1)
    lab = cv2.transform(src, matrix)  # saturates to uint8
    return cv2.cvtColor(lab, cv2.COLOR_LAB2RGB)
