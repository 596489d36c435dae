"""Image-sequence plates (scene-linear, log, ACES...) through their OCIO display/view transform.

A review movie is Rec.709 video: a plate's pixels are shown as a viewer of the shot's colour
config would show them on a Rec.709 display (Rec.1886; sRGB where the config has no such display),
with the display's default view (ACES configs: the ACES output transform), not as raw code values.
"""

from __future__ import annotations

import numpy as np
import PyOpenColorIO as ocio

DISPLAYS = ("Rec.1886 Rec.709 - Display", "Rec.709", "sRGB - Display", "sRGB")
"""The displays a review movie prefers, in order (matched by name, then by a name containing them)."""


def review_display(config: ocio.Config) -> str:
    """The display of ``config`` a review movie is shown on (see :data:`DISPLAYS`)."""
    names = [str(d) for d in config.getDisplays()]
    for wanted in DISPLAYS:
        if wanted in names:
            return wanted
    for wanted in ("709", "sRGB"):
        for name in names:
            if wanted in name:
                return name
    return str(config.getDefaultDisplay())


class DisplayView:
    """Converts float RGB in ``space`` of ``config`` to 8-bit display code values."""

    def __init__(self, config: ocio.Config, space: str, display: str | None = None, view: str | None = None):
        self.display = display or review_display(config)
        self.view = view or str(config.getDefaultView(self.display))
        transform = ocio.DisplayViewTransform(src=space, display=self.display, view=self.view)
        self._cpu = config.getProcessor(transform).getDefaultCPUProcessor()

    def __call__(self, rgb: np.ndarray) -> np.ndarray:
        """``rgb`` (HxWx3 float, the space's own values) as uint8 display code values."""
        pixels = np.ascontiguousarray(rgb, dtype=np.float32).copy()
        self._cpu.applyRGB(pixels)
        return np.clip(np.rint(pixels * 255.0), 0, 255).astype(np.uint8)
