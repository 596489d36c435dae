"""What every face renderer shares: the checks of its inputs and its per-identity set-up.

A renderer replaces the faces named by :class:`~pipeline.geometry.types.FaceTask` lists,
frame batch by frame batch: ``render(frames, tasks)`` takes numpy RGB frames (uint8 or
uint16) and one task list per frame, and returns the frames with every task's face
replaced; frames without tasks come back as the very same arrays.
``render_with_mattes(frames, tasks)`` returns the same frames and, per frame, the
exact blend mask ("matte", (H, W) float32 in [0, 1]) of every paste into it, for
compositing passes; None for a frame without tasks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from pipeline.errors import SpecError
from pipeline.faces.config import FaceConfig
from pipeline.geometry.align import Template
from pipeline.geometry.types import FaceTask, Identity

if TYPE_CHECKING:
    from pipeline.models.loader import FaceModels

STAGES = ("align", "swap", "enhance", "paste")
"""Keys of ``stage_seconds``: seconds spent per step, summed over calls."""


class Renderer(Protocol):
    """What the actor and the benchmarks call."""

    stage_seconds: dict[str, float]

    def render(self, frames: Sequence[np.ndarray], tasks: Sequence[Sequence[FaceTask]]) -> list[np.ndarray]:
        """Frames with every task's face replaced; frames without tasks pass through as is."""
        ...

    def render_with_mattes(
        self, frames: Sequence[np.ndarray], tasks: Sequence[Sequence[FaceTask]]
    ) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
        """``render``'s frames (bit-identical), and per frame its matte or None (no tasks).

        A matte is the alpha of every paste into the frame (swap, then enhance; occlusion
        masks included), composed in paste order as ``1 - (1 - matte) * (1 - alpha)``:
        where it is 0 the frame is unchanged.
        """
        ...


@dataclass
class RenderItem:
    """One face to render: its frame (index into the batch), its task, and frame -> crop."""

    frame: int
    task: FaceTask
    affine: np.ndarray  # (2, 3) float64


class RendererBase:
    """Checks the configuration against the pack and prepares every identity once.

    ``faces.enhance`` needs an enhancer and ``faces.occlusion`` an occluder in the pack.
    """

    def __init__(self, models: FaceModels, identities: Mapping[str, Identity], config: FaceConfig) -> None:
        if config.enhance and models.enhancer is None:
            raise SpecError("faces.enhance", "the model pack has no enhancer")
        if config.occlusion and models.occluder is None:
            raise SpecError("faces.occlusion", "the model pack has no occluder")
        self.models = models
        self.config = config
        self.identities = dict(identities)
        swapper = models.swapper
        self.crop_size = int(swapper.crop_size)
        self.template = cast(Template, str(swapper.template))
        # a swapper that blends its own region (the built-in one) is pasted through it, as it is
        mask = swapper.paste_mask
        self.paste_mask = None if mask is None else np.asarray(mask, dtype=np.float32)
        self.recolour = config.color_match and self.paste_mask is None
        """Colour match each swapped face to the plate's before the paste (not one the swapper blended)."""
        # per-identity work (latent, aligned source face) is done once, here
        self._prepared: dict[str, Any] = {
            name: i.prepared if i.prepared is not None else swapper.prepare(i)
            for name, i in self.identities.items()
        }
        self.stage_seconds: dict[str, float] = dict.fromkeys(STAGES, 0.0)

    def check_tasks(self, frame_count: int, tasks: Sequence[Sequence[FaceTask]]) -> None:
        """One task list per frame, every task naming a known identity."""
        if frame_count != len(tasks):
            raise ValueError(f"render got {frame_count} frames but {len(tasks)} task lists")
        for per_frame in tasks:
            for task in per_frame:
                if task.identity not in self._prepared:
                    raise SpecError("selection", f"unknown source identity {task.identity!r}")


def check_frame(frame: np.ndarray) -> None:
    """ValueError unless ``frame`` is an RGB ``HxWx3`` uint8 or uint16 array."""
    if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype not in (np.uint8, np.uint16):
        raise ValueError(f"frames must be RGB HxWx3 uint8 or uint16, got {frame.dtype} {frame.shape}")
