"""Stability: landmarks that shake, replaced regions that flicker, seams that show.

- *jitter*: the second difference of a track's smoothed task landmarks (pixels per
  frame squared, mean over the five points) over its eye distance; a face that moves
  smoothly has none, whatever its speed.
- *flicker*: from the actors' GRID x GRID mean colours.  Between a frame and the
  previous one of the same track, the output region's change minus the plate's own
  change there (what the render added), over the plate's change (at least
  ``flicker_floor``).  A lighting change present in the plate is in both and cancels;
  a render that alternates on a still plate does not.  Residual changes below
  ``flicker_floor`` are never flicker.  The pair that straddles a chunk boundary
  (the last frame of one chunk, the first of the next) is measured like any other
  and its flags cover both frames, marked ``extra["chunk_boundary"]``.
- *seam*: the actors' matte-edge gradient ratio.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.qc.config import QcConfig
from pipeline.qc.marks import Mark, ShotTracks, excess_severity
from pipeline.qc.records import FaceMeasure


@dataclass(frozen=True)
class Stability:
    """Per analysed frame the worst value over tracks (None: nothing measured), and the marks."""

    jitter: list[float | None]
    flicker: list[float | None]
    seam: list[float | None]
    boundary_flicker: dict[int, float | None]
    """Analysed index of each chunk start -> worst flicker across that boundary."""
    marks: list[Mark]


def _worst(values: list[float | None], i: int, value: float) -> None:
    held = values[i]
    values[i] = value if held is None else max(held, value)


def jitter(tracks: ShotTracks, n: int, config: QcConfig) -> tuple[list[float | None], list[Mark]]:
    """Landmark acceleration over eye distance for every task with tasks on both neighbouring frames."""
    series: list[float | None] = [None] * n
    marks: list[Mark] = []
    for tid, tasks in sorted(tracks.tasks.items()):
        for i, task in sorted(tasks.items()):
            prev, nxt = tasks.get(i - 1), tasks.get(i + 1)
            if prev is None or nxt is None:
                continue
            here = np.asarray(task.landmarks, np.float64)
            acc = np.asarray(nxt.landmarks, np.float64) - 2.0 * here + np.asarray(prev.landmarks, np.float64)
            eyes = float(np.linalg.norm(here[1] - here[0]))
            if eyes <= 0:
                continue
            value = float(np.mean(np.linalg.norm(acc, axis=1))) / eyes
            _worst(series, i, value)
            if value > config.max_jitter:
                marks.append(
                    Mark(
                        index=i,
                        track=tid,
                        reason="jitter",
                        severity=excess_severity(value, config.max_jitter, 0.2, 0.6),
                        value=value,
                        threshold=config.max_jitter,
                        detail=f"landmarks accelerate {value * eyes:.2f} px/frame² (eye distance {eyes:.0f} px)",
                    )
                )
    return series, marks


def flicker_value(previous: FaceMeasure, current: FaceMeasure, floor: float) -> float:
    """What the render changed in the face region between two frames, relative to the plate's change."""
    sizes = {len(g) for g in (previous.out_grid, previous.plate_grid, current.out_grid, current.plate_grid)}
    if len(sizes) != 1:
        raise ValueError(f"frames {previous.frame}-{current.frame}: grids of different sizes {sorted(sizes)}")
    d_out = np.subtract(current.out_grid, previous.out_grid)
    d_plate = np.subtract(current.plate_grid, previous.plate_grid)
    added = float(np.mean(np.abs(d_out - d_plate)))
    if added < floor:
        return 0.0
    return added / max(float(np.mean(np.abs(d_plate))), floor)


def stability(
    tracks: ShotTracks,
    measures: Sequence[tuple[int, FaceMeasure]],
    n: int,
    chunk_starts: Sequence[int],
    config: QcConfig,
) -> Stability:
    """Jitter from the tasks; flicker and seam from ``(analysed index, measure)`` pairs."""
    jitter_series, marks = jitter(tracks, n, config)
    flicker: list[float | None] = [None] * n
    seam: list[float | None] = [None] * n
    starts = {s for s in chunk_starts if s > 0}
    boundary: dict[int, float | None] = {s: None for s in sorted(starts)}
    by_track: dict[int, dict[int, FaceMeasure]] = {}
    for i, m in measures:
        by_track.setdefault(m.track, {})[i] = m
        _worst(seam, i, m.seam)
        if m.seam > config.max_seam:
            marks.append(
                Mark(
                    index=i,
                    track=m.track,
                    reason="seam",
                    severity=excess_severity(m.seam, config.max_seam, 0.3, 0.6),
                    value=m.seam,
                    threshold=config.max_seam,
                    detail=f"matte edge {m.seam:.2f}x as sharp as the plate's there",
                )
            )
    for tid, frames in sorted(by_track.items()):
        for i, m in sorted(frames.items()):
            prev = frames.get(i - 1)
            if prev is None:
                continue
            value = flicker_value(prev, m, config.flicker_floor)
            _worst(flicker, i, value)
            at_boundary = i in starts
            if at_boundary:
                held = boundary[i]
                boundary[i] = value if held is None else max(held, value)
            if value <= config.max_flicker:
                continue
            severity = excess_severity(value, config.max_flicker, 0.3, 0.7)
            detail = f"the render changed the face {value:.1f}x more than the plate changed"
            if at_boundary:
                detail += " (across a chunk boundary)"
            for index in (i - 1, i) if at_boundary else (i,):
                marks.append(
                    Mark(
                        index=index,
                        track=tid,
                        reason="flicker",
                        severity=severity,
                        value=value,
                        threshold=config.max_flicker,
                        detail=detail,
                        extra={"chunk_boundary": at_boundary},
                    )
                )
    return Stability(jitter=jitter_series, flicker=flicker, seam=seam, boundary_flicker=boundary, marks=marks)
