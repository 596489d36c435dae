"""Which face of a picture suits a source identity: frontal, eyes open, large enough.

A weight-free swapper (the built-in one) pastes the source's inner face as it is, so a
source looking down, with closed eyes or a strand of hair over an eye, shows as such on
every target.  :func:`pick_portrait` chooses a face by a fixed rule on the detector's
five landmarks and the pixels around the eyes; the same picture always gives the same
face.  Each face is measured (:func:`measure_portrait`) on its ArcFace-template crop at
112 px:

- *fit*: how far the five landmarks are from the frontal template after the best
  similarity (rotation, scale, shift), root mean square, in eye distances.  A turned,
  tilted-back or lowered head, or a strong expression, moves the nose and mouth off
  the template's places.  At most :data:`MAX_FIT`.
- *roll*: the angle of the eye line from level, in degrees.  At most :data:`MAX_ROLL`.
- *eye distance*: pixels between the eyes in the picture.  At least :data:`MIN_EYES_PX`.
- *eyes open*: for each eye, the height of the dark band (iris and pupil, darker than
  :data:`DARK` times the cheek's median grey) through the eye landmark, in eye distances,
  and the smaller of the two: an open eye shows a dark iris about a third of an eye
  distance high, a closed or covered one a lash line or nothing.  At least :data:`MIN_OPEN`.

The face that passes every check wins; among several, the one with the best fit; when
none passes, the one failing fewest checks, then the best fit.  Ties go to the leftmost
face.  Faces are numbered left to right as ``face_index`` numbers them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from pipeline.faces.identity import in_face_index_order
from pipeline.geometry.align import template_points, transform_points, umeyama_similarity, warp_crops
from pipeline.geometry.types import Face

MAX_FIT = 0.12
"""Largest landmark offset from the frontal template (RMS, eye distances) of a frontal face."""
MAX_ROLL = 15.0
"""Largest angle (degrees) between the eye line and the horizontal."""
MIN_EYES_PX = 32.0
"""Fewest pixels between the eyes (the built-in swapper's crop has 70 there)."""
MIN_OPEN = 0.15
"""Least height of each eye's dark band (eye distances) of open eyes."""
DARK = 0.6
"""A row of an eye is dark when its darkest third is below this fraction of the cheek's grey."""
CROP = 112


@dataclass(frozen=True)
class PortraitMeasures:
    """How one face measures against the rule (see the module docstring)."""

    index: int
    fit: float
    roll: float
    eyes_px: float
    eyes_open: float

    def failures(self) -> list[str]:
        """The checks this face fails, as short phrases (empty: it passes all)."""
        failed = []
        if self.fit > MAX_FIT:
            failed.append(f"turned or lowered (fit {self.fit:.3f} > {MAX_FIT})")
        if abs(self.roll) > MAX_ROLL:
            failed.append(f"tilted ({self.roll:+.0f} deg)")
        if self.eyes_px < MIN_EYES_PX:
            failed.append(f"small ({self.eyes_px:.0f} px between the eyes)")
        if self.eyes_open < MIN_OPEN:
            failed.append(f"eyes closed or covered (open {self.eyes_open:.2f} < {MIN_OPEN})")
        return failed


@dataclass(frozen=True)
class PortraitPick:
    """The chosen face (``index``, left to right) and every face's measures."""

    index: int
    faces: tuple[PortraitMeasures, ...]

    def reason(self) -> str:
        """One line: why this face, and what the others fail."""
        chosen = self.faces[self.index]
        failed = chosen.failures()
        why = (
            f"frontal (fit {chosen.fit:.3f} <= {MAX_FIT}), eye line {chosen.roll:+.1f} deg, "
            f"eyes open ({chosen.eyes_open:.2f} >= {MIN_OPEN}), {chosen.eyes_px:.0f} px between the eyes"
            if not failed
            else "the fewest failed checks: " + "; ".join(failed)
        )
        others = [
            f"{m.index}: {m.failures()[0]}" for m in self.faces if m.index != self.index and m.failures()
        ]
        return f"face {self.index} of {len(self.faces)}: {why}" + (
            f"; others {', '.join(others)}" if others else ""
        )


def measure_portrait(rgb: np.ndarray, face: Face, index: int = 0) -> PortraitMeasures:
    """The rule's measures of ``face`` in the uint8 RGB picture ``rgb``."""
    landmarks = np.asarray(face.landmarks, dtype=np.float64)
    template = template_points(CROP)
    affine = umeyama_similarity(landmarks, template)
    residual = transform_points(landmarks, affine) - template
    template_eyes = float(np.linalg.norm(template[1] - template[0]))
    fit = float(np.sqrt((residual**2).sum(axis=1).mean()) / template_eyes)
    dx, dy = landmarks[1] - landmarks[0]
    crops, affines = warp_crops(rgb, [landmarks], CROP)
    grey = cv2.cvtColor(crops[0], cv2.COLOR_RGB2GRAY).astype(np.float32)
    eyes = transform_points(landmarks[:2], affines[0])
    return PortraitMeasures(
        index=index,
        fit=fit,
        roll=float(np.degrees(np.arctan2(dy, dx))),
        eyes_px=float(np.hypot(dx, dy)),
        eyes_open=min(_dark_band(grey, eye, float(np.linalg.norm(eyes[1] - eyes[0]))) for eye in eyes),
    )


def pick_portrait(rgb: np.ndarray, faces: Sequence[Face]) -> PortraitPick:
    """The face of ``rgb`` that best suits a source identity (ValueError when there is none)."""
    if not faces:
        raise ValueError("no face to choose from")
    ordered = in_face_index_order(faces)
    measures = tuple(measure_portrait(rgb, face, i) for i, face in enumerate(ordered))
    best = min(measures, key=lambda m: (len(m.failures()), m.fit, m.index))
    return PortraitPick(index=best.index, faces=measures)


def _dark_band(grey: np.ndarray, eye: np.ndarray, eyes: float) -> float:
    """Height (eye distances) of the dark rows through the darkest row around ``eye``; 0 if none."""

    def span(a: float, b: float, centre: float, limit: int) -> slice:
        return slice(max(0, round(centre + a * eyes)), min(limit, round(centre + b * eyes) + 1))

    height, width = grey.shape
    x, y = float(eye[0]), float(eye[1])
    cheek = grey[span(0.3, 0.5, y, height), span(-0.2, 0.2, x, width)]
    window = grey[span(-0.25, 0.25, y, height), span(-0.1, 0.1, x, width)]
    if cheek.size == 0 or window.size == 0:
        return 0.0
    darkest = np.sort(window, axis=1)[:, : max(1, window.shape[1] // 3)].mean(axis=1)
    dark = darkest < DARK * float(np.median(cheek))
    centre = int(np.argmin(darkest))
    if not dark[centre]:
        return 0.0
    low, high = centre, centre
    while low > 0 and dark[low - 1]:
        low -= 1
    while high < len(dark) - 1 and dark[high + 1]:
        high += 1
    return (high - low + 1) / eyes
