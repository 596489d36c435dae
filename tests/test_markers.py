"""Every test that starts Ray carries the ``ray`` marker, so ``-m "not ray"`` is a Ray-free run.

Checked from the source, without running anything: a test starts Ray when it
(or a fixture or helper of its module that it reaches by name) uses a
Ray-starting helper or fixture, or runs an entrypoint that starts Ray.  Such a
test must be marked, on itself or by the module's ``pytestmark``.  A test that
takes the ``no_ray`` fixture proves at run time that Ray never started, so it
needs no marker.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
STARTERS = frozenset({"ray_session", "ray_local", "SharedRay", "ray_head", "Cluster"})
"""Names that start Ray: the shared-Ray fixtures, raytools' helpers, ``ray.cluster_utils.Cluster``."""
ENTRYPOINTS = re.compile(r"^jobs\.(render|demo|benchmark)$")
"""Modules whose ``main`` starts (or joins) Ray, run in a subprocess as ``-m jobs.X`` or imported."""
RAY_FREE = "no_ray"


def _names(node: ast.AST) -> set[str]:
    """Every name, attribute, argument name and ``-m`` module string used inside ``node``."""
    found: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
            if isinstance(sub.value, ast.Name) and sub.value.id == "ray" and sub.attr == "init":
                found.add("ray.init")
        elif isinstance(sub, ast.arg):
            found.add(sub.arg)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and ENTRYPOINTS.match(sub.value):
            found.add("ray.init")
    return found


def _entrypoint_names(tree: ast.Module) -> set[str]:
    """Names bound by imports of a Ray-starting entrypoint (``from jobs.render import main``)."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if ENTRYPOINTS.match(node.module) or ENTRYPOINTS.match(f"{node.module}.{alias.name}"):
                    bound.add(alias.asname or alias.name)
    return bound


def _marked(decorators: list[ast.expr]) -> bool:
    """Whether ``pytest.mark.ray`` is among these expressions (or in a list of them)."""
    for expr in decorators:
        for sub in ast.walk(expr):
            if (
                isinstance(sub, ast.Attribute)
                and sub.attr == "ray"
                and isinstance(sub.value, ast.Attribute)
                and sub.value.attr == "mark"
            ):
                return True
    return False


def _module_marked(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            return _marked([node.value])
    return False


def unmarked_ray_tests(path: Path) -> list[str]:
    """The tests of one module that start Ray and carry no ``ray`` marker."""
    tree = ast.parse(path.read_text(), filename=str(path))
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    uses = {name: _names(node) for name, node in functions.items()}
    starters = set(STARTERS) | {"ray.init"} | _entrypoint_names(tree)
    # A module function (fixture or helper) that starts Ray makes its users start Ray too.
    changed = True
    while changed:
        changed = False
        for name, names in uses.items():
            if name not in starters and names & starters and RAY_FREE not in names:
                starters.add(name)
                changed = True
    if _module_marked(tree):
        return []
    return [
        name
        for name, node in functions.items()
        if name.startswith("test") and name in starters and not _marked(node.decorator_list)
    ]


def test_every_ray_test_is_marked() -> None:
    modules = sorted(TESTS.rglob("test_*.py"))
    assert len(modules) > 30
    unmarked = {str(p.relative_to(TESTS)): unmarked_ray_tests(p) for p in modules}
    assert {k: v for k, v in unmarked.items() if v} == {}


def test_the_check_sees_fixtures_helpers_and_entrypoints(tmp_path: Path) -> None:
    """The checker itself: each way of starting Ray is found, and a marker or ``no_ray`` clears it."""
    source = """
import pytest
import ray
from jobs.render import main

@pytest.fixture(scope="module")
def cluster():
    ray.init(address="auto")

def helper():
    return main(["spec.yaml"])

def test_fixture(ray_local): ...
def test_module_fixture(cluster): ...
def test_helper(): helper()
def test_subprocess(): run(["python", "-m", "jobs.benchmark"])
def test_checked(no_ray): helper()
def test_plain(tmp_path): ...

@pytest.mark.ray
def test_marked(ray_session): ...
"""
    path = tmp_path / "test_sample.py"
    path.write_text(source)
    assert unmarked_ray_tests(path) == [
        "test_fixture",
        "test_module_fixture",
        "test_helper",
        "test_subprocess",
    ]
    path.write_text(source + "\npytestmark = [pytest.mark.ray, pytest.mark.slow]\n")
    assert unmarked_ray_tests(path) == []
