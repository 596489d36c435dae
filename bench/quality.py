"""The quality figures of a Recast run, read from its own job summary (no extra render).

QC runs in the render actors and the driver of every Recast job; a shot's summary
carries its QC as ``qc``, whose numbers per frame are in the shot's QC file
(``series_url``, read by :func:`cluster.report.qcfile.load_series`).  :func:`quality_of`
reduces that to one row of the benchmark's table, and :func:`qc_cost` compares a run
with QC on against the same run with ``qc: {enabled: false}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from cluster.report.qcfile import load_series

IDENTITY_EVERY = 4
"""``qc.identity_every`` of the benchmark's Recast runs (production default 12): a 2-4 s
clip then has enough frames with the output identity measured for a mean and a 5th
percentile.  The recognizer runs on these frames, so QC costs a little more here than
at the default; the QC cost figure is an upper bound for it."""


def _measured(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None]


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def quality_of(qc: dict[str, Any] | None) -> dict[str, Any] | None:
    """One shot's QC (``ShotSummary.qc``) as the benchmark's quality row; None when QC did not run.
    Its series are read from its QC file (``series_url``), or taken from ``series`` where it has them.

    ``similarity_mean`` / ``similarity_p5``: identity similarity after the swap over the frames
    where it was measured (``identity_frames`` of ``frames``); ``unreplaced_frames``: the
    coverage ``unreplaced`` counts summed (face-frames left as the plate); ``flicker_mean``:
    output vs plate change ratio; ``seam_mean``: seam strength; ``flags``: flags per reason.
    """
    if qc is None:
        return None
    series = load_series(qc)
    similarity = _measured(series["similarity_after"])
    flicker = _measured(series["flicker"])
    seam = _measured(series["seam"])
    return {
        "frames": int(qc["frames"]),
        "identity_frames": len(similarity),
        "similarity_mean": _mean(similarity),
        "similarity_p5": float(np.percentile(similarity, 5)) if similarity else None,
        "unreplaced_frames": int(sum(series["coverage"].get("unreplaced", ()))),
        "flicker_frames": len(flicker),
        "flicker_mean": _mean(flicker),
        "seam_mean": _mean(seam),
        "flags": {str(k): int(v) for k, v in qc["counts"].items()},
    }


def qc_cost(runs: dict[str, dict[str, Any]], on: str, off: str) -> dict[str, Any]:
    """QC on (run ``on``) vs off (run ``off``): two Recast runs of the same clip and actors.

    ``render_ratio``: the render stage's actor-seconds (where the actors measure each
    replaced face: mattes, grids, seams and identity) with QC over without;
    ``job_fps_ratio``: the job's fps with QC over without (below 1: QC slows the job).
    Two runs one after the other on a shared machine differ by more than 5 % in their
    swap seconds alone, so ``measures_share_on`` says the same from one run: the share of
    its render seconds outside the renderer's own sub-stages (align, swap, enhance, paste),
    which is QC's face measures and identity embeds (its mattes are inside paste);
    ``measures_share_off`` is that share without QC (about 0).
    """
    render_on = runs[on]["detail_stage_seconds"]["render"]
    render_off = runs[off]["detail_stage_seconds"]["render"]
    fps_on, fps_off = runs[on]["job_fps"], runs[off]["job_fps"]
    return {
        "on": on,
        "off": off,
        "render_seconds_on": render_on,
        "render_seconds_off": render_off,
        "render_ratio": render_on / render_off if render_off > 0 else None,
        "job_fps_on": fps_on,
        "job_fps_off": fps_off,
        "job_fps_ratio": fps_on / fps_off if fps_off > 0 else None,
        "measures_share_on": _outside_share(runs[on]["detail_stage_seconds"]),
        "measures_share_off": _outside_share(runs[off]["detail_stage_seconds"]),
    }


def _outside_share(stages: dict[str, float]) -> float | None:
    """The share of the render stage outside its ``render.*`` sub-stages."""
    render = stages.get("render", 0.0)
    inside = sum(v for k, v in stages.items() if k.startswith("render."))
    return max(0.0, render - inside) / render if render > 0 else None
