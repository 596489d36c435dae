"""Plates through their OCIO display/view transform: log and ACES plates look as a viewer shows them."""

from __future__ import annotations

import math

import numpy as np
import PyOpenColorIO as ocio

from pipeline.review.view import DisplayView, review_display

SRGB_MID_GREY = 118  # 0.18 linear through the sRGB curve, in 8 bits


def _acescct(linear: float) -> float:
    return (math.log2(linear) + 9.72) / 17.52


def test_acescct_mid_grey_is_shown_near_mid_grey() -> None:
    config = ocio.Config.CreateFromFile("ocio://studio-config-latest")
    view = DisplayView(config, "ACEScct")
    assert view.display == review_display(config) == "Rec.1886 Rec.709 - Display"
    assert "ACES" in view.view  # the config's default view: the ACES output transform
    grey = view(np.full((4, 4, 3), _acescct(0.18), np.float32))
    assert grey.dtype == np.uint8 and grey.shape == (4, 4, 3)
    assert abs(int(grey[0, 0, 0]) - SRGB_MID_GREY) < 35, grey[0, 0]  # tone-mapped, near mid grey
    assert np.ptp(grey) <= 1  # grey stays grey
    # The raw code value would be shown far brighter than that.
    assert round(_acescct(0.18) * 255) - grey[0, 0, 0] > 5


def test_the_view_is_monotonic_and_clipped() -> None:
    config = ocio.Config.CreateFromFile("ocio://studio-config-latest")
    view = DisplayView(config, "ACEScct")
    ramp = np.array([[[_acescct(v)] * 3 for v in (0.01, 0.18, 1.0, 16.0)]], np.float32)
    shown = view(ramp)[0, :, 0].astype(int)
    assert list(shown) == sorted(shown) and shown[0] < shown[-1] <= 255


def test_a_config_without_a_rec709_display_uses_srgb() -> None:
    config = ocio.Config.CreateRaw()  # one display, sRGB, and its Raw view
    assert review_display(config) == "sRGB"
    view = DisplayView(config, "raw")
    assert (view.display, view.view) == ("sRGB", "Raw")
    assert view(np.full((1, 1, 3), 0.5, np.float32))[0, 0, 0] == 128
