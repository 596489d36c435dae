"""Smoke run of the GPU benchmark on this machine: tiny stand-ins, a 1 s 320x180 clip, CPU torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.raytools import REPO


@pytest.mark.timeout(120)
def test_bench_gpu_tiny_writes_every_row(tmp_path: Path, no_ray: None) -> None:
    out = tmp_path / "gpu-bench"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "jobs.benchmark", "--gpu", "--tiny", "--seconds", "1", "--out", str(out)],
        check=False,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((out / "gpu_bench.json").read_text())
    assert "target" in proc.stdout and "swap+enhance" in proc.stdout  # the table was printed

    rows = result["rows"]
    detect = rows[0]
    assert detect["row"] == "detect" and detect["faces"] > 0 and detect["faces_per_frame"] >= 0.5
    expected = {
        (mode, stage)
        for mode in ("swap", "swap+enhance")
        for stage in ("device", "decode+device", "decode+device+encode")
    }
    assert {(r["mode"], r["stage"]) for r in rows[1:]} == expected
    assert {r["batch"] for r in rows[1:] if r["stage"] == "device"} == {4, 8}
    for row in rows[1:]:
        assert row["fps"] > 0 and row["faces_per_s"] > 0, row
        assert 0 < row["model_busy_share"] <= 1.5, row
        assert row["frames"] == detect["frames"]
        if row["stage"] == "device":
            assert row["fps_untimed"] > 0
        if not torch.cuda.is_available():
            assert row["verdict"].startswith("n/a"), row
    enhanced = [r for r in rows[1:] if r["mode"] == "swap+enhance"]
    assert all(r["stage_seconds"]["enhance"] > 0 for r in enhanced)
    assert result["torch"] == torch.__version__
