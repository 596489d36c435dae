"""One chunk's frames rendered batch by batch: faces, marks, mattes when passes or QC need them,
and the QC measures of every replaced face (:mod:`pipeline.qc.measure`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from actors.marking import FrameMarker
from pipeline.faces.boxfix import refine_box_tasks
from pipeline.geometry.types import FaceTask
from pipeline.qc.config import QcConfig
from pipeline.qc.measure import add_identity, measure_frame
from pipeline.qc.records import FaceMeasure
from pipeline.video.chunking import Chunk
from pipeline.video.decode import Frame

if TYPE_CHECKING:
    from pipeline.faces.renderers.base import Renderer
    from pipeline.models.roles import Detector


@dataclass(frozen=True, eq=False)
class Rendered:
    """A frame as rendered: ``out`` None when nothing changed it, ``matte`` None when no face was pasted."""

    frame: Frame
    out: np.ndarray | None
    matte: np.ndarray | None

    @property
    def pixels(self) -> np.ndarray:
        return self.frame.rgb if self.out is None else self.out


@dataclass(frozen=True)
class IdentityCheck:
    """How QC measures the output faces' identity: the recognizer and every identity's embedding."""

    embed: Callable[[np.ndarray], np.ndarray]
    crop_size: int
    references: Mapping[str, np.ndarray]


class BatchRenderer:
    """``batch -> [Rendered]`` for the process stage of one chunk; QC measures collect in ``measures``."""

    def __init__(
        self,
        renderer: Renderer,
        chunk: Chunk,
        tasks_per_frame: Sequence[Sequence[FaceTask]],
        *,
        mark: FrameMarker | None,
        mattes: bool,
        qc: QcConfig | None,
        identity: IdentityCheck | None,
        renderer_for: Callable[[Mapping[str, object]], Renderer] | None = None,
        detector: Detector | None = None,
    ) -> None:
        """``renderer_for``: the renderer of frames whose tasks carry ``extra["faces"]`` (a fix's
        ``faces`` keys for its frames, :mod:`pipeline.tracking.fixes`); None: ``renderer`` for all.
        ``detector``: finds the landmarks of faces a fix boxed (:mod:`pipeline.faces.boxfix`)."""
        self.renderer = renderer
        self.detector = detector
        self.renderer_for = renderer_for
        self.chunk = chunk
        self.tasks_per_frame = tasks_per_frame
        self.mark = mark
        self.mattes = mattes or (qc is not None and qc.enabled)
        self.qc = qc if qc is not None and qc.enabled else None
        self.identity = identity
        self.measures: list[FaceMeasure] = []

    def __call__(self, frames: list[Frame]) -> list[Rendered]:
        tasks = [self.tasks_per_frame[f.index - self.chunk.start_frame] for f in frames]
        if self.detector is not None:
            tasks = [refine_box_tasks(t, f.rgb, self.detector) for f, t in zip(frames, tasks, strict=True)]
        if not any(tasks) and (self.mark is None or not self.mark.review_label):  # nothing to change
            return [Rendered(f, None, None) for f in frames]
        mattes: list[np.ndarray | None] = [None] * len(frames)
        outs: list[np.ndarray] = [f.rgb for f in frames]
        groups = self._groups(tasks)
        if len(groups) == 1:  # one renderer for the batch (no fix's faces settings): the whole batch to it
            groups = [(groups[0][0], list(range(len(frames))))]
        for renderer, positions in groups:
            pictures, group = [frames[i].rgb for i in positions], [tasks[i] for i in positions]
            if self.mattes:
                done, done_mattes = renderer.render_with_mattes(pictures, group)
            else:
                done, done_mattes = renderer.render(pictures, group), [None] * len(positions)
            for i, out, matte in zip(positions, done, done_mattes, strict=True):
                outs[i], mattes[i] = out, matte
        if self.mark is not None:
            # After the faces are rendered, before encoding: the mark lives in the new faces.
            outs = [self.mark(f.index, out, t) for f, out, t in zip(frames, outs, tasks, strict=True)]
        rendered = [
            Rendered(f, None if out is f.rgb else out, matte)
            for f, out, matte in zip(frames, outs, mattes, strict=True)
        ]
        if self.qc is not None:
            self._measure(rendered, tasks)
        return rendered

    def _groups(self, tasks: list[Sequence[FaceTask]]) -> list[tuple[Renderer, list[int]]]:
        """The batch's frames with tasks, by the renderer each needs (one group unless fixes set ``faces``)."""
        groups: dict[str, tuple[Renderer, list[int]]] = {}
        for i, frame_tasks in enumerate(tasks):
            if not frame_tasks:
                continue
            overrides = frame_tasks[0].extra.get("faces") if self.renderer_for is not None else None
            key = repr(sorted(overrides.items())) if overrides else ""
            if key not in groups:
                renderer = self.renderer_for(overrides) if overrides and self.renderer_for else self.renderer
                groups[key] = (renderer, [])
            groups[key][1].append(i)
        return list(groups.values())

    def _measure(self, rendered: list[Rendered], tasks: list[Sequence[FaceTask]]) -> None:
        assert self.qc is not None
        batch: list[FaceMeasure] = []
        for item, frame_tasks in zip(rendered, tasks, strict=True):
            if frame_tasks:
                batch.extend(
                    measure_frame(item.frame.index, item.frame.rgb, item.pixels, item.matte, frame_tasks)
                )
        if self.identity is not None and batch:
            by_index = {item.frame.index: item for item in rendered}
            batch = add_identity(
                batch,
                {i: item.pixels for i, item in by_index.items()},
                {item.frame.index: t for item, t in zip(rendered, tasks, strict=True)},
                every=self.qc.identity_every,
                embed=self.identity.embed,
                crop_size=self.identity.crop_size,
                references=self.identity.references,
            )
        self.measures.extend(batch)
