"""A long shot's QC strip chart: a few points per unit of the plot's width, the same line to the eye."""

from __future__ import annotations

import re

import numpy as np

from cluster.report.qc import _points

LEFT, WIDTH, TOP, HEIGHT = 90, 880, 14, 80


def _xy(points: str) -> list[tuple[float, float]]:
    return [(float(a), float(b)) for a, b in (p.split(",") for p in points.split())]


def test_a_long_series_keeps_each_units_first_lowest_highest_and_last_point() -> None:
    rng = np.random.default_rng(2)
    n = 14_400  # a 10-minute shot at 24 fps
    values: list[float | None] = [float(v) for v in np.clip(0.6 + 0.2 * rng.standard_normal(n), -0.2, 1.2)]
    values[100:300] = [None] * 200  # frames without the face
    full = _xy(" ".join(_full_points(values, n)))
    short = _xy(_points(values, n, left=LEFT, width=WIDTH, top=TOP, height=HEIGHT))
    assert len(short) <= 4 * WIDTH < len(full) / 3
    assert set(short) <= set(full)  # points of the full line, in its order
    assert [p[0] for p in short] == sorted(p[0] for p in short)
    # The line reaches every height the full line reaches within each unit of width (x as written
    # is rounded to 0.1, so a point on a unit's edge may sit in the next one: 0.1 of slack).
    for unit in range(WIDTH):
        inner = [y for x, y in full if LEFT + unit + 0.1 <= x <= LEFT + unit + 0.9]
        if not inner:
            continue
        near = [y for x, y in short if LEFT + unit - 0.1 <= x <= LEFT + unit + 1.1]
        assert min(near) <= min(inner) and max(near) >= max(inner), unit


def test_a_short_series_keeps_every_point() -> None:
    values: list[float | None] = [0.1 * (i % 10) for i in range(600)]
    assert _points(values, 600, left=LEFT, width=WIDTH, top=TOP, height=HEIGHT) == " ".join(
        _full_points(values, 600)
    )
    assert re.fullmatch(r"[0-9., ]+", _points(values, 600, left=LEFT, width=WIDTH, top=TOP, height=HEIGHT))


def _full_points(values: list[float | None], n: int) -> list[str]:
    """Every point, as the chart placed them before (x at the frame's centre, y clamped to 0-1)."""
    return [
        f"{LEFT + WIDTH * (i + 0.5) / n:.1f},{TOP + HEIGHT * (1.0 - min(max(v, 0.0), 1.0)):.1f}"
        for i, v in enumerate(values)
        if v is not None
    ]
