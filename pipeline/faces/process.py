"""One-pass frame processing: analyze -> select -> render (no tracking).

The distributed renderer tracks faces across a chunk and builds :class:`FaceTask` lists
itself; this is the naive per-frame path used by tests, previews and benchmarks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from pipeline.faces.analyze import FaceAnalyzer
from pipeline.faces.config import FaceConfig, SelectionConfig
from pipeline.faces.identity import Identity
from pipeline.faces.render import FaceRenderer
from pipeline.faces.select import check_selection, select_faces
from pipeline.faces.types import FaceTask

if TYPE_CHECKING:
    from pipeline.models.loader import FaceModels


class FrameProcessor:
    """Detect, select, swap and paste faces in batches of frames."""

    def __init__(
        self,
        models: FaceModels,
        identities: Mapping[str, Identity],
        selection: SelectionConfig,
        config: FaceConfig,
    ) -> None:
        check_selection(selection, identities)
        self.selection = selection
        self.identities = dict(identities)
        self.analyzer = FaceAnalyzer(models, batch_size=config.batch_size)
        self.renderer = FaceRenderer(models, identities, config)

    def process(self, frames: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Processed frames, same order, dtype and size; untouched where no face is selected."""
        faces = self.analyzer.analyze(frames, embed=self.selection.mode == "reference")
        tasks = [
            [
                FaceTask(track_id=-1, identity=source, box=face.box, landmarks=face.landmarks)
                for face, source in select_faces(per_frame, self.selection, self.identities)
            ]
            for per_frame in faces
        ]
        return self.renderer.render(frames, tasks)

    @property
    def stage_seconds(self) -> dict[str, float]:
        """Seconds spent per stage so far: detect, recognize, align, swap, enhance, paste."""
        return {**self.analyzer.stage_seconds, **self.renderer.stage_seconds}
