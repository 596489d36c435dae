"""The layering rule: pipeline/ never imports Ray, actors/, cluster/, jobs/ or the benchmark (bench/)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {"ray", "actors", "cluster", "jobs", "bench"}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_pipeline_is_ray_free():
    files = sorted((ROOT / "pipeline").rglob("*.py"))
    assert files, "pipeline/ has no modules"
    offenders = {str(p.relative_to(ROOT)): sorted(imported_roots(p) & FORBIDDEN) for p in files}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_actors_do_not_import_cluster_or_jobs():
    for path in sorted((ROOT / "actors").rglob("*.py")):
        assert not imported_roots(path) & {"cluster", "jobs", "bench"}, path
