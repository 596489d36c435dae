"""The shape of the code base: small modules, no import cycles, product code apart from tests.

Read statically (``ast``), so a violation is reported with the file and the
names, whatever the machine has installed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("pipeline", "cluster", "actors", "jobs", "bench")
"""Every package folder of the checkout: the product and the benchmark suite (tooling)."""
MAX_LINES = 500
"""A module may be longer only when its docstring says why (a line with :data:`LONG_REASON`)."""
LONG_REASON = "Longer than 500 lines because"
MAX_TOP = 15  # modules at the top of one folder (``__init__.py`` not counted)
MAX_POSITIONAL = 6
"""Parameters a function may take by position (``self`` and ``cls`` not counted)."""


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node, except those under ``if TYPE_CHECKING:`` (imports for annotations only)."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def _imports(path: Path, name: str, known: set[str], type_checking: bool = False) -> set[str]:
    """Project modules ``path`` imports when it runs, at any depth (function-level imports too).

    With ``type_checking``, those under ``if TYPE_CHECKING:`` too."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree) if type_checking else _runtime_nodes(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + [base]
                ).strip(".")
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            # The deepest known module the import names (``from a.b import c`` may name module a.b.c).
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _says_why_it_is_long(path: Path) -> bool:
    """Whether the module's docstring says why it is long (``Longer than 500 lines because ...``)."""
    docstring = ast.get_docstring(ast.parse(path.read_text(), str(path))) or ""
    return any(
        line.strip().startswith(LONG_REASON) and len(line.strip()) > len(LONG_REASON) + 3
        for line in docstring.splitlines()
    )


def test_a_module_over_500_lines_says_why() -> None:
    """About 500 lines at most; a longer module states why in its docstring ("Longer than 500 lines
    because ..."): one concern that reads better whole, not a file nobody cut by concern."""
    long = {
        str(path.relative_to(ROOT)): n
        for path in _modules().values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES and not _says_why_it_is_long(path)
    }
    assert not long, (
        f"modules over {MAX_LINES} lines whose docstring does not say why "
        f"(a line '{LONG_REASON} ...'; or cut them by concern): {long}"
    )


def test_the_length_rule_reads_the_reason_from_the_docstring(tmp_path: Path) -> None:
    body = "x = 1\n" * (MAX_LINES + 1)
    silent = tmp_path / "silent.py"
    silent.write_text('"""A long module."""\n' + body)
    reasoned = tmp_path / "reasoned.py"
    reasoned.write_text(f'"""A long module.\n\n{LONG_REASON} one table reads better whole.\n"""\n' + body)
    commented = tmp_path / "commented.py"
    commented.write_text(f"# {LONG_REASON} a comment is not the docstring\n" + body)
    assert not _says_why_it_is_long(silent)
    assert _says_why_it_is_long(reasoned)
    assert not _says_why_it_is_long(commented)


def _positional(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The parameters ``node`` takes by position, less a leading ``self`` or ``cls``."""
    names = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


def test_no_function_takes_more_than_6_positional_parameters() -> None:
    """Past six, a call is a row of values whose order the reader must know: make the trailing ones
    keyword-only (``*,``) or bundle them in a small frozen dataclass."""
    offenders = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}({', '.join(names)})"
        for path in _modules().values()
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and len(names := _positional(node)) > MAX_POSITIONAL
    ]
    assert not offenders, f"functions with more than {MAX_POSITIONAL} positional parameters: {offenders}"


def test_the_positional_rule_counts_what_a_caller_can_pass_by_position() -> None:
    tree = ast.parse(
        "def seven(a, b, c, d, e, f, g): ...\n"
        "def six_and_keywords(a, b, c, d, e, f, *, g, h): ...\n"
        "class C:\n"
        "    def method(self, a, b, c, d, e, f): ...\n"
        "    async def slash(self, a, b, c, d, /, e, f, g): ...\n"
    )
    counts = {
        n.name: len(_positional(n))
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    assert counts == {"seven": 7, "six_and_keywords": 6, "method": 6, "slash": 7}


def test_no_import_cycles() -> None:
    modules = _modules()
    known = set(modules)
    # Imports for annotations only (``if TYPE_CHECKING:``) count too: a cycle there is still two
    # modules that each need the other to be read.
    graph = {name: _imports(path, name, known, type_checking=True) - {name} for name, path in modules.items()}
    # Package __init__ modules are imported by every submodule's import; they take part only
    # through what they import themselves.
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph[node]):
            if dep in modules and modules[dep].name == "__init__.py" and node.startswith(dep + "."):
                continue  # a module inside a package "imports" its package: not a cycle
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep) :] + [dep])
            elif dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def _package_graph(package: str) -> dict[str, set[str]]:
    """Which parts of ``package`` (``cluster``, ``pipeline``) import which: a sub-package
    (``cluster.state``) or a top-level module (``cluster.driver``) per node, from every import of
    its modules, annotation-only ones too."""
    modules = _modules()
    known = set(modules)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        if not name.startswith(package + "."):
            continue
        part = ".".join(name.split(".")[:2])
        deps = graph.setdefault(part, set())
        for dep in _imports(path, name, known, type_checking=True):
            if dep.startswith(package + ".") and (target := ".".join(dep.split(".")[:2])) != part:
                deps.add(target)
    return graph


def _assert_one_way(package: str, graph: dict[str, set[str]]) -> None:
    mutual = sorted((a, b) for a, deps in graph.items() for b in deps if a < b and a in graph.get(b, ()))
    assert not mutual, f"{package} packages importing each other: {mutual}"
    done: list[str] = []
    todo = dict(graph)
    while todo:
        ready = sorted(part for part, deps in todo.items() if deps <= set(done))
        assert ready, f"{package} packages in an import loop: { {p: sorted(d) for p, d in todo.items()} }"
        done.extend(ready)
        for part in ready:
            del todo[part]


@pytest.mark.parametrize("package", ["cluster", "pipeline"])
def test_sub_packages_import_one_way(package: str) -> None:
    """No two parts of ``cluster/`` (or of ``pipeline/``) import each other, nor round a longer
    loop: each is layered on the ones below it, so a reader can read a concern with only those
    below in mind."""
    graph = _package_graph(package)
    assert len(graph) > 5, graph
    _assert_one_way(package, graph)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_folder_is_crowded(package: str) -> None:
    """At most 15 modules at the top of any folder of any package (``pipeline/``, ``cluster/``,
    ``actors/``, ``jobs/``, ``bench/``): more, and names start to collide in a reader's head; make a
    sub-package by concern."""
    crowded = {
        str(folder.relative_to(ROOT)): n
        for folder in [ROOT / package, *(ROOT / package).rglob("*/")]
        if folder.is_dir()
        and (n := len([f for f in folder.glob("*.py") if f.name != "__init__.py"])) > MAX_TOP
    }
    assert not crowded, f"folders with more than {MAX_TOP} modules at their top: {crowded}"


def test_product_code_never_imports_tests() -> None:
    offenders = {}
    for name, path in _modules().items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            mods = []
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                mods = [node.module]
            if any(m == "tests" or m.startswith("tests.") for m in mods):
                offenders[name] = mods
    assert not offenders, f"product modules importing tests/: {offenders}"


def test_the_checks_before_ray_import_no_ray() -> None:
    import subprocess
    import sys

    code = (
        "import sys, cluster.checks, cluster.state, cluster.report, cluster.publish, cluster.spec, cluster.lease;"
        "bad = sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.'));"
        "sys.exit(f'imported {bad[:3]}' if bad else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr or result.stdout


def test_no_test_module_imports_another_or_a_conftest() -> None:
    """Shared fixtures live in ``conftest.py`` files and shared helpers in helper modules: a test
    module that imports from another test module (or a conftest) builds that module's fixtures again."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                last = name.rsplit(".", 1)[-1]
                if name.startswith("tests.") and (last.startswith("test_") or last == "conftest"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert not found, found
