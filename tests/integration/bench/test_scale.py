"""The driver's scale benchmark at test size: the real driver, real Ray, simulated actors.

Checks what the figures rest on, not the figures: every shot is published, every
chunk's records are written and read back by the resume scan, the actors' calls
are all accounted for, and the table marks its targets.
"""

from __future__ import annotations

import json

import pytest

from bench.driver_scale.scale import ScaleSettings, run_scale, scale_table

pytestmark = pytest.mark.ray


def test_a_simulated_job_runs_through_the_real_driver(tmp_path, ray_local) -> None:
    settings = ScaleSettings(
        out=str(tmp_path / "scale"), shots=6, chunks_per_shot=3, actors=12, hosts=3, time_scale=0.02
    )
    figures = run_scale(settings)

    assert figures["ok"] and figures["shots_published"] == 6
    assert figures["chunks"] == 18
    assert figures["work_items"] == 36  # one analysis and one render per chunk
    assert figures["actors"] == 12
    # Records: per chunk its analysis, tracking and render; per shot its published output; the job's own.
    assert figures["manifest_records_written"] == 3 * 18 + 6 + 1
    assert (figures["analysis"], figures["tracking"], figures["shots"]) == (18, 18, 6)
    assert 0 < figures["calls_measured"] < 36  # every actor's first call waited for its start-up, not counted
    # The driver's own delay: once per call handed to an idle actor (each of 12 actors at least once).
    assert (
        12 <= figures["dispatch_delays"] <= 36
        and 0 <= figures["dispatch_p50_ms"] <= figures["dispatch_p99_ms"]
    )
    assert (
        figures["planner_cpu_seconds_per_1000_chunks"] > 0
    )  # tracking and planning ran in the planner actors
    assert figures["report_rewrites"] >= 1 and figures["report_seconds_final"] < 30
    report = json.loads((tmp_path / "scale" / "work" / "report.json").read_text())
    assert {s["status"] for s in report["shots"]} == {"published"}
    assert len(report["timeline"]) == 36
    outputs = sorted(p.name for p in (tmp_path / "scale" / "deliveries").iterdir())
    assert outputs == [f"sh{i:04d}.mov" for i in range(6)]
    assert not (tmp_path / "scale" / "work" / "segments").exists()  # cleaned once published

    assert 0 < figures["first_shot_seconds"] <= figures["wall_seconds"]

    table = scale_table(figures)
    assert "resume scan" in table and ("met" in table or "MISSED" in table)
    assert "dispatch delay" in table and "planner actors' CPU per chunk" in table
    line = next(x for x in table.splitlines() if "time to first published shot" in x)
    assert line.endswith(f" {figures['first_shot_seconds']:.1f} s")
