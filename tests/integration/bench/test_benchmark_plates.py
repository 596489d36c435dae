"""The ``--plates`` benchmark scenario at test scale: it runs end to end and reports every row.

Runs ``python -m jobs.benchmark --tiny --plates --no-compare --no-scaling`` in a
subprocess (320x180 frames, 2 frames per I/O case, a 4-frame job on its own
private Ray) and checks that ``plates.json`` has every size, format, store and
operation with positive figures, and that the table names them.  No timing
assertions: the figures of a tiny run on a shared machine mean nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from bench.film_plates.plates import FORMATS
from tests.raytools import RAY_ENV, REPO

pytestmark = [pytest.mark.ray, pytest.mark.slow]  # the job part starts its own Ray instance


@pytest.fixture(scope="module")
def plates(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, dict]:
    out = tmp_path_factory.mktemp("bench-plates")
    env = {**os.environ, **RAY_ENV}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "jobs.benchmark", "--tiny", "--plates", "--no-compare", "--no-scaling"]
        + ["--out", str(out)],
        check=False,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    figures = json.loads((out / "plates.json").read_text())
    bench = json.loads((out / "bench.json").read_text())
    return figures, (out / "plates.md").read_text(), bench


def test_every_io_row_reads_and_writes_from_both_stores(plates: tuple[dict, str, dict]) -> None:
    figures, table, bench = plates
    assert bench["plates"] == figures  # the same record in bench.json
    rows = {(r["size"], r["format"]): r for r in figures["io"]}
    assert set(rows) == {("320x180", f) for f in FORMATS}
    for row in rows.values():
        assert row["frames"] == 2 and row["mb_per_frame"] > 0
        assert row["threads"] == figures["machine"]["cores"]
        for store in ("local", "s3"):
            for op in ("write", "read"):
                rate = row[store][op]
                assert rate["fps"] > 0 and rate["mb_per_s"] > 0 and rate["seconds"] > 0, (store, op)
            assert row[store]["read"]["probe_seconds"] > 0
        for op in ("write", "read"):
            assert row["s3_over_local"][op] == pytest.approx(
                row["s3"][op]["fps"] / row["local"][op]["fps"], rel=1e-2
            )
        assert f"| {row['size']} | {row['format']} |" in table


def test_colour_round_trip_costs(plates: tuple[dict, str, dict]) -> None:
    figures, table, _ = plates
    assert "| 320x180 | dpx-10bit-log | 54 |" in table
    assert {r["format"] for r in figures["colour"]} == {"exr-half-piz", "dpx-10bit-log"}
    for row in figures["colour"]:
        assert row["face_side_px"] == 54  # 0.3 x 180
        for key in ("to_model_frame_ms", "to_plate_face_ms", "merge_back_face_ms", "round_trip_ms"):
            assert row[key] > 0, key
        assert row["round_trip_ms"] == pytest.approx(row["to_model_frame_ms"] + row["merge_back_face_ms"])
        assert row["round_trip_over_smallest"] == 1.0


def test_sequence_job_beside_prores(plates: tuple[dict, str, dict]) -> None:
    figures, table, _ = plates
    job = figures["job"]
    assert job["frames"] == 4 and job["size"] == "320x180"
    assert set(job["runs"]) == {"sequence", "prores_4444"}
    for run in job["runs"].values():
        assert run["actors"] == 1 and run["frames"] == 4
        assert run["fps"] > 0 and run["job_fps"] > 0 and run["input_mb"] > 0
        assert run["faces_swapped"] >= 1  # the astronaut is found in the plates
    seq, prores = job["runs"]["sequence"], job["runs"]["prores_4444"]
    assert job["sequence_over_prores_fps"] == pytest.approx(seq["fps"] / prores["fps"], rel=1e-2)
    assert "sequence fps / ProRes 4444 fps" in table
