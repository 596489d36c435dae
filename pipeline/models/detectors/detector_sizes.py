"""The pack's detector at input sizes below the one it was exported at (``faces.detect_size: auto``).

A detector's cost grows with its input's area: YuNet at 320 x 320 costs a sixth of
640 x 640.  :meth:`DetectorSizes.at` gives the pack's detector class (the same
``kind``, the contract's ``input_size`` changed) on a session that takes the smaller
input, made on first use and kept for the actor's life:

* a graph whose input height and width are already free (SCRFD exports) runs at any
  size on the pack's own session;
* a graph exported at a fixed size gets a second session on a copy of its graph with
  the input's height and width made symbolic (:mod:`pipeline.models.runtime.resize`),
  used only when it gives the original's outputs at the exported size on a real
  picture (the frame being analysed);
* either way the graph must run at the new size with outputs that scale with the
  input's area.

A graph that does not (a ``Reshape`` to a constant cell count, several inputs, the
torch backend) keeps its exported size: :attr:`DetectorSizes.refused` says why,
logged once; nothing fails.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np

from pipeline.errors import ModelPackError
from pipeline.models.runtime.ort_runner import OrtRunner
from pipeline.models.runtime.protocols import Runner
from pipeline.models.runtime.resize import free_input_size, outputs_follow_size, same_outputs
from pipeline.models.runtime.settings import ExecutionConfig

if TYPE_CHECKING:
    from pipeline.models.pack import ModelEntry

log = logging.getLogger(__name__)


def input_size(detector: Any) -> tuple[int, int]:
    """The detector's input (width, height): ``input_size`` or ``input_width``/``input_height``."""
    size = getattr(detector, "input_size", None)
    if size is not None:
        return int(size[0]), int(size[1])
    return int(getattr(detector, "input_width", 640)), int(getattr(detector, "input_height", 640))


class DetectorSizes:
    """The pack's detector at other input sizes: one session for all of them, made on first use."""

    def __init__(
        self,
        detector: Any,
        make: Callable[[Runner | None, ModelEntry], Any],
        entry: ModelEntry,
        path: str,
        execution: ExecutionConfig,
    ) -> None:
        self.detector = detector
        self.base = input_size(detector)
        self.refused: str | None = None
        """Why the detector keeps its exported size (None: it does not, or it was not asked yet)."""
        self.rewritten = False
        """Whether the smaller sizes run on a second session with a rewritten graph."""
        self._make, self._entry, self._path, self._execution = make, entry, path, execution
        self._runner: Runner | None = None
        self._made: dict[tuple[int, int], Any] = {}

    def made(self) -> list[Any]:
        """The detectors made at other sizes so far (each keeps its own ``stage_seconds``)."""
        return list(self._made.values())

    def at(self, size: tuple[int, int], frame: np.ndarray) -> Any | None:
        """The detector at input ``size`` (width, height), or None where it keeps its size.

        ``frame`` (RGB uint8): a real picture for the first check of a rewritten graph."""
        if size == self.base:
            return self.detector
        if size in self._made:
            return self._made[size]
        if self.refused is not None:
            return None
        runner = self._runner if self._runner is not None else self._free_runner(frame)
        if runner is None:
            return None
        problem = outputs_follow_size(runner, self.base, size)
        if problem is not None:
            self._runner, self.rewritten = None, False  # the second session goes
            self._refuse(problem)
            return None
        contract = {**self._entry.contract, "input_size": [size[0], size[1]]}
        detector = self._make(runner, self._entry.model_copy(update={"contract": contract}))
        self._made[size] = detector
        return detector

    def _free_runner(self, frame: np.ndarray) -> Runner | None:
        original: Runner | None = getattr(self.detector, "runner", None)
        if original is None or not original.input_shapes:
            self._refuse("it has no ONNX graph")
            return None
        shape = original.input_shapes[0]
        if len(shape) == 4 and shape[2] is None and shape[3] is None:
            self._runner = original  # already free: the pack's own session runs every size
            return original
        if self._execution.backend != "onnxruntime":
            self._refuse(f"its input is fixed and the {self._execution.backend} backend runs it as exported")
            return None
        graph, why = free_input_size(self._path)
        if graph is None:
            self._refuse(why)
            return None
        try:
            runner = OrtRunner(self._path, self._execution, graph=graph)
        except ModelPackError as exc:
            self._refuse(f"the rewritten graph does not load ({exc})")
            return None
        w, h = self.base
        picture = cv2.resize(np.ascontiguousarray(frame), (w, h), interpolation=cv2.INTER_AREA)
        feed = np.ascontiguousarray(picture.transpose(2, 0, 1)[None], dtype=np.float32)
        problem = same_outputs(original, runner, feed)
        if problem is not None:
            self._refuse(problem)
            return None
        log.info("%s: input made free of its %dx%d for smaller sizes", os.path.basename(self._path), w, h)
        self._runner, self.rewritten = runner, True
        return runner

    def _refuse(self, why: str) -> None:
        w, h = self.base
        self.refused = (
            f"faces.detect_size auto: detector {os.path.basename(self._path)} keeps its {w}x{h} input: {why}"
        )
        log.warning("%s", self.refused)
