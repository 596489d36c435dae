"""Smoke test of the benchmark job at test scale (``--tiny``): it runs end to end and reports.

Runs ``python -m jobs.benchmark --tiny`` in a subprocess (its own private Ray
instance, as a user would run it) and checks that ``bench.json`` has every
figure of the report, with the ratios computed from the measured values.
No timing assertions: the figures of a tiny run on a shared machine mean nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.raytools import RAY_ENV, REPO

pytestmark = [pytest.mark.ray, pytest.mark.slow]  # starts its own Ray instance

STAGES = {"decode", "detect+recog", "align", "swap", "enhance", "paste", "encode"}


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    out = tmp_path_factory.mktemp("bench")
    env = {**os.environ, **RAY_ENV}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "jobs.benchmark", "--tiny", "--out", str(out)],
        check=False,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(out / "bench.json") as fh:
        results = json.load(fh)
    text = (out / "bench.txt").read_text()
    assert proc.stdout.strip().endswith(text.strip().splitlines()[-1].strip())
    return results, text


def test_every_runner_renders_every_frame(bench: tuple[dict, str]) -> None:
    results, _ = bench
    cores = results["machine"]["cores"]
    sets = {c["set"] for c in results["comparisons"]}
    assert sets == {"default", "production"}
    for comp in results["comparisons"]:
        runs = comp["runs"]
        # production set: also Recast without the Winograd rewrite (ablation) and without QC (its cost)
        extra = {f"recast_{cores}_direct", f"recast_{cores}_noqc"} if comp["set"] == "production" else set()
        assert set(runs) == {"naive", "recast_1", f"recast_{cores}"} | extra
        frames = {run["frames"] for run in runs.values()}
        assert len(frames) == 1 and frames.pop() == 48  # 2 s at 24 fps, every frame out
        for name, run in runs.items():
            # real faces are found and replaced in every frame by every runner
            assert run["faces_swapped"] >= run["frames"], (comp["label"], name)
            assert run["fps"] > 0
            assert STAGES <= set(run["stage_seconds"])
            assert run["stage_seconds"]["swap"] > 0
            assert 0 < run["model_busy_share"] <= 1.5
            assert run["speedup"] == pytest.approx(run["fps"] / runs["naive"]["fps"])
        assert runs["recast_1"]["actors"] == 1 and runs[f"recast_{cores}"]["actors"] == cores
        for name in ("recast_1", f"recast_{cores}", *extra):
            run = runs[name]
            assert {"upload", "merge"} <= set(run["stage_seconds"])
            assert run["chunks"] == 2
            # one peak per actor process, read from /proc while the job ran
            assert len(run["peak_rss_mb"]) == run["actors"]
            assert all(p > 50 for p in run["peak_rss_mb"])
            assert run["merge_mb_per_s"] > 0
            assert run["first_chunk_seconds"] > 0
        assert comp["actors_time_ratio"] == pytest.approx(
            runs[f"recast_{cores}"]["seconds"] / runs["recast_1"]["seconds"]
        )


def test_ceiling_and_targets(bench: tuple[dict, str]) -> None:
    results, text = bench
    for comp in results["comparisons"]:
        ceiling = comp["ceiling"]
        per = ceiling["cpu_seconds_per_frame"]
        assert {"decode", "detect", "recognize", "swap", "paste", "encode"} <= set(per)
        assert ceiling["total_cpu_seconds_per_frame"] == pytest.approx(sum(per.values()), abs=1e-4)
        assert ceiling["limit_fps"] == pytest.approx(
            ceiling["cores"] / ceiling["total_cpu_seconds_per_frame"], rel=1e-3
        )
        assert ceiling["efficiency"] == pytest.approx(ceiling["achieved_fps"] / ceiling["limit_fps"])
        assert ceiling["faces_per_frame"] >= 1
        assert ceiling["winograd"] is True
        if comp["set"] == "production":
            # the naive loop's models (direct convolutions) get their own ceiling
            direct = ceiling["direct"]
            assert direct["winograd"] is False and direct["frames"] == ceiling["frames"]
            assert ceiling["naive_efficiency"] == pytest.approx(
                comp["runs"]["naive"]["fps"] / direct["limit_fps"]
            )
            assert (
                direct["achieved_fps"] == comp["runs"][f"recast_{results['machine']['cores']}_direct"]["fps"]
            )
    verdicts = {row["what"]: row for row in results["targets"]}
    assert any("speed-up" in w for w in verdicts) and any("efficiency" in w for w in verdicts)
    assert any("busy share" in w for w in verdicts)
    ablation = [row for row in results["targets"] if "ablation" in row["what"]]
    assert len(ablation) == 1 and ablation[0]["verdict"] == "info" and ablation[0]["value"] > 0
    for row in results["targets"]:
        assert row["verdict"] in ("PASS", "MISS") or row in ablation
        assert row["what"] in text
    assert "load average" in results["machine"]["load_before"]


def test_four_chunk_scaling_figure(bench: tuple[dict, str]) -> None:
    """One 4-chunk shot per model set on 1 actor and on one actor per core, 1 CPU each."""
    results, text = bench
    cores = results["machine"]["cores"]
    if cores < 2:
        pytest.skip("one core: nothing to scale over")
    scaling = results["scaling"]
    assert scaling["cpus_per_actor"] == 1
    assert set(scaling["sets"]) == {"default", "production"}
    for case in scaling["sets"].values():
        one, many = case["runs"]["1"], case["runs"][str(cores)]
        assert (one["actors"], many["actors"]) == (1, cores)
        assert one["chunks"] == many["chunks"] == 4
        assert one["frames"] == many["frames"] > 0
        assert case["time_ratio"] == pytest.approx(many["seconds"] / one["seconds"])
    rows = [row for row in results["targets"] if "4-chunk shot" in row["what"]]
    assert len(rows) == 2 and all(row["what"] in text for row in rows)


def test_quality_rows_and_qc_cost(bench: tuple[dict, str]) -> None:
    """Every case has a quality row from its Recast run's own QC; the production set has QC's cost."""
    results, text = bench
    cores = results["machine"]["cores"]
    assert "quality (QC of each case's" in text
    for comp in results["comparisons"]:
        q = comp["quality"]
        assert q == comp["runs"][f"recast_{cores}"]["quality"] and comp["qc_identity_every"] == 4
        assert q["frames"] == 48 and 0 < q["identity_frames"] <= q["frames"]
        for key in ("similarity_mean", "similarity_p5"):
            assert -1.0 <= q[key] <= 1.0
        assert q["similarity_p5"] <= q["similarity_mean"] + 1e-9
        assert q["unreplaced_frames"] >= 0
        assert q["flicker_mean"] is None or q["flicker_mean"] >= 0
        assert q["seam_mean"] >= 0
        assert set(q["flags"]) >= {"unreplaced", "low_identity", "flicker", "seam"}
        assert all(v >= 0 for v in q["flags"].values())
        assert comp["label"] in text
        for name, run in comp["runs"].items():
            if name == "naive" or name.endswith("_noqc"):
                assert run.get("quality") is None, name
            else:
                assert run["quality"]["frames"] == 48, name
        if comp["set"] != "production":
            assert comp["qc_cost"] is None
            continue
        cost = comp["qc_cost"]
        assert (cost["on"], cost["off"]) == (f"recast_{cores}", f"recast_{cores}_noqc")
        assert cost["render_ratio"] > 0 and cost["job_fps_ratio"] > 0
        assert 0 <= cost["measures_share_off"] < 1 and 0 < cost["measures_share_on"] < 1
        assert cost["render_ratio"] == pytest.approx(cost["render_seconds_on"] / cost["render_seconds_off"])
    rows = [row for row in results["targets"] if "QC cost" in row["what"]]
    assert len(rows) == 1 and rows[0]["target"] == "<= 1.05" and rows[0]["value"] > 0
    assert rows[0]["verdict"] in ("PASS", "MISS") and rows[0]["what"] in text


def test_analysis_rows(bench: tuple[dict, str]) -> None:
    results, text = bench
    rows = results["analysis"]
    assert [r["label"] for r in rows] == ["default 320x180", "production 320x180"]
    for row in rows:
        assert "error" not in row, row
        for mode in ("every_frame", "track"):
            assert row[mode]["ratio"] > 0 and row[mode]["embedded"] <= row[mode]["faces"]
    assert rows[0]["every_frame"]["embedded"] == rows[0]["every_frame"]["faces"] > 0
    assert "analysis pass" in text and "target <= 1.2" in text
    for row in rows:  # the detector at 640 x 640 against auto's smaller input, 4K large face
        sized = row["detect_size"]
        assert sized["full"] == "640x640" and sized["reduced"] != "640x640" and sized["speedup"] > 0
    assert "detector, 4K large face" in text
