"""YuNet face detector (libfacedetection / OpenCV Zoo, 2023mar), ONNX Runtime.

Model I/O (float rewrite in the default pack): input ``input`` [N, 3, 640, 640], BGR,
raw 0..255 (no normalisation, as OpenCV's ``FaceDetectorYN`` feeds it); outputs per
stride s in (8, 16, 32): ``cls_s``, ``obj_s`` [N, cells, 1] (already sigmoid),
``bbox_s`` [N, cells, 4] (dx, dy, log w, log h in stride units), ``kps_s`` [N, cells, 10]
(offsets in stride units from the cell corner).  One prior per cell; score =
sqrt(cls * obj).  Landmarks come out right eye, left eye, nose, right mouth, left mouth
of the subject, i.e. left-to-right in the picture: insightface order.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np

from pipeline.errors import ModelPackError
from pipeline.geometry.types import Face
from pipeline.models.runtime.batching import DETECTOR_STAGES, add_detector_seconds, run_batched

if TYPE_CHECKING:
    from pipeline.models.pack import ModelEntry
    from pipeline.models.runtime.protocols import Runner

log = logging.getLogger(__name__)

STRIDES = (8, 16, 32)


class YunetDetector:
    """Finds faces and their five landmarks in RGB uint8 frames."""

    def __init__(self, runner: Runner | None, entry: ModelEntry) -> None:
        if runner is None:
            raise ModelPackError(str(entry.file), "the yunet detector needs a model file")
        contract: dict[str, Any] = dict(entry.contract)
        self.runner = runner
        self.input_width, self.input_height = (int(v) for v in contract.get("input_size", (640, 640)))
        self.score_threshold = float(contract.get("score_threshold", 0.6))
        self.nms_threshold = float(contract.get("nms_threshold", 0.3))
        self.max_faces = int(contract.get("max_faces", 256))
        self.input_name = runner.input_names[0]
        names = list(runner.output_names)
        missing = [
            f"{k}_{s}" for k in ("cls", "obj", "bbox", "kps") for s in STRIDES if f"{k}_{s}" not in names
        ]
        if missing:
            raise ModelPackError(str(entry.file), f"yunet outputs {missing} are missing (has {names})")
        self._index = {name: i for i, name in enumerate(names)}
        self.stage_seconds = dict.fromkeys(DETECTOR_STAGES, 0.0)
        # cell corners (x, y) per stride, in input pixels / stride
        self._grids = {}
        for s in STRIDES:
            cols, rows = self.input_width // s, self.input_height // s
            xs, ys = np.meshgrid(np.arange(cols, dtype=np.float32), np.arange(rows, dtype=np.float32))
            self._grids[s] = np.stack([xs.ravel(), ys.ravel()], axis=1)

    def detect(self, rgb: np.ndarray) -> list[Face]:
        """Faces in one RGB uint8 frame (``embedding`` is None), highest score first."""
        return self.detect_batch([rgb])[0]

    def detect_batch(self, frames: Sequence[np.ndarray]) -> list[list[Face]]:
        """Faces in several RGB uint8 frames with one model call."""
        if not frames:
            return []
        t0 = time.perf_counter()
        blob, scales = letterbox_bgr(frames, self.input_width, self.input_height)
        t1 = time.perf_counter()
        outputs = run_batched(self.runner, {self.input_name: blob})
        t2 = time.perf_counter()
        found = [self._decode(outputs, i, scales[i], frames[i].shape[:2]) for i in range(len(frames))]
        add_detector_seconds(self.stage_seconds, t0, t1, t2)
        return found

    def _decode(self, outputs: list[np.ndarray], i: int, scale: float, hw: tuple[int, ...]) -> list[Face]:
        boxes, scores, points = [], [], []
        for s in STRIDES:
            cls = outputs[self._index[f"cls_{s}"]][i, :, 0]
            obj = outputs[self._index[f"obj_{s}"]][i, :, 0]
            score = np.sqrt(np.clip(cls, 0, 1) * np.clip(obj, 0, 1))
            keep = np.nonzero(score >= self.score_threshold)[0]
            if keep.size == 0:
                continue
            grid = self._grids[s][keep]
            bbox = outputs[self._index[f"bbox_{s}"]][i, keep]
            kps = outputs[self._index[f"kps_{s}"]][i, keep].reshape(-1, 5, 2)
            centre = (grid + bbox[:, :2]) * s
            size = np.exp(bbox[:, 2:4]) * s
            boxes.append(np.concatenate([centre - size / 2, centre + size / 2], axis=1))
            points.append((kps + grid[:, None, :]) * s)
            scores.append(score[keep])
        if not boxes:
            return []
        return _nms_faces(
            np.concatenate(boxes) / scale,
            np.concatenate(points) / scale,
            np.concatenate(scores),
            self.nms_threshold,
            self.max_faces,
            hw,
        )


def _nms_faces(
    boxes: np.ndarray,
    points: np.ndarray,
    scores: np.ndarray,
    nms_threshold: float,
    max_faces: int,
    hw: tuple[int, ...],
) -> list[Face]:
    """Non-maximum suppression; boxes are clipped to the frame, landmarks kept as found."""
    xywh = np.concatenate([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]], axis=1)
    keep = cv2.dnn.NMSBoxes(xywh.tolist(), scores.astype(float).tolist(), 0.0, nms_threshold, top_k=max_faces)
    h, w = hw
    faces = []
    for k in np.asarray(keep, dtype=int).reshape(-1):
        box = boxes[k].copy()
        box[[0, 2]] = np.clip(box[[0, 2]], 0, w)
        box[[1, 3]] = np.clip(box[[1, 3]], 0, h)
        faces.append(
            Face(box=box.astype(np.float32), landmarks=points[k].astype(np.float32), score=float(scores[k]))
        )
    faces.sort(key=lambda f: -f.score)
    return faces


def letterbox_bgr(
    frames: Sequence[np.ndarray], width: int, height: int, *, mean: np.ndarray | None = None
) -> tuple[np.ndarray, list[float]]:
    """RGB uint8 frames scaled into the top-left of a ``width`` x ``height`` BGR NCHW float blob.

    With ``mean`` (shape (3, 1, 1), BGR) it is subtracted and the padding is set to
    ``-mean``, i.e. "mean grey", what mean-subtracting networks saw in training.
    Returns the blob and each frame's scale factor.
    """
    blob = np.zeros((len(frames), 3, height, width), dtype=np.float32)
    scales = []
    for i, rgb in enumerate(frames):
        if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
            raise ValueError(f"detect wants RGB uint8 HxWx3, got {rgb.dtype} {rgb.shape}")
        h, w = rgb.shape[:2]
        scale = min(width / w, height / h)
        nw, nh = max(1, round(w * scale)), max(1, round(h * scale))
        resized = cv2.resize(rgb, (nw, nh), interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)
        bgr = resized[:, :, ::-1].transpose(2, 0, 1)  # RGB -> BGR, NCHW
        if mean is None:
            blob[i, :, :nh, :nw] = bgr
        else:
            blob[i] = -mean
            blob[i, :, :nh, :nw] = bgr - mean
        scales.append(scale)
    return blob, scales
