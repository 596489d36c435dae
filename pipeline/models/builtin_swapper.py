"""The built-in, weight-free swapper of the default pack.  PREVIEW QUALITY.

It aligns the source face to each target face with the shared ArcFace template (both
crops then have eyes, nose and mouth at the same place), matches the source's colour to
the target's skin in Lab space, and blends the source's inner face (brows to chin) over
the target with a feathered ellipse.  The target's pose is followed (through the
alignment), its expression and lighting direction are not.  Good enough to check a job
end to end with nothing but ``pip``; not for delivery.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import cv2
import numpy as np

from pipeline.geometry.align import Template, warp_crops
from pipeline.geometry.blend import face_ellipse_mask

if TYPE_CHECKING:
    import torch

    from pipeline.geometry.types import Identity
    from pipeline.models.pack import ModelEntry
    from pipeline.models.runtime.protocols import Runner

QUALITY = "preview"


class BuiltinSwapper:
    """Swapper role without a model: aligned source face, colour matched, feathered."""

    template = "arcface"
    quality = QUALITY

    def __init__(self, runner: Runner | None, entry: ModelEntry) -> None:
        contract: dict[str, Any] = dict(entry.contract)
        self.crop_size = int(contract.get("input_size", (256, 256))[0])
        self.strength = float(contract.get("strength", 1.0))
        self._mask = (face_ellipse_mask(self.crop_size) * self.strength).astype(np.float32)
        self._stats_mask = (self._mask > 0.5).astype(np.uint8)
        self._inverse = (1.0 - self._mask).astype(np.float32)

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
        """Replace the inner face of each aligned target crop (N, S, S, 3) uint8."""
        if len(crops) != len(prepared):
            raise ValueError(f"swap got {len(crops)} crops but {len(prepared)} prepared sources")
        out = np.empty_like(crops)
        for i, (target, source) in enumerate(zip(crops, prepared)):
            matched = _match_lab(source, target, self._stats_mask)
            out[i] = cv2.blendLinear(matched, np.ascontiguousarray(target), self._mask, self._inverse)
        return out

    def source_tensor(self, prepared: Any, device: torch.device) -> torch.Tensor:
        """The prepared source face (S, S, 3) uint8 as a tensor on ``device``."""
        import torch

        return torch.from_numpy(np.ascontiguousarray(prepared)).to(device)

    def swap_tensor(self, crops8: torch.Tensor, sources: torch.Tensor, *, batch_size: int) -> torch.Tensor:
        """:meth:`swap` for crops (N, 3, S, S) float holding uint8 values and stacked
        :meth:`source_tensor` faces (N, S, S, 3); the same layout out.

        The colour transfer is OpenCV's (Lab), so the faces go through the host and back;
        ``batch_size`` is accepted for the :class:`~pipeline.models.roles.Swapper` protocol.
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
