"""The wheel built from the tree: the product, without the benchmark harness and its stand-in generators.

Builds a real wheel (``pip wheel``, no network: ``--no-build-isolation`` uses the installed
setuptools) from a copy of the product folders and the benchmark suite (``bench/``, which the
wheel must leave out), installs it into a private folder, and runs the installed modules with
the checkout off ``sys.path``.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("pipeline", "actors", "cluster", "jobs")
TOOLING = ("bench",)
"""Beside the product in the checkout, never in the wheel."""
TOOLING_MARKS = ("GraphBuilder", "write_production_models", "def make_face_clip(")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel ``pip wheel .`` builds from this tree (copied, so no build folder lands in it)."""
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for package in PRODUCT + TOOLING:
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(src),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
        ],
        check=True,
        timeout=300,
    )
    (built,) = dist.glob("recast-*.whl")
    return built


def _python_files(wheel: Path) -> dict[str, str]:
    with zipfile.ZipFile(wheel) as zf:
        return {n: zf.read(n).decode() for n in zf.namelist() if n.endswith(".py")}


def test_wheel_holds_the_product_and_no_benchmark_tooling(wheel: Path) -> None:
    files = _python_files(wheel)
    tops = {name.split("/", 1)[0] for name in files}
    assert tops == set(PRODUCT), tops
    assert "jobs/demo.py" in files and "jobs/demo_media.py" in files and "jobs/benchmark.py" in files
    bench = sorted(n for n in files if n.startswith(("bench/", "jobs/bench/")))
    assert not bench, f"the benchmark harness ships in the wheel: {bench}"
    for name, text in files.items():
        for mark in TOOLING_MARKS:
            if mark == "def make_face_clip(" and name == "jobs/demo_media.py":
                continue  # the demo's own plate maker
            assert mark not in text, f"{name} holds a stand-in generator ({mark})"


def test_no_installed_module_but_the_benchmark_entrypoint_imports_the_harness(wheel: Path) -> None:
    for name, text in _python_files(wheel).items():
        if name == "jobs/benchmark.py":
            continue
        for node in ast.walk(ast.parse(text, name)):
            modules = []
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            assert not any(m == "bench" or m.startswith("bench.") for m in modules), (
                f"{name}:{node.lineno} imports {modules}"
            )


def test_installed_wheel_runs_without_the_checkout(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
        check=True,
        timeout=300,
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(site)}

    def installed(code: str) -> subprocess.CompletedProcess[str]:
        # The development venv's editable install maps ``jobs`` to the checkout: drop its finder
        # so the code sees what a machine with only the wheel sees.
        alone = (
            "import sys\nsys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]\n"
        )
        return subprocess.run(
            [sys.executable, "-c", alone + code],
            check=False,
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    # The demo imports from the wheel alone and loads nothing of the benchmark.
    demo = installed(
        "import jobs.demo, jobs.render\n"
        f"assert jobs.demo.__file__.startswith({str(site)!r}), jobs.demo.__file__\n"
        "print(sorted(m for m in sys.modules if 'bench' in m))"
    )
    assert demo.returncode == 0, demo.stderr
    assert demo.stdout.strip() == "[]", demo.stdout
    # The benchmark entrypoint exits at import, saying where it runs from.
    bench = installed("import jobs.benchmark")
    assert bench.returncode == 1, bench.stderr
    assert "runs from a Recast checkout" in bench.stderr and "(bench/)" in bench.stderr
