"""Every test that starts Ray carries the ``ray`` marker, so ``-m "not ray"`` is a Ray-free run.

Checked from the source, without running anything: a test starts Ray when it
(or a fixture or helper of its module that it reaches by name) uses a
Ray-starting helper or fixture, or runs an entrypoint that starts Ray.  Such a
test must be marked, on itself or by the module's ``pytestmark``.  A test that
takes the ``no_ray`` fixture proves at run time that Ray never started, so it
needs no marker.  Fixtures of the ``conftest.py`` files above a module, and
functions it imports from the tests' helper modules (``from tests.x import f``),
are read the same way.
"""

from __future__ import annotations

import ast
import functools
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


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def _starting(tree: ast.Module, starters: set[str]) -> set[str]:
    """``starters`` with every module function (fixture or helper) that reaches one of them by name."""
    uses = {name: _names(node) for name, node in _functions(tree).items()}
    starters = set(starters)
    changed = True
    while changed:
        changed = False
        for name, names in uses.items():
            if name not in starters and names & starters and RAY_FREE not in names:
                starters.add(name)
                changed = True
    return starters


def _helper_starters(tree: ast.Module, seen: frozenset[Path] = frozenset()) -> set[str]:
    """Names bound by ``from tests.x import f`` where ``f`` is a function of that helper module that
    starts Ray."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0):
            continue
        helper = TESTS.parent.joinpath(*node.module.split(".")).with_suffix(".py")
        if not node.module.startswith("tests.") or not helper.is_file() or helper in seen:
            continue
        starting = _module_starters(helper, seen | {helper})
        bound |= {alias.asname or alias.name for alias in node.names if alias.name in starting}
    return bound


@functools.cache
def _module_starters(path: Path, seen: frozenset[Path] = frozenset()) -> frozenset[str]:
    """The functions of one module that start Ray (with what it imports from other helpers)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    base = set(STARTERS) | {"ray.init"} | _entrypoint_names(tree) | _helper_starters(tree, seen)
    return frozenset(_starting(tree, base) & set(_functions(tree)))


def _conftest_starters(path: Path, root: Path) -> set[str]:
    """Fixtures of the ``conftest.py`` files from ``path``'s folder up to ``root`` that start Ray."""
    found: set[str] = set()
    folder = path.parent
    while folder == root or root in folder.parents:
        if (folder / "conftest.py").is_file():
            found |= _module_starters(folder / "conftest.py")
        folder = folder.parent
    return found - {RAY_FREE}


def unmarked_ray_tests(path: Path, root: Path = TESTS) -> list[str]:
    """The tests of one module that start Ray and carry no ``ray`` marker (``root``: where the
    ``conftest.py`` files that count end)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    base = (
        set(STARTERS)
        | {"ray.init"}
        | _entrypoint_names(tree)
        | _helper_starters(tree)
        | _conftest_starters(path, root)
    )
    starters = _starting(tree, base)
    if _module_marked(tree):
        return []
    return [
        name
        for name, node in _functions(tree).items()
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


def test_the_check_sees_conftest_fixtures_and_imported_helpers(tmp_path: Path) -> None:
    """A fixture of a ``conftest.py`` above the module, and a helper imported from ``tests/``."""
    (tmp_path / "conftest.py").write_text(
        "import pytest\n\n@pytest.fixture(scope='session')\ndef rendered(ray_session): ...\n"
    )
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "test_sample.py"
    path.write_text(
        "from tests.jobs.refusals import run_main, snapshot\n\n"
        "def test_conftest_fixture(rendered): ...\n"
        "def test_helper(tmp_path): run_main(tmp_path, {})\n"
        "def test_checked(tmp_path, no_ray): run_main(tmp_path, {})\n"
        "def test_plain(tmp_path): snapshot(tmp_path)\n"
    )
    assert unmarked_ray_tests(path, root=tmp_path) == ["test_conftest_fixture", "test_helper"]
    assert unmarked_ray_tests(path, root=tmp_path / "sub") == ["test_helper"]
