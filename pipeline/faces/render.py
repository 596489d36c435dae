"""Render face tasks into frames: align, swap, optional enhance, paste back.

Model calls are batched across every face of every frame handed to :meth:`render`
(``FaceConfig.batch_size`` faces per call).  Frames keep their dtype: models see a
uint8 view, and the change a model makes is added back at full depth
(``crop16 + (out8 - in8) * 257``), so an unchanged area of a 10-bit frame keeps its
original code values.  Frames without tasks are returned as the very same arrays.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np

from pipeline.errors import SpecError
from pipeline.faces.align import warp_crops
from pipeline.faces.analyze import to_uint8
from pipeline.faces.blend import face_ellipse_mask, match_color, paste_back
from pipeline.faces.config import FaceConfig
from pipeline.faces.identity import Identity
from pipeline.faces.types import FaceTask

if TYPE_CHECKING:
    from pipeline.models.loader import FaceModels

log = logging.getLogger(__name__)


@dataclass
class _Item:
    frame: int
    task: FaceTask
    crop: np.ndarray  # aligned crop in the frame's dtype
    affine: np.ndarray  # (2, 3) frame -> crop


class FaceRenderer:
    """Replaces the faces named by :class:`FaceTask` lists, frame batch by frame batch."""

    def __init__(self, models: FaceModels, identities: Mapping[str, Identity], config: FaceConfig) -> None:
        if config.enhance and models.enhancer is None:
            raise SpecError("face.enhance", "the model pack has no enhancer")
        if config.occlusion and models.occluder is None:
            raise SpecError("face.occlusion", "the model pack has no occluder")
        self.models = models
        self.config = config
        self.identities = dict(identities)
        swapper = models.swapper
        self.crop_size = int(swapper.crop_size)
        self.template = str(getattr(swapper, "template", "arcface"))
        # per-identity work (latent, aligned source face) is done once, here
        self._prepared: dict[str, Any] = {name: swapper.prepare(i) for name, i in self.identities.items()}
        self._inner = face_ellipse_mask(self.crop_size)
        self.stage_seconds: dict[str, float] = {"align": 0.0, "swap": 0.0, "enhance": 0.0, "paste": 0.0}

    def render(self, frames: Sequence[np.ndarray], tasks: Sequence[Sequence[FaceTask]]) -> list[np.ndarray]:
        """Frames with every task's face replaced; frames without tasks pass through as is."""
        check_tasks(len(frames), tasks, self._prepared)
        if not any(tasks):
            return list(frames)

        started = time.perf_counter()
        items: list[_Item] = []
        for index, (frame, per_frame) in enumerate(zip(frames, tasks)):
            if not per_frame:
                continue
            _check_frame(frame)
            crops, affines = warp_crops(
                frame, [t.landmarks for t in per_frame], self.crop_size, self.template
            )
            items.extend(_Item(index, t, c, a) for t, c, a in zip(per_frame, crops, affines))
        crops8 = np.stack([to_uint8(item.crop) for item in items])
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
        for index in {item.frame for item in items}:
            out[index] = frames[index].copy()
        for k, item in enumerate(items):
            result = swapped[k].astype(np.float32)
            if self.config.color_match:
                result = match_color(result, crops8[k], self._inner)
            self._paste(out[item.frame], item, result, crops8[k], None if masks is None else masks[k])
        self.stage_seconds["paste"] += time.perf_counter() - started

        if self.config.enhance:
            self._enhance(out, items)
        return out

    def _paste(
        self, frame: np.ndarray, item: _Item, result8: np.ndarray, crop8: np.ndarray, mask: np.ndarray | None
    ) -> None:
        """Paste a model result (uint8 scale, float) at the frame's full depth."""
        if frame.dtype == np.uint8:
            full = result8
        else:
            scale = float(np.iinfo(frame.dtype).max) / 255.0
            full = item.crop.astype(np.float32) + (result8 - crop8.astype(np.float32)) * scale
        paste_back(
            frame,
            full,
            item.affine,
            mask=mask,
            erode=self.config.mask_erode,
            blur=self.config.mask_blur,
            box=item.task.box,
        )

    def _occlusion_masks(self, frames: Sequence[np.ndarray], items: list[_Item]) -> np.ndarray:
        """Occluder masks of the original target faces, resampled to the swapper crop."""
        occluder = self.models.occluder
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

    def _enhance(self, out: list[np.ndarray], items: list[_Item]) -> None:
        """Restore the pasted faces with the enhancer (FFHQ-aligned), blended by ``enhance_blend``."""
        enhancer = self.models.enhancer
        size = int(getattr(enhancer, "crop_size", 512))
        template = str(getattr(enhancer, "template", "ffhq"))
        started = time.perf_counter()
        regions = []
        for item in items:
            crops, affines = warp_crops(out[item.frame], [item.task.landmarks], size, template)
            regions.append(_Item(item.frame, item.task, crops[0], affines[0]))
        crops8 = np.stack([to_uint8(r.crop) for r in regions])
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
            self._paste(out[region.frame], region, result, crops8[k], None)
        self.stage_seconds["paste"] += time.perf_counter() - started


def check_tasks(frame_count: int, tasks: Sequence[Sequence[FaceTask]], identities: Mapping[str, Any]) -> None:
    """One task list per frame, every task naming a known identity."""
    if frame_count != len(tasks):
        raise ValueError(f"render got {frame_count} frames but {len(tasks)} task lists")
    for per_frame in tasks:
        for task in per_frame:
            if task.identity not in identities:
                raise SpecError("selection", f"unknown source identity {task.identity!r}")


def make_renderer(
    models: FaceModels, identities: Mapping[str, Identity], config: FaceConfig
) -> FaceRenderer | Any:
    """The renderer for these models: device-resident when the swapper is a torch module on CUDA.

    On CUDA, :class:`~pipeline.faces.device_render.DeviceFaceRenderer` keeps each batch
    on the GPU from upload to download (align, swap, enhance and paste back there);
    otherwise (ONNX Runtime, or torch on CPU) the numpy/OpenCV :class:`FaceRenderer`.
    Occlusion masks exist only on the latter, so they keep it.
    """
    device = getattr(getattr(models.swapper, "runner", None), "device", None)
    if getattr(device, "type", None) == "cuda":
        if config.occlusion:
            log.warning("faces.occlusion: rendering on the CPU path (no device-resident occlusion)")
        else:
            from pipeline.faces.device_render import DeviceFaceRenderer

            return DeviceFaceRenderer(models, identities, config)
    return FaceRenderer(models, identities, config)


def _check_frame(frame: np.ndarray) -> None:
    if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype not in (np.uint8, np.uint16):
        raise ValueError(f"frames must be RGB HxWx3 uint8 or uint16, got {frame.dtype} {frame.shape}")
