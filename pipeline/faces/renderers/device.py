"""Render face tasks with every pixel kept on the torch device: align, swap, enhance, paste.

:class:`DeviceFaceRenderer` is the torch twin of
:class:`~pipeline.faces.renderers.cpu.FaceRenderer` for models on the torch backend
(``ExecutionConfig(backend="torch")``, a
:class:`~pipeline.models.runtime.torch_runner.TorchRunner` per model).  Frames go in
as one ``(N, H, W, 3)`` tensor on the models' device and come out the same way;
between the two nothing is copied to the host.  Only the geometry is computed on the
CPU: the similarity of each face (:func:`~pipeline.geometry.align.estimate_similarity`,
a 5-point fit) and its paste region, a few dozen floats per face.

The steps, in order (the pixel operations are in
:mod:`~pipeline.faces.renderers.device_ops`):

* **align**: crops of every face at the swapper's template and size;
* **swap**: :meth:`Swapper.swap_tensor <pipeline.models.roles.Swapper.swap_tensor>` with
  the sources of :meth:`~pipeline.models.roles.Swapper.source_tensor` (uploaded once per
  identity), ``config.batch_size`` faces per model call;
* **colour match** and **paste** into the frames (a swapper with a ``paste_mask``, the
  built-in one, is pasted through it and not recoloured: it matched its region itself);
* **enhance** (``config.enhance``): FFHQ-template crops of the pasted frames,
  :meth:`Enhancer.enhance_tensor <pipeline.models.roles.Enhancer.enhance_tensor>`, a
  blend by ``enhance_blend``, pasted back the same way.

The model maths (normalisation, latents, rounding of outputs to uint8 values) is the
model classes'; this module only moves pixels.

Bit depth: uint8 frames stay uint8.  Deep frames arrive as ``torch.uint16`` (torch
supports few operations on it) or as int32 holding 0-65535; they are worked on as
int32 (blending in float32, exact for 16-bit values) and returned in the dtype they
came in.  As in the CPU path, models see a uint8 view and the change a model makes
is added back at full depth (``crop16 + (out8 - in8) * 257``), so an unchanged
area keeps its original code values.

Numpy frames (:meth:`DeviceFaceRenderer.render`, what the actor calls) reach a CUDA
device through page-locked host buffers that the renderer keeps and reuses: the
frames are copied into them once, uploaded without a staging copy, and the results
come back the same way.

Mattes (:meth:`DeviceFaceRenderer.render_with_mattes`): the alpha of every paste is
composed into one (N, H, W) float32 tensor on the device as the faces are pasted,
and downloaded once per batch, after the frames.

Occlusion masks (``faces.occlusion``) are not implemented on this path and are refused.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, cast

import numpy as np
import torch

from pipeline.errors import SpecError
from pipeline.faces.config import FaceConfig
from pipeline.faces.renderers.base import RendererBase, RenderItem, check_frame
from pipeline.faces.renderers.device_ops import aligned_crops, match_color, paste_faces
from pipeline.faces.renderers.pinned import PinnedStaging
from pipeline.geometry.align import Template, estimate_similarity
from pipeline.geometry.blend import face_ellipse_mask, feather_mask
from pipeline.geometry.types import FaceTask, Identity

if TYPE_CHECKING:
    from pipeline.models.loader import FaceModels
    from pipeline.models.roles import Enhancer

DEEP_DTYPES = (torch.uint16, torch.int32)
"""Frame dtypes holding 16-bit code values (0-65535)."""


class DeviceFaceRenderer(RendererBase):
    """Replaces the faces named by :class:`FaceTask` lists in frame tensors on the torch device.

    Same constructor as :class:`~pipeline.faces.renderers.cpu.FaceRenderer`; the swapper
    (and the enhancer when ``config.enhance``) must run on the torch backend.

    ``timing``: synchronise the device before each clock read, so that
    ``stage_seconds`` (keys ``align``, ``swap``, ``enhance``, ``paste``) and
    ``model_seconds`` (time inside the models' tensor calls) are real device times;
    without it they measure only the host's time to queue the work.

    One renderer serves one thread at a time (its host buffers are reused per call).
    """

    def __init__(
        self,
        models: FaceModels,
        identities: Mapping[str, Identity],
        config: FaceConfig,
        *,
        timing: bool = True,
    ) -> None:
        if config.occlusion:
            raise SpecError(
                "faces.occlusion",
                "occlusion masks are not implemented on the device render path; "
                "set faces.occlusion to false or use execution.backend 'onnxruntime'",
            )
        device = _torch_device(models.swapper.device, models.swapper, "swapper")
        self.enhancer: Enhancer | None = None
        if config.enhance and models.enhancer is not None:
            _torch_device(models.enhancer.device, models.enhancer, "enhancer")
            self.enhancer = models.enhancer
        super().__init__(models, identities, config)
        self.device = device
        self.timing = timing
        self._sources: dict[str, torch.Tensor] = {}  # uploaded on first use, once per identity
        self._inner = torch.from_numpy(face_ellipse_mask(self.crop_size) > 0.5).to(self.device)
        self._alpha = self._feather(self.crop_size)
        if self.paste_mask is not None:  # a swapper that blends its own region: pasted through it
            self._alpha = self._alpha * torch.from_numpy(self.paste_mask)[None, None].to(self.device)
        self.enhance_size = int(self.enhancer.crop_size) if self.enhancer is not None else 0
        self.enhance_template = cast(Template, str(self.enhancer.template if self.enhancer else "ffhq"))
        self._enhance_alpha = self._feather(self.enhance_size) if self.enhancer is not None else None
        self._staging = PinnedStaging(self.device) if self.device.type == "cuda" else None
        self.model_seconds = 0.0

    # ------------------------------------------------------------------ public API
    def render(self, frames: Sequence[np.ndarray], tasks: Sequence[Sequence[FaceTask]]) -> list[np.ndarray]:
        """Drop-in for ``FaceRenderer.render``: numpy frames in, numpy frames out.

        Frames with tasks are uploaded in one batch, rendered and downloaded; frames
        without tasks are returned as the very same arrays.
        """
        return self._render_frames(frames, tasks, mattes=False)[0]

    def render_with_mattes(
        self, frames: Sequence[np.ndarray], tasks: Sequence[Sequence[FaceTask]]
    ) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
        """What :meth:`render` returns, and per frame the (H, W) float32 matte it was blended with.

        A frame's matte is the alpha of every paste into it (swap, then enhance),
        composed "over" in paste order on the device; None for a frame without tasks.
        """
        return self._render_frames(frames, tasks, mattes=True)

    def render_tensor(self, frames: torch.Tensor, tasks: Sequence[Sequence[FaceTask]]) -> torch.Tensor:
        """Frames (N, H, W, 3) on the device with every task's face replaced; same dtype and device.

        ``frames`` is uint8, or uint16 / int32 holding 16-bit code values.  Frames
        without tasks come back unchanged (the returned tensor is a new one whenever
        any frame has a task).
        """
        self._check(frames, tasks)
        if not any(tasks):
            return frames
        with torch.inference_mode():
            return self._render(frames, tasks)

    # ------------------------------------------------------------------ steps
    def _render_frames(
        self, frames: Sequence[np.ndarray], tasks: Sequence[Sequence[FaceTask]], *, mattes: bool
    ) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
        """Numpy frames rendered through one device batch, and their mattes when ``mattes``."""
        self.check_tasks(len(frames), tasks)
        busy = [i for i, t in enumerate(tasks) if t]
        no_mattes: list[np.ndarray | None] = [None] * len(frames)
        if not busy:
            return list(frames), no_mattes
        first = frames[busy[0]]
        for i in busy:
            frame = frames[i]
            check_frame(frame)
            if frame.shape != first.shape or frame.dtype != first.dtype:
                raise ValueError(
                    f"frames with faces must share shape and dtype: {first.shape} {first.dtype} "
                    f"vs {frame.shape} {frame.dtype}"
                )
        batch = [frames[i] for i in busy]
        batch_tasks = [tasks[i] for i in busy]
        if self._staging is not None:
            uploaded = self._staging.upload(batch)
        else:
            stack = np.stack(batch)
            if stack.dtype == np.uint16:
                stack = stack.astype(np.int32)  # torch has few uint16 operations; int32 holds the values
            uploaded = torch.from_numpy(stack).to(self.device)
        if mattes:
            self._check(uploaded, batch_tasks)
            with torch.inference_mode():
                matte = torch.zeros(uploaded.shape[:3], dtype=torch.float32, device=self.device)
                rendered = self._render(uploaded, batch_tasks, matte)
        else:
            matte = None
            rendered = self.render_tensor(uploaded, batch_tasks)
        if self._staging is not None:
            host = self._staging.download(rendered, first.dtype)
        else:
            host = rendered.cpu().numpy().astype(first.dtype, copy=False)
        host_matte = None if matte is None else matte.cpu().numpy()  # once per batch, after the frames
        out = list(frames)
        out_matte = no_mattes.copy()
        for k, i in enumerate(busy):
            out[i] = host[k]
            if host_matte is not None:
                out_matte[i] = host_matte[k]
        return out, out_matte

    def _render(
        self, frames: torch.Tensor, tasks: Sequence[Sequence[FaceTask]], matte: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The rendered frames; ``matte`` (N, H, W) float32, when given, takes every paste's alpha."""
        in_dtype = frames.dtype
        deep = in_dtype in DEEP_DTYPES
        work = frames.to(torch.int32) if in_dtype == torch.uint16 else frames.clone()
        top = 65535.0 if deep else 255.0

        started = self._clock()
        items = [
            RenderItem(index, task, estimate_similarity(task.landmarks, self.crop_size, self.template))
            for index, per_frame in enumerate(tasks)
            for task in per_frame
        ]
        crop_full, crop8 = aligned_crops(work, items, self.crop_size, deep, self._upload)
        self.stage_seconds["align"] += self._clock() - started

        started = self._clock()
        sources = torch.stack([self._source(item.task.identity) for item in items])
        swapped8 = self.models.swapper.swap_tensor(crop8, sources, batch_size=self.config.batch_size)
        elapsed = self._clock() - started
        self.model_seconds += elapsed
        self.stage_seconds["swap"] += elapsed

        started = self._clock()
        result8 = match_color(swapped8, crop8, self._inner) if self.recolour else swapped8
        full = crop_full + (result8 - crop8) * (top / 255.0) if deep else result8
        paste_faces(work, items, full, self._alpha, top, self._upload, matte=matte)
        self.stage_seconds["paste"] += self._clock() - started

        if self.enhancer is not None:
            self._enhance(self.enhancer, work, items, deep, top, matte)
        return work.to(in_dtype) if work.dtype != in_dtype else work

    def _enhance(
        self,
        enhancer: Enhancer,
        work: torch.Tensor,
        items: list[RenderItem],
        deep: bool,
        top: float,
        matte: torch.Tensor | None,
    ) -> None:
        """Restore the pasted faces (FFHQ-aligned crops), blended by ``enhance_blend``."""
        started = self._clock()
        size = self.enhance_size
        template = self.enhance_template
        regions = [
            RenderItem(item.frame, item.task, estimate_similarity(item.task.landmarks, size, template))
            for item in items
        ]
        crop_full, crop8 = aligned_crops(work, regions, size, deep, self._upload)
        model_started = self._clock()
        enhanced8 = enhancer.enhance_tensor(crop8, batch_size=self.config.batch_size)
        self.model_seconds += self._clock() - model_started
        self.stage_seconds["enhance"] += self._clock() - started

        started = self._clock()
        blend = self.config.enhance_blend
        result8 = crop8 * (1.0 - blend) + enhanced8 * blend
        full = crop_full + (result8 - crop8) * (top / 255.0) if deep else result8
        assert self._enhance_alpha is not None
        paste_faces(work, regions, full, self._enhance_alpha, top, self._upload, matte=matte)
        self.stage_seconds["paste"] += self._clock() - started

    # ------------------------------------------------------------------ helpers
    def _source(self, name: str) -> torch.Tensor:
        source = self._sources.get(name)
        if source is None:
            source = self.models.swapper.source_tensor(self._prepared[name], self.device)
            self._sources[name] = source
        return source

    def _feather(self, size: int) -> torch.Tensor:
        mask = feather_mask(size, erode=self.config.mask_erode, blur=self.config.mask_blur)
        return torch.from_numpy(mask)[None, None].to(self.device)

    def _upload(self, array: np.ndarray) -> torch.Tensor:
        """A small host array on the device; on CUDA through pinned memory so the copy does
        not wait for the work already queued (a pageable upload synchronises the stream)."""
        tensor = torch.from_numpy(np.ascontiguousarray(array))
        if self.device.type != "cuda":
            return tensor
        return tensor.pin_memory().to(self.device, non_blocking=True)

    def _clock(self) -> float:
        if self.timing and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def _check(self, frames: torch.Tensor, tasks: Sequence[Sequence[FaceTask]]) -> None:
        if frames.ndim != 4 or frames.shape[-1] != 3:
            raise ValueError(f"frames must be (N, H, W, 3), got {tuple(frames.shape)}")
        if frames.dtype not in (torch.uint8, *DEEP_DTYPES):
            raise ValueError(f"frames must be uint8, uint16 or int32 (16-bit values), got {frames.dtype}")
        if frames.device != self.device:
            raise ValueError(f"frames are on {frames.device}, the models on {self.device}")
        self.check_tasks(len(frames), tasks)


def _torch_device(device: torch.device | None, model: object, role: str) -> torch.device:
    """``device``, the one ``model`` runs on; SpecError when it does not run on torch."""
    if device is None:
        raise SpecError(
            "models.execution.backend",
            f"the device render path needs backend 'torch' for the {role}; "
            f"the {role} ({type(model).__name__}) does not run on torch",
        )
    return device
