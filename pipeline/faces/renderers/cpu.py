"""Render face tasks into frames with numpy and OpenCV: align, swap, optional enhance, paste back.

A swapper with a ``paste_mask`` (the built-in one changes only the inner face, already
colour matched and blended) is pasted through that mask and not recoloured, so the
plate's pixels outside it are kept exactly.

Model calls are batched across every face of every frame handed to :meth:`render`
(``FaceConfig.batch_size`` faces per call).  Frames keep their dtype: models see a
uint8 view, and the change a model makes is added back at full depth
(``crop16 + (out8 - in8) * 257``), so an unchanged area of a 10-bit frame keeps its
original code values.  Frames without tasks are returned as the very same arrays.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, cast

import cv2
import numpy as np

from pipeline.faces.analyze import to_uint8
from pipeline.faces.config import FaceConfig
from pipeline.faces.renderers.base import RendererBase, RenderItem, check_frame
from pipeline.geometry.align import Template, warp_crops
from pipeline.geometry.blend import face_ellipse_mask, match_color, paste_back
from pipeline.geometry.types import FaceTask, Identity

if TYPE_CHECKING:
    from pipeline.models.loader import FaceModels
    from pipeline.models.roles import Enhancer, Occluder


class FaceRenderer(RendererBase):
    """Replaces the faces named by :class:`FaceTask` lists, frame batch by frame batch."""

    def __init__(self, models: FaceModels, identities: Mapping[str, Identity], config: FaceConfig) -> None:
        super().__init__(models, identities, config)
        self._inner = face_ellipse_mask(self.crop_size)

    def render(self, frames: Sequence[np.ndarray], tasks: Sequence[Sequence[FaceTask]]) -> list[np.ndarray]:
        """Frames with every task's face replaced; frames without tasks pass through as is."""
        return self._render(frames, tasks, mattes=False)[0]

    def render_with_mattes(
        self, frames: Sequence[np.ndarray], tasks: Sequence[Sequence[FaceTask]]
    ) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
        """What :meth:`render` returns, and per frame the (H, W) float32 matte it was blended with.

        A frame's matte is the alpha of every paste into it (swap, then enhance),
        composed "over" in paste order; None for a frame without tasks.
        """
        return self._render(frames, tasks, mattes=True)

    def _render(
        self, frames: Sequence[np.ndarray], tasks: Sequence[Sequence[FaceTask]], *, mattes: bool
    ) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
        """Rendered frames, and their mattes when ``mattes`` (else a None per frame)."""
        self.check_tasks(len(frames), tasks)
        no_mattes: list[np.ndarray | None] = [None] * len(frames)
        if not any(tasks):
            return list(frames), no_mattes

        started = time.perf_counter()
        items: list[RenderItem] = []
        crops: list[np.ndarray] = []  # aligned crops in the frame's dtype, one per item
        for index, (frame, per_frame) in enumerate(zip(frames, tasks)):
            if not per_frame:
                continue
            check_frame(frame)
            frame_crops, affines = warp_crops(
                frame, [t.landmarks for t in per_frame], self.crop_size, self.template
            )
            items.extend(RenderItem(index, t, a) for t, a in zip(per_frame, affines))
            crops.extend(frame_crops)
        crops8 = np.stack([to_uint8(crop) for crop in crops])
        masks = self._occlusion_masks(frames, items) if self.config.occlusion else None
        self.stage_seconds["align"] += time.perf_counter() - started

        started = time.perf_counter()
        swapped = np.empty_like(crops8)
        step = self.config.batch_size
        for start in range(0, len(items), step):
            chunk = items[start : start + step]
            swapped[start : start + len(chunk)] = self.models.swapper.swap(
                crops8[start : start + len(chunk)], [self._prepared[i.task.identity] for i in chunk]
            )
        self.stage_seconds["swap"] += time.perf_counter() - started

        started = time.perf_counter()
        out = list(frames)
        matte = no_mattes.copy()
        for index in {item.frame for item in items}:
            out[index] = frames[index].copy()
            if mattes:
                matte[index] = np.zeros(frames[index].shape[:2], np.float32)
        for k, item in enumerate(items):
            result = swapped[k].astype(np.float32)
            if self.recolour:
                result = match_color(result, crops8[k], self._inner)
            mask = None if masks is None else masks[k]
            if self.paste_mask is not None:
                mask = self.paste_mask if mask is None else mask * self.paste_mask
            self._paste(
                out[item.frame], item, crops[k], result, crops8[k], mask=mask, matte=matte[item.frame]
            )
        self.stage_seconds["paste"] += time.perf_counter() - started

        if self.config.enhance:
            self._enhance(out, items, matte)
        return out, matte

    def _paste(
        self,
        frame: np.ndarray,
        item: RenderItem,
        crop: np.ndarray,
        result8: np.ndarray,
        crop8: np.ndarray,
        *,
        mask: np.ndarray | None,
        matte: np.ndarray | None,
    ) -> None:
        """Paste a model result (uint8 scale, float) at the frame's full depth (``crop``: the frame's dtype).

        ``matte``: the frame's matte, which takes this paste's alpha (None: not kept).
        """
        if frame.dtype == np.uint8:
            full = result8
        else:
            scale = float(np.iinfo(frame.dtype).max) / 255.0
            full = crop.astype(np.float32) + (result8 - crop8.astype(np.float32)) * scale
        paste_back(
            frame,
            full,
            item.affine,
            mask=mask,
            erode=self.config.mask_erode,
            blur=self.config.mask_blur,
            box=item.task.box,
            matte=matte,
        )

    def _occlusion_masks(self, frames: Sequence[np.ndarray], items: list[RenderItem]) -> np.ndarray:
        """Occluder masks of the original target faces, resampled to the swapper crop."""
        occluder = cast("Occluder", self.models.occluder)  # checked by RendererBase
        size = int(occluder.crop_size)
        crops = np.stack(
            [
                to_uint8(warp_crops(frames[i.frame], [i.task.landmarks], size, self.template)[0][0])
                for i in items
            ]
        )
        masks = np.concatenate(
            [
                occluder.mask(crops[s : s + self.config.batch_size])
                for s in range(0, len(crops), self.config.batch_size)
            ]
        )
        if size != self.crop_size:
            masks = np.stack([cv2.resize(m, (self.crop_size, self.crop_size)) for m in masks])
        return np.clip(masks, 0.0, 1.0).astype(np.float32)

    def _enhance(
        self, out: list[np.ndarray], items: list[RenderItem], matte: list[np.ndarray | None]
    ) -> None:
        """Restore the pasted faces with the enhancer (FFHQ-aligned), blended by ``enhance_blend``."""
        enhancer = cast("Enhancer", self.models.enhancer)  # checked by RendererBase
        size = int(enhancer.crop_size)
        template = cast(Template, str(enhancer.template))
        started = time.perf_counter()
        regions: list[RenderItem] = []
        crops: list[np.ndarray] = []
        for item in items:
            region_crops, affines = warp_crops(out[item.frame], [item.task.landmarks], size, template)
            regions.append(RenderItem(item.frame, item.task, affines[0]))
            crops.append(region_crops[0])
        crops8 = np.stack([to_uint8(crop) for crop in crops])
        enhanced = np.concatenate(
            [
                enhancer.enhance(crops8[s : s + self.config.batch_size])
                for s in range(0, len(crops8), self.config.batch_size)
            ]
        )
        self.stage_seconds["enhance"] += time.perf_counter() - started
        started = time.perf_counter()
        blend = self.config.enhance_blend
        for k, region in enumerate(regions):
            result = crops8[k].astype(np.float32) * (1.0 - blend) + enhanced[k].astype(np.float32) * blend
            self._paste(
                out[region.frame], region, crops[k], result, crops8[k], mask=None, matte=matte[region.frame]
            )
        self.stage_seconds["paste"] += time.perf_counter() - started
