"""Page-locked host buffers for moving batches of frames to and from a CUDA device.

A copy from pageable memory goes through a driver staging buffer and blocks the
host; from page-locked (pinned) memory it is one DMA transfer that can run while the
host prepares the next call.  Pinning memory is slow, so the buffers are allocated
once per frame shape and reused for every batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


class PinnedStaging:
    """Two pinned buffers (upload, download) for batches of ``(N, H, W, 3)`` frames.

    uint8 frames travel as uint8; uint16 frames as int32 (torch has few uint16
    operations; int32 holds the values).  The caller uploads, works on the device,
    then downloads: the download waits for the device, so by the next upload the
    previous one has finished reading the buffer.  Not for concurrent use.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._buffers: dict[str, torch.Tensor] = {}

    def upload(self, frames: Sequence[np.ndarray]) -> torch.Tensor:
        """``frames`` (same shape and dtype, uint8 or uint16) as one tensor on the device."""
        dtype = torch.uint8 if frames[0].dtype == np.uint8 else torch.int32
        buffer = self._buffer("upload", (len(frames), *frames[0].shape), dtype)
        host = buffer.numpy()
        for k, frame in enumerate(frames):
            host[k] = frame  # numpy widens uint16 to int32 on assignment
        return buffer.to(self.device, non_blocking=True)

    def download(self, frames: torch.Tensor, dtype: np.dtype) -> np.ndarray:
        """``frames`` on the host as a new ``dtype`` array (the pinned buffer is kept for the next call)."""
        buffer = self._buffer("download", tuple(frames.shape), frames.dtype)
        buffer.copy_(frames, non_blocking=True)
        torch.cuda.current_stream(self.device).synchronize()
        return buffer.numpy().astype(dtype)

    def _buffer(self, role: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """A pinned tensor of ``shape``: a view of the kept one when it is large enough."""
        kept = self._buffers.get(role)
        if kept is None or kept.dtype != dtype or kept.shape[1:] != shape[1:] or kept.shape[0] < shape[0]:
            kept = torch.empty(shape, dtype=dtype, pin_memory=True)
            self._buffers[role] = kept
        return kept[: shape[0]]
