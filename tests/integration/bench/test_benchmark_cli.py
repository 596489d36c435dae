"""The benchmark's command line and package, without running anything (Ray-free)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from bench.quality import qc_cost, quality_of
from bench.scenarios import SCENARIOS
from bench.settings import TINY, Settings
from jobs.benchmark import main, parse_settings
from tests.raytools import REPO


def test_flags_become_settings(no_ray: None) -> None:
    settings, report = parse_settings(["--tiny", "--out", "/x", "--memory", "--no-scaling"])
    assert report is None and settings is not None
    assert settings.out == "/x" and settings.memory and not settings.scaling
    assert all(getattr(settings, key) == value for key, value in TINY.items())
    # the production clip length sets its chunk length: two chunks per clip
    settings, _ = parse_settings(["--production-seconds", "10"])
    assert settings is not None and settings.production_chunk_seconds == 5.0
    # without the comparisons, the scaling figure runs only when asked for
    settings, _ = parse_settings(["--no-compare"])
    assert settings is not None and not settings.compare and not settings.scaling
    assert parse_settings(["--report", "bench.json"]) == (None, "bench.json")
    # the plates scenario and its knobs; --tiny shrinks it, explicit knobs win
    settings, _ = parse_settings(["--plates", "--plates-frames", "3", "--plates-job-frames", "12"])
    assert settings is not None and settings.plates
    assert (settings.plates_frames, settings.plates_job_frames) == (3, 12)
    assert settings.plates_sizes == ("2K", "4K") and settings.plates_job_size == "4K"
    settings, _ = parse_settings(["--tiny", "--plates", "--plates-frames", "5"])
    assert settings is not None and settings.plates_sizes == ("320x180",) and settings.plates_frames == 5
    # the multi-shot job in both dispatch orders
    settings, _ = parse_settings(["--multishot", "--multishot-shots", "3", "--no-compare"])
    assert settings is not None and settings.multishot and settings.multishot_shots == 3
    settings, _ = parse_settings(["--steady", "--no-compare"])
    assert settings is not None and settings.steady and not parse_settings([])[0].steady  # type: ignore[union-attr]
    assert not parse_settings([])[0].multishot  # type: ignore[union-attr]
    with pytest.raises(SystemExit) as exit_:
        parse_settings(["--multishot", "--multishot-shots", "1"])
    assert exit_.value.code == 2


def test_every_scenario_has_its_switch_in_the_settings() -> None:
    names = {f.name for f in fields(Settings)}
    assert [s.key for s in SCENARIOS] == [
        "scaling",
        "memory",
        "demo",
        "multishot",
        "scale",
        "plates",
        "steady",
    ]
    assert {s.key for s in SCENARIOS} <= names
    off = Settings(out="x", scaling=False)
    assert not any(s.enabled(off) for s in SCENARIOS)


@pytest.mark.parametrize(
    "module",
    [
        "jobs.benchmark",
        "bench.suite",
        "bench.models.standins",
        "bench.film_plates.plate_figures",
        "bench.steady",
    ],
)
def test_the_benchmark_imports_nothing_from_tests(module: str, no_ray: None) -> None:
    """The cluster image ships ``jobs/`` without ``tests/``."""
    code = f"import sys, {module}; print(sorted(m for m in sys.modules if m.split('.')[0] == 'tests'))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, check=True, capture_output=True, text=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


def test_a_run_with_nothing_to_measure_writes_an_empty_report(tmp_path: Path, no_ray: None) -> None:
    """No comparisons and no scenarios: no Ray, no production pack, still a table."""
    assert main(["--tiny", "--no-compare", "--no-scaling", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "bench.json").read_text())
    assert results["comparisons"] == [] and results["targets"] == []
    assert not (tmp_path / "tiny-pack").exists()
    assert "targets (" in (tmp_path / "bench.txt").read_text()
    # the table re-renders from bench.json alone
    assert main(["--report", str(tmp_path / "bench.json")]) == 0


def test_quality_row_of_a_shot_qc_read_from_its_qc_file(tmp_path: Path) -> None:
    """A summary's QC names its QC file (``series_url``): the series are read from there."""
    series = {
        "similarity_after": [0.5, None, 0.7, None],
        "coverage": {"replaced": [1, 0, 1, 1], "unreplaced": [0, 1, 0, 2]},
        "flicker": [None, 1.0, 3.0, None],
        "seam": [1.0, None, 2.0, 3.0],
    }
    path = tmp_path / "qc" / "sh.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"shot": "sh", "series": series}))
    qc = {"frames": 4, "counts": {"unreplaced": 1}, "series_url": str(path)}
    assert quality_of(qc) == quality_of({**qc, "series": series})
    q = quality_of(qc)
    assert q is not None and (q["identity_frames"], q["unreplaced_frames"], q["seam_mean"]) == (2, 3, 2.0)


def test_quality_row_of_a_shot_qc() -> None:
    """Means and the 5th percentile over the frames where measured; coverage and flags summed."""
    qc = {
        "frames": 4,
        "counts": {"unreplaced": 1, "seam": 0},
        "series": {
            "similarity_after": [0.5, None, 0.7, None],
            "coverage": {"replaced": [1, 0, 1, 1], "unreplaced": [0, 1, 0, 2]},
            "flicker": [None, 1.0, 3.0, None],
            "seam": [1.0, None, 2.0, 3.0],
        },
    }
    q = quality_of(qc)
    assert q is not None and quality_of(None) is None
    assert (q["frames"], q["identity_frames"], q["flicker_frames"]) == (4, 2, 2)
    assert q["similarity_mean"] == pytest.approx(0.6)
    assert q["similarity_p5"] == pytest.approx(0.51)
    assert (q["unreplaced_frames"], q["flicker_mean"], q["seam_mean"]) == (3, 2.0, 2.0)
    assert q["flags"] == {"unreplaced": 1, "seam": 0}
    q = quality_of({**qc, "series": {**qc["series"], "similarity_after": [None] * 4, "flicker": [None] * 4}})
    assert q is not None and q["similarity_mean"] is None and q["similarity_p5"] is None
    assert q["flicker_mean"] is None


def test_qc_cost_of_two_runs() -> None:
    def run(render: float, swap: float, fps: float) -> dict:
        return {"detail_stage_seconds": {"render": render, "render.swap": swap}, "job_fps": fps}

    cost = qc_cost({"on": run(10.5, 10.0, 1.0), "off": run(10.0, 10.0, 1.05)}, "on", "off")
    assert cost["render_ratio"] == pytest.approx(1.05) and cost["job_fps_ratio"] == pytest.approx(1 / 1.05)
    assert cost["measures_share_on"] == pytest.approx(0.5 / 10.5) and cost["measures_share_off"] == 0.0


def test_multishot_table_puts_both_orders_side_by_side() -> None:
    from bench.multishot import ORDERS, multishot_spec, multishot_table

    def run(first_shot: float) -> dict:
        return {
            "first_shot_seconds": first_shot,
            "first_chunk_seconds": 5.0,
            "setup_seconds": 10.0,
            "wall_seconds": 40.0,
            "job_fps": 9.0,
            "output_sha256": {"shot0": "ab"},
        }

    figures = {
        "shots": 4,
        "size": "720p",
        "sets": {
            "default": {
                "runs": {"analysis_first": run(30.0), "render_first": run(21.5)},
                "identical_outputs": True,
            }
        },
    }
    lines = multishot_table(figures).splitlines()
    assert "first shot" in lines[1]
    assert [line.split()[1] for line in lines[2:]] == list(ORDERS)
    assert lines[2].split()[2:6] == ["30.0", "s", "20.0", "s"]
    assert lines[3].split()[2:6] == ["21.5", "s", "11.5", "s"]
    assert lines[3].endswith("identical")
    assert multishot_table({"error": "boom"}) == "multi-shot job: failed: boom"
    spec = multishot_spec(
        ["/c/a.mp4", "/c/b.mp4"], "/out", "builtin:default", "/s.jpg", "/cache", "render_first"
    )
    assert [s["url"] for s in spec["shots"]] == ["/c/a.mp4", "/c/b.mp4"]
    assert spec["resources"]["dispatch_order"] == "render_first"
