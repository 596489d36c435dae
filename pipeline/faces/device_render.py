"""Render face tasks with every pixel kept on the torch device: align, swap, enhance, paste.

:class:`DeviceFaceRenderer` is the torch twin of :class:`pipeline.faces.render.FaceRenderer`
for models on the torch backend (``ExecutionConfig(backend="torch")``, a
:class:`~pipeline.models.runner.TorchRunner` per model).  Frames go in as one
``(N, H, W, 3)`` tensor on the runner's device and come out the same way; between
the two nothing is copied to the host.  Only the geometry is computed on the CPU:
the similarity of each face (:func:`~pipeline.faces.align.estimate_similarity`, a
5-point fit) and its paste region, a few dozen floats per face.

How each step mirrors the numpy/OpenCV path (results agree within about one code
value; the tests measure it):

* **align**: ``cv2.warpAffine(..., INTER_LINEAR, BORDER_REPLICATE)`` becomes
  ``affine_grid`` + ``grid_sample(bilinear, padding_mode="border", align_corners=False)``.
  OpenCV samples pixel centres at integer coordinates, ``affine_grid`` at normalised
  ``(2i + 1) / size - 1``; :func:`affine_theta` converts between them, so the
  half-pixel convention is the same.  Crops are rounded to integers like OpenCV's
  integer outputs, and the uint8 model view of a deep frame is
  ``round(x * 255 / 65535)`` (``cv2.convertScaleAbs``).
* **swap**: ``target = crop8 / 255`` NCHW, ``source`` = the identity's latent from
  ``swapper.prepare`` (uploaded once per identity), ``config.batch_size`` faces per
  ``run_torch`` call; the output is quantised to uint8 values like ``InSwapper.swap``.
* **colour match**: per-channel mean and (population) std inside the inner-face
  ellipse, gain clipped to 0.5-2 (:func:`~pipeline.faces.blend.match_color`).
* **paste**: the result is sampled with the inverse affine only inside the paste
  region (the crop's footprint clipped to the face box grown by 0.25 per side and
  to the frame, as ``paste_back(box=...)``), blended with the warped feather mask
  (``feather_mask(size, erode=mask_erode, blur=mask_blur)``, zero outside the crop),
  rounded and clipped.  Faces are pasted one after another, so overlapping faces
  compose exactly as in the CPU path.
* **enhance** (``config.enhance``): FFHQ-template crops of the pasted frames, the
  enhancer, a blend by ``enhance_blend``, pasted back the same way.

Bit depth: uint8 frames stay uint8.  Deep frames arrive as ``torch.uint16`` (torch
supports few operations on it) or as int32 holding 0-65535; they are worked on as
int32 (blending in float32, exact for 16-bit values) and returned in the dtype they
came in.  As in the CPU path, models see a uint8 view and the change a model makes
is added back at full depth (``crop16 + (out8 - in8) * 257``), so an unchanged
area keeps its original code values.

Occlusion masks (``faces.occlusion``) are not implemented on this path and are refused.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
import torch.nn.functional as F

from pipeline.errors import SpecError
from pipeline.faces.align import Template, estimate_similarity, invert_affine
from pipeline.faces.blend import box_fade, face_ellipse_mask, feather_mask, paste_region
from pipeline.faces.config import FaceConfig
from pipeline.faces.identity import Identity
from pipeline.faces.render import check_tasks
from pipeline.faces.types import FaceTask

if TYPE_CHECKING:
    from pipeline.models.loader import FaceModels

log = logging.getLogger(__name__)

"""Paste region: the face box grown by this fraction of its size per side (as FaceRenderer)."""
DEEP_DTYPES = (torch.uint16, torch.int32)
"""Frame dtypes holding 16-bit code values (0-65535)."""


@dataclass
class _Item:
    frame: int  # index into the batch
    task: FaceTask
    affine: np.ndarray  # (2, 3) float64, frame -> crop


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


def _torch_runner(model: Any, role: str) -> Any:
    """The model's runner if it runs on torch tensors; SpecError otherwise."""
    runner = getattr(model, "runner", None)
    if runner is None or not callable(getattr(runner, "run_torch", None)):
        where = getattr(runner, "providers", None) or type(model).__name__
        raise SpecError(
            "models.execution.backend",
            f"the device render path needs backend 'torch' (a torch runner for the {role}); "
            f"the {role} runs on {where}",
        )
    return runner


class DeviceFaceRenderer:
    """Replaces the faces named by :class:`FaceTask` lists in frame tensors on the torch device.

    Same constructor as :class:`~pipeline.faces.render.FaceRenderer`; the swapper (and
    the enhancer when ``config.enhance``) must run on the torch backend.

    ``timing``: synchronise the device before each clock read, so that
    ``stage_seconds`` (keys ``align``, ``swap``, ``enhance``, ``paste``) and
    ``model_seconds`` (time inside ``run_torch`` calls) are real device times; without
    it they measure only the host's time to queue the work.
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
        if config.enhance and models.enhancer is None:
            raise SpecError("faces.enhance", "the model pack has no enhancer")
        self.models = models
        self.config = config
        self.timing = timing
        swapper = models.swapper
        self._swap_runner = _torch_runner(swapper, "swapper")
        self._enhance_runner = _torch_runner(models.enhancer, "enhancer") if config.enhance else None
        self.device: torch.device = torch.device(self._swap_runner.device)
        self.identities = dict(identities)
        self.crop_size = int(swapper.crop_size)
        self.template = cast(Template, str(getattr(swapper, "template", "arcface")))
        self._prepared: dict[str, Any] = {name: swapper.prepare(i) for name, i in self.identities.items()}
        self._latents: dict[str, torch.Tensor] = {}  # uploaded on first use, once per identity
        self._inner = torch.from_numpy(face_ellipse_mask(self.crop_size) > 0.5).to(self.device)
        self._alpha = self._feather(self.crop_size)
        self.enhance_size = int(getattr(models.enhancer, "crop_size", 512)) if config.enhance else 0
        self.enhance_template = cast(Template, str(getattr(models.enhancer, "template", "ffhq")))
        self._enhance_alpha = self._feather(self.enhance_size) if config.enhance else None
        self._single: set[str] = set()  # models that only run one item per call
        self.stage_seconds: dict[str, float] = {"align": 0.0, "swap": 0.0, "enhance": 0.0, "paste": 0.0}
        self.model_seconds = 0.0

    # ------------------------------------------------------------------ public API
    def render(self, frames: Sequence[np.ndarray], tasks: Sequence[Sequence[FaceTask]]) -> list[np.ndarray]:
        """Drop-in for ``FaceRenderer.render``: numpy frames in, numpy frames out.

        Frames with tasks are uploaded in one batch, rendered and downloaded; frames
        without tasks are returned as the very same arrays.
        """
        if len(frames) != len(tasks):
            raise ValueError(f"render got {len(frames)} frames but {len(tasks)} task lists")
        busy = [i for i, t in enumerate(tasks) if t]
        if not busy:
            return list(frames)
        first = frames[busy[0]]
        for i in busy:
            frame = frames[i]
            if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype not in (np.uint8, np.uint16):
                raise ValueError(f"frames must be RGB HxWx3 uint8 or uint16, got {frame.dtype} {frame.shape}")
            if frame.shape != first.shape or frame.dtype != first.dtype:
                raise ValueError(
                    f"frames with faces must share shape and dtype: {first.shape} {first.dtype} "
                    f"vs {frame.shape} {frame.dtype}"
                )
        stack = np.stack([frames[i] for i in busy])
        if stack.dtype == np.uint16:
            stack = stack.astype(np.int32)  # torch has few uint16 operations; int32 holds the values
        rendered = self.render_tensor(torch.from_numpy(stack).to(self.device), [tasks[i] for i in busy])
        host = rendered.cpu().numpy().astype(first.dtype, copy=False)
        out = list(frames)
        for k, i in enumerate(busy):
            out[i] = host[k]
        return out

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
    def _render(self, frames: torch.Tensor, tasks: Sequence[Sequence[FaceTask]]) -> torch.Tensor:
        in_dtype = frames.dtype
        deep = in_dtype in DEEP_DTYPES
        work = frames.to(torch.int32) if in_dtype == torch.uint16 else frames.clone()
        top = 65535.0 if deep else 255.0

        started = self._clock()
        items = [
            _Item(index, task, estimate_similarity(task.landmarks, self.crop_size, self.template))
            for index, per_frame in enumerate(tasks)
            for task in per_frame
        ]
        crop_full, crop8 = self._crops(work, items, self.crop_size, deep)
        self.stage_seconds["align"] += self._clock() - started

        started = self._clock()
        target = crop8 / 255.0
        source = torch.stack([self._latent(item.task.identity) for item in items])
        feeds = {"target": target, "source": source}
        raw = self._run(self._swap_runner, [feeds[name] for name in self._swap_runner.input_names])
        swapped8 = torch.floor(raw.float().clamp(0.0, 1.0) * 255.0 + 0.5)  # uint8 values, as InSwapper.swap
        self.stage_seconds["swap"] += self._clock() - started

        started = self._clock()
        result8 = self._match_color(swapped8, crop8) if self.config.color_match else swapped8
        full = crop_full + (result8 - crop8) * (top / 255.0) if deep else result8
        self._paste(work, items, full, self._alpha, top)
        self.stage_seconds["paste"] += self._clock() - started

        if self.config.enhance:
            self._enhance(work, items, deep, top)
        return work.to(in_dtype) if work.dtype != in_dtype else work

    def _enhance(self, work: torch.Tensor, items: list[_Item], deep: bool, top: float) -> None:
        """Restore the pasted faces (FFHQ-aligned crops), blended by ``enhance_blend``."""
        started = self._clock()
        size = self.enhance_size
        template = self.enhance_template
        regions = [
            _Item(item.frame, item.task, estimate_similarity(item.task.landmarks, size, template))
            for item in items
        ]
        crop_full, crop8 = self._crops(work, regions, size, deep)
        raw = self._run(self._enhance_runner, [(crop8 / 255.0 - 0.5) / 0.5])
        enhanced8 = torch.floor((raw.float().clamp(-1.0, 1.0) + 1.0) * 127.5 + 0.5)  # as GfpganEnhancer
        self.stage_seconds["enhance"] += self._clock() - started

        started = self._clock()
        blend = self.config.enhance_blend
        result8 = crop8 * (1.0 - blend) + enhanced8 * blend
        full = crop_full + (result8 - crop8) * (top / 255.0) if deep else result8
        assert self._enhance_alpha is not None
        self._paste(work, regions, full, self._enhance_alpha, top)
        self.stage_seconds["paste"] += self._clock() - started

    def _crops(
        self, frames: torch.Tensor, items: list[_Item], size: int, deep: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Aligned crops (F, 3, S, S) float32: at full depth (integer values) and the uint8 view."""
        height, width = int(frames.shape[1]), int(frames.shape[2])
        thetas = np.stack(
            [affine_theta(invert_affine(i.affine), (width, height), (size, size)) for i in items]
        )
        theta = self._upload(thetas.astype(np.float32))
        index = self._upload(np.array([i.frame for i in items], dtype=np.int64))
        source = frames.index_select(0, index).permute(0, 3, 1, 2).float()
        grid = F.affine_grid(theta, [len(items), 3, size, size], align_corners=False)
        crops = F.grid_sample(source, grid, mode="bilinear", padding_mode="border", align_corners=False)
        crop_full = torch.round(crops)  # OpenCV writes integer crops
        crop8 = torch.round(crop_full * (255.0 / 65535.0)).clamp(0.0, 255.0) if deep else crop_full
        return crop_full, crop8

    def _paste(
        self, work: torch.Tensor, items: list[_Item], full: torch.Tensor, alpha: torch.Tensor, top: float
    ) -> None:
        """Blend each face's ``full`` (F, 3, S, S, frame value scale) into ``work`` in place, in order."""
        size = int(full.shape[-1])
        height, width = int(work.shape[1]), int(work.shape[2])
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
        theta = self._upload(np.stack(thetas).astype(np.float32))
        grid = F.affine_grid(theta, [len(keep), 1, roi_h, roi_w], align_corners=False)
        picked = full.index_select(0, self._upload(np.array(keep, dtype=np.int64)))
        warped = F.grid_sample(picked, grid, mode="bilinear", padding_mode="border", align_corners=False)
        masks = alpha.expand(len(keep), 1, size, size)
        warped_alpha = F.grid_sample(masks, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        for j, (k, (x0, y0, x1, y1)) in enumerate(zip(keep, boxes)):
            h, w = y1 - y0, x1 - x0
            rows, cols = box_fade((x0, y0, x1, y1), (height, width), items[k].task.box)
            fade = self._upload(rows)[:, None] * self._upload(cols)[None, :]  # two small vectors
            a = (warped_alpha[j, 0, :h, :w] * fade)[..., None]
            face = warped[j, :, :h, :w].permute(1, 2, 0)
            roi = work[items[k].frame, y0:y1, x0:x1]
            blended = roi.float() * (1.0 - a) + face * a
            roi.copy_(torch.round(blended).clamp(0.0, top).to(work.dtype))

    def _match_color(self, src: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
        """``src`` (F, 3, S, S) with the per-channel mean and std of ``ref`` inside the inner ellipse."""
        mask = self._inner.to(src.dtype)
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

    # ------------------------------------------------------------------ helpers
    def _run(self, runner: Any, inputs: list[torch.Tensor]) -> torch.Tensor:
        """First output of ``runner`` on ``inputs``, ``config.batch_size`` items per call.

        Exports that fix the batch at 1 (production inswapper_128 and GFPGAN) often
        still run batched once converted to torch; if such a model refuses a batch,
        it is run one item per call from then on.
        """
        step = self.config.batch_size
        n = int(inputs[0].shape[0])
        outs = []
        for start in range(0, n, step):
            part = [t[start : start + step] for t in inputs]
            outs.append(self._call(runner, part))
        return outs[0] if len(outs) == 1 else torch.cat(outs)

    def _call(self, runner: Any, part: list[torch.Tensor]) -> torch.Tensor:
        n = int(part[0].shape[0])
        started = self._clock()
        try:
            if runner.path in self._single and n > 1:
                out = torch.cat([runner.run_torch([t[i : i + 1] for t in part])[0] for i in range(n)])
            else:
                try:
                    out = runner.run_torch(part)[0]
                except RuntimeError as exc:
                    declared = (
                        runner.input_shapes[0][0] if runner.input_shapes and runner.input_shapes[0] else None
                    )
                    if n == 1 or declared != 1:
                        raise
                    log.warning(
                        "%s declares batch 1 and refused a batch of %d (%s); one per call",
                        runner.path,
                        n,
                        exc,
                    )
                    self._single.add(runner.path)
                    out = torch.cat([runner.run_torch([t[i : i + 1] for t in part])[0] for i in range(n)])
        finally:
            self.model_seconds += self._clock() - started
        return out

    def _latent(self, name: str) -> torch.Tensor:
        latent = self._latents.get(name)
        if latent is None:
            latent = torch.from_numpy(np.asarray(self._prepared[name], dtype=np.float32).reshape(-1)).to(
                self.device
            )
            self._latents[name] = latent
        return latent

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
        check_tasks(len(frames), tasks, self._prepared)
