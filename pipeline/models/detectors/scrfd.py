"""SCRFD face detector (insightface det_10g family, 9 outputs), on any Runner.

Model I/O: one input [N|1, 3, H, W], RGB, ``(x - 127.5) / 128``, the frame
letterboxed into the top-left corner of the contract's ``input_size``.
Outputs in graph order: scores, box distances, keypoint offsets, each for
strides 8, 16, 32, with 2 anchors per cell; boxes and keypoints are in units
of the stride.  Outputs are [anchors, k], or [N, anchors, k] for exports with
a dynamic batch, which get whole batches of frames in one call.
The distance decoding is insightface's (``distance2bbox``/``distance2kps``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import cv2
import numpy as np
from insightface.model_zoo.scrfd import distance2bbox, distance2kps

from pipeline.errors import ModelPackError
from pipeline.geometry.types import Face
from pipeline.models.contracts import contract_fraction, contract_size
from pipeline.models.runtime.batching import DETECTOR_STAGES, add_detector_seconds

if TYPE_CHECKING:
    from pipeline.models.pack import ModelEntry
    from pipeline.models.runtime.protocols import Runner

STRIDES = (8, 16, 32)
ANCHORS_PER_CELL = 2


def nms(boxes: np.ndarray, scores: np.ndarray, threshold: float) -> list[int]:
    """Indices kept by greedy non-maximum suppression (IoU > ``threshold`` suppressed), best first."""
    x1, y1, x2, y2 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
    # insightface's SCRFD uses the +1 pixel area convention; keep it so results match.
    areas = (x2 - x1 + 1) * (y2 - y1 + 1)
    order = scores.argsort()[::-1]
    keep: list[int] = []
    while order.size:
        i = int(order[0])
        keep.append(i)
        rest = order[1:]
        w = np.maximum(0.0, np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]) + 1)
        h = np.maximum(0.0, np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]) + 1)
        inter = w * h
        iou = inter / (areas[i] + areas[rest] - inter)
        order = rest[iou <= threshold]
    return keep


class ScrfdDetector:
    """Finds faces (box, 5 landmarks, score) in RGB uint8 frames."""

    def __init__(self, runner: Runner | None, entry: ModelEntry) -> None:
        where = str(entry.file)
        if runner is None:
            raise ModelPackError(where, "the scrfd detector needs a model file")
        if len(runner.output_names) != 9:
            raise ModelPackError(
                where, f"an scrfd model needs 9 outputs, this one has {len(runner.output_names)}"
            )
        self.runner = runner
        self.input_name = runner.input_names[0]
        self.input_size = contract_size(entry.contract, (640, 640), where)  # (width, height)
        self.score_threshold = contract_fraction(entry.contract, "score_threshold", 0.5, where)
        self.nms_threshold = contract_fraction(entry.contract, "nms_threshold", 0.4, where)
        # [N, anchors, k] outputs and a dynamic batch dim mean whole batches per call.
        self.batched = len(runner.output_shapes[0]) == 3 and runner.input_shapes[0][0] is None
        self._centers: dict[tuple[int, int, int], np.ndarray] = {}
        self.stage_seconds = dict.fromkeys(DETECTOR_STAGES, 0.0)

    def _letterbox(self, rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The frame scaled into the top-left of the input canvas, and the (x, y) scales used."""
        if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
            raise ValueError(f"detect needs an RGB uint8 HxWx3 frame, got {rgb.dtype} {rgb.shape}")
        in_w, in_h = self.input_size
        h, w = rgb.shape[:2]
        # Sized and resized as insightface does (truncated size, bilinear), so that
        # scores match the reference pipeline the models were evaluated with.
        if h / w > in_h / in_w:
            new_h, new_w = in_h, max(1, int(in_h * w / h))
        else:
            new_w, new_h = in_w, max(1, int(in_w * h / w))
        canvas = np.zeros((in_h, in_w, 3), dtype=np.uint8)
        canvas[:new_h, :new_w] = cv2.resize(rgb, (new_w, new_h))
        # The resized size, not the ratio, maps model pixels back to frame pixels.
        return canvas, np.array([new_w / w, new_h / h], dtype=np.float64)

    def _anchor_centers(self, height: int, width: int, stride: int) -> np.ndarray:
        key = (height, width, stride)
        centers = self._centers.get(key)
        if centers is None:
            grid = np.stack(list(np.mgrid[:height, :width][::-1]), axis=-1).astype(np.float32)
            centers = np.repeat((grid * stride).reshape(-1, 2), ANCHORS_PER_CELL, axis=0)
            self._centers[key] = centers
        return centers

    def _decode(self, outs: Sequence[np.ndarray], scale: np.ndarray) -> list[Face]:
        in_w, in_h = self.input_size
        scores_all, boxes_all, kps_all = [], [], []
        for i, stride in enumerate(STRIDES):
            centers = self._anchor_centers(in_h // stride, in_w // stride, stride)
            scores = outs[i].reshape(-1)
            if scores.shape[0] != centers.shape[0]:
                raise ModelPackError(
                    self.runner.path,
                    f"stride {stride} gives {scores.shape[0]} scores, expected {centers.shape[0]} "
                    f"({ANCHORS_PER_CELL} anchors per cell at {in_w}x{in_h})",
                )
            keep = np.flatnonzero(scores >= self.score_threshold)
            if keep.size == 0:
                continue
            dist = outs[i + 3].reshape(-1, 4)[keep] * stride
            kps = outs[i + 6].reshape(-1, 10)[keep] * stride
            scores_all.append(scores[keep])
            boxes_all.append(distance2bbox(centers[keep], dist))
            kps_all.append(distance2kps(centers[keep], kps).reshape(-1, 5, 2))
        if not scores_all:
            return []
        scores = np.concatenate(scores_all)
        boxes = np.concatenate(boxes_all) / np.tile(scale, 2)
        kps = np.concatenate(kps_all) / scale
        return [
            Face(box=boxes[i].astype(np.float32), landmarks=kps[i].astype(np.float32), score=float(scores[i]))
            for i in nms(boxes, scores, self.nms_threshold)
        ]

    def detect_batch(self, frames: Sequence[np.ndarray]) -> list[list[Face]]:
        """Faces in each frame, best score first; one model call per batch when the model allows."""
        if not frames:
            return []
        t0 = time.perf_counter()
        prepared = [self._letterbox(f) for f in frames]
        # (x - 127.5) / 128 in float32, NCHW, in one pass (exact: 1/128 is a power of two)
        blob = cv2.dnn.blobFromImages([c for c, _ in prepared], 1.0 / 128.0, mean=(127.5, 127.5, 127.5))
        t1 = time.perf_counter()
        if self.batched:
            outs = self.runner.run({self.input_name: blob})
            t2 = time.perf_counter()
            found = [self._decode([o[j] for o in outs], s) for j, (_, s) in enumerate(prepared)]
            add_detector_seconds(self.stage_seconds, t0, t1, t2)
            return found
        per_frame = [self.runner.run({self.input_name: blob[j : j + 1]}) for j in range(len(prepared))]
        t2 = time.perf_counter()
        # Some exports keep a leading batch axis of 1 on [1, anchors, k] outputs.
        found = [
            self._decode([o.reshape(-1, o.shape[-1]) for o in outs], s)
            for outs, (_, s) in zip(per_frame, prepared)
        ]
        add_detector_seconds(self.stage_seconds, t0, t1, t2)
        return found

    def detect(self, rgb: np.ndarray) -> list[Face]:
        """Faces in one RGB uint8 frame (``Face.embedding`` is None), best score first."""
        return self.detect_batch([rgb])[0]
