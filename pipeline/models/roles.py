"""What each model role offers the rest of the pipeline, whatever class implements it.

The class of a role is chosen by the ``kind`` the pack's manifest declares
(:data:`pipeline.models.loader.KIND_CLASSES`); these protocols are what the
analyser, the identity loader and the two renderers call.  Tensor-level calls
(``swap_tensor``, ``enhance_tensor``) take and return torch tensors and are used
by the device render path; torch is imported only when they run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    import torch

    from pipeline.geometry.types import Face, Identity


class Detector(Protocol):
    """Finds faces (box, five landmarks, score) in uint8 RGB frames."""

    def detect(self, rgb: np.ndarray) -> list[Face]: ...

    def detect_batch(self, frames: Sequence[np.ndarray]) -> list[list[Face]]: ...


class Recognizer(Protocol):
    """L2-normalised identity embeddings of faces aligned to ``template`` at ``crop_size``."""

    template: str
    crop_size: int
    dim: int

    def embed(self, rgb: np.ndarray, faces: Sequence[Face]) -> np.ndarray: ...

    def embed_aligned(self, crops: np.ndarray) -> np.ndarray: ...


class Swapper(Protocol):
    """Replaces aligned target faces with a source identity.

    ``prepare`` runs once per identity; ``swap`` takes uint8 crops (N, S, S, 3);
    ``swap_tensor`` takes crops (N, 3, S, S) holding uint8 values as floats, and the
    sources :meth:`source_tensor` uploaded, and returns the same kind of tensor.

    ``paste_mask``: None for a swapper that returns whole faces, which the renderer
    colour matches and pastes through its feathered crop; an (S, S) float32 mask in
    [0, 1] for one that changes only part of the crop and blends it into the target
    itself (the built-in swapper): the renderer pastes through that mask times its
    feather and leaves the colour as it is, so pixels outside the mask stay the plate's.
    """

    template: str
    crop_size: int

    @property
    def device(self) -> torch.device | None:
        """The torch device the model runs on; None when it does not run on torch."""
        ...

    @property
    def paste_mask(self) -> np.ndarray | None:
        """Where :meth:`swap` changes a crop, already blended (None: the whole face; see above)."""
        ...

    def prepare(self, identity: Identity) -> Any: ...

    def swap(self, crops: np.ndarray, prepared: Sequence[Any]) -> np.ndarray: ...

    def source_tensor(self, prepared: Any, device: torch.device) -> torch.Tensor: ...

    def swap_tensor(
        self, crops8: torch.Tensor, sources: torch.Tensor, *, batch_size: int
    ) -> torch.Tensor: ...


class Enhancer(Protocol):
    """Restores aligned faces; blending the result back is the renderer's job."""

    template: str
    crop_size: int

    @property
    def device(self) -> torch.device | None:
        """The torch device the model runs on; None when it does not run on torch."""
        ...

    def enhance(self, crops: np.ndarray) -> np.ndarray: ...

    def enhance_tensor(self, crops8: torch.Tensor, *, batch_size: int) -> torch.Tensor: ...


class Occluder(Protocol):
    """Masks (N, S, S) in [0, 1] of what covers aligned faces (1 = face visible)."""

    template: str
    crop_size: int

    def mask(self, crops: np.ndarray) -> np.ndarray: ...
