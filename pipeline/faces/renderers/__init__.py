"""Face renderers: one interface (:class:`~pipeline.faces.renderers.base.Renderer`), two paths.

* :mod:`~pipeline.faces.renderers.cpu`: numpy and OpenCV, any backend (the default);
* :mod:`~pipeline.faces.renderers.device`: every pixel on the torch device, for models
  on the torch backend on CUDA (imports torch, so it is imported only when chosen).

:func:`make_renderer` is the one place that chooses between them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pipeline.faces.config import FaceConfig
from pipeline.faces.renderers.base import Renderer
from pipeline.faces.renderers.cpu import FaceRenderer
from pipeline.geometry.types import Identity

if TYPE_CHECKING:
    from pipeline.models.loader import FaceModels

log = logging.getLogger(__name__)


def make_renderer(models: FaceModels, identities: Mapping[str, Identity], config: FaceConfig) -> Renderer:
    """The renderer for these models: device-resident when the swapper is a torch module on CUDA.

    On CUDA, :class:`~pipeline.faces.renderers.device.DeviceFaceRenderer` keeps each batch
    on the GPU from upload to download (align, swap, enhance and paste back there);
    otherwise (ONNX Runtime, or torch on CPU) the numpy/OpenCV :class:`FaceRenderer`.
    Occlusion masks exist only on the latter, so they keep it.
    """
    device = models.swapper.device
    if device is not None and device.type == "cuda":
        if config.occlusion:
            log.warning("faces.occlusion: rendering on the CPU path (no device-resident occlusion)")
        else:
            from pipeline.faces.renderers.device import DeviceFaceRenderer

            return DeviceFaceRenderer(models, identities, config)
    return FaceRenderer(models, identities, config)
