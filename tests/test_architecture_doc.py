"""The architecture page cannot drift: its sub-package tables are read against the imports, and
the site shows every picture without a network.

The tables under "The pipeline's sub-packages" and "The driver's sub-packages" in
``docs/architecture.md`` have one row per sub-package (``pipeline/<name>/``, ``cluster/<name>/``,
a folder with an ``__init__.py``) and an "imports" cell read by this rule:

* The cell lists, in backticks, the other parts of the same top package (a sibling sub-package,
  or a module at the top such as ``pipeline/colour.py``) that at least one module of the
  sub-package imports, at any depth (function-level imports too; ``importlib`` calls are not
  read). ``—`` when there are none. A part imported and not listed, or listed and not imported,
  fails the test.
* ``(types only)`` after a name: every import of that part is under ``if TYPE_CHECKING:``.
  A name without it is imported by at least one module when it runs. Other words in parentheses
  (``(records)``) are a comment for the reader and are not read.
* The column's header may exempt parts every sub-package may use without saying so: "imports
  (besides `errors`, `configbase`, `limits`)". An exempt part is never listed.
* Rows go bottom-up: a sub-package imports only sub-packages in rows above its own, so the table
  reads as the one-way layering ``tests/test_hygiene.py`` enforces.

Read statically (``ast``), like ``tests/test_hygiene.py``, so a failure names the package and
the difference whatever the machine has installed.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGE = DOCS / "architecture.md"
TABLES = {"pipeline": "The pipeline's sub-packages", "cluster": "The driver's sub-packages"}
NONE = "—"
TYPES_ONLY = "types only"
_ENTRY = re.compile(r"`(?P<name>[\w.]+)`(?:\s*\((?P<note>[^()]*)\))?")


@dataclass(frozen=True)
class Row:
    package: str
    """The sub-package's name in its top package: ``store`` for ``pipeline/store/``."""
    listed: dict[str, bool]
    """Each part the cell lists -> whether it is marked ``(types only)``."""


@dataclass(frozen=True)
class Table:
    top: str
    exempt: frozenset[str]
    rows: list[Row]


@dataclass
class Found:
    """The parts of the top package one sub-package imports, with the modules that import them."""

    runtime: dict[str, set[str]] = field(default_factory=dict)
    types_only: dict[str, set[str]] = field(default_factory=dict)

    def parts(self) -> set[str]:
        return set(self.runtime) | set(self.types_only)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _names(text: str, where: str) -> dict[str, bool]:
    """The entries of an "imports" cell: each name -> whether it is marked ``(types only)``."""
    if text == NONE:
        return {}
    listed: dict[str, bool] = {}
    rest = text
    for entry in _ENTRY.finditer(text):
        note = (entry["note"] or "").strip()
        listed[entry["name"]] = note == TYPES_ONLY or note.startswith(TYPES_ONLY + ":")
        rest = rest.replace(entry[0], "", 1)
    assert listed and not rest.replace(",", "").strip(), (
        f"{where}: cannot read the imports cell {text!r}: write `name`, `name` (types only), ... or {NONE}"
    )
    return listed


def read_table(text: str, top: str, heading: str) -> Table:
    """The table under ``### heading`` in ``text``."""
    lines = text.splitlines()
    assert f"### {heading}" in lines, f"{PAGE.name}: no section '### {heading}'"
    start = lines.index(f"### {heading}")
    table: list[str] = []
    for line in lines[start + 1 :]:
        if line.startswith("#"):
            break
        if line.startswith("|"):
            table.append(line)
        elif table:
            break
    assert len(table) > 2, f"{PAGE.name}, '{heading}': no table"
    header = _cells(table[0])
    column = next((i for i, cell in enumerate(header) if cell.startswith("imports")), None)
    assert column is not None, f"{PAGE.name}, '{heading}': no column 'imports' in {header}"
    besides = re.fullmatch(r"imports(?: \(besides (?P<names>.*)\))?", header[column])
    assert besides, f"{PAGE.name}, '{heading}': cannot read the header {header[column]!r}"
    exempt = frozenset(_names(besides["names"], f"'{heading}' header")) if besides["names"] else frozenset()
    rows = []
    for line in table[2:]:
        cells = _cells(line)
        match = re.fullmatch(rf"`{top}/(\w+)/`", cells[0])
        assert match, f"{PAGE.name}, '{heading}': the first cell {cells[0]!r} is not `{top}/<name>/`"
        rows.append(Row(match[1], _names(cells[column], f"{top}/{match[1]}/")))
    return Table(top, exempt, rows)


def _type_checking_block(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module, package: str) -> list[tuple[str, bool]]:
    """Every module name an import in ``tree`` may name (``from a import b`` names ``a`` and
    ``a.b``), with whether it is under ``if TYPE_CHECKING:``. ``package`` resolves relative imports."""
    out: list[tuple[str, bool]] = []
    todo: list[tuple[ast.AST, bool]] = [(tree, False)]
    while todo:
        node, types_only = todo.pop()
        if isinstance(node, ast.If) and _type_checking_block(node):
            todo.extend((child, True) for child in node.body)
            todo.extend((child, types_only) for child in node.orelse)
            continue
        if isinstance(node, ast.Import):
            out.extend((alias.name, types_only) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], base]).strip(".")
            out.append((base, types_only))
            out.extend((f"{base}.{alias.name}", types_only) for alias in node.names)
        todo.extend((child, types_only) for child in ast.iter_child_nodes(node))
    return out


def found_imports(top: str, package: str, root: Path = ROOT) -> Found:
    """What the modules of ``<top>/<package>/`` import of the rest of ``<top>``."""
    found = Found()
    for path in sorted((root / top / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        here = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for name, types_only in _imports(ast.parse(path.read_text(), str(path)), here):
            dotted = name.split(".")
            if len(dotted) < 2 or dotted[0] != top or dotted[1] == package:
                continue
            into = found.types_only if types_only else found.runtime
            into.setdefault(dotted[1], set()).add(str(path.relative_to(root)))
    for part in set(found.types_only) & set(found.runtime):
        del found.types_only[part]
    return found


def differences(table: Table, found: dict[str, Found]) -> list[str]:
    """How each row's "imports" cell differs from what its package imports, one line per package."""
    out = []
    above: set[str] = set()
    rows = {row.package for row in table.rows}
    for row in table.rows:
        code = found[row.package]
        wrong: list[str] = []
        missing = sorted(code.parts() - set(row.listed) - table.exempt)
        if missing:
            wrong.append(
                "imports, not listed: "
                + ", ".join(f"`{p}` ({min({**code.runtime, **code.types_only}[p])})" for p in missing)
            )
        if extra := sorted(set(row.listed) - code.parts() - table.exempt):
            wrong.append("listed, not imported: " + ", ".join(f"`{p}`" for p in extra))
        if exempt := sorted(set(row.listed) & table.exempt):
            wrong.append("listed, though the header exempts it: " + ", ".join(f"`{p}`" for p in exempt))
        for part, marked in sorted(row.listed.items()):
            if marked and part in code.runtime:
                wrong.append(
                    f"`{part}` marked (types only), imported when it runs by {min(code.runtime[part])}"
                )
            elif not marked and part in code.types_only:
                wrong.append(f"`{part}` imported only under TYPE_CHECKING: mark it (types only)")
        if below := sorted((set(row.listed) & rows) - above):
            wrong.append("imports packages in rows below its own: " + ", ".join(f"`{p}`" for p in below))
        if wrong:
            out.append(f"{table.top}/{row.package}/: " + "; ".join(wrong))
        above.add(row.package)
    return out


def _sub_packages(top: str) -> set[str]:
    return {init.parent.name for init in (ROOT / top).glob("*/__init__.py")}


@pytest.mark.parametrize("top", sorted(TABLES))
def test_every_sub_package_has_one_row(top: str) -> None:
    rows = [row.package for row in read_table(PAGE.read_text(encoding="utf-8"), top, TABLES[top]).rows]
    packages = _sub_packages(top)
    assert len(packages) > 5, packages
    assert sorted(set(rows) - packages) == [], f"{PAGE.name}: rows for folders of {top}/ that do not exist"
    assert sorted(packages - set(rows)) == [], f"{PAGE.name}: sub-packages of {top}/ without a row"
    assert sorted(p for p in set(rows) if rows.count(p) > 1) == [], f"{PAGE.name}: {top} rows twice"


@pytest.mark.parametrize("top", sorted(TABLES))
def test_the_imports_cells_say_what_the_code_imports(top: str) -> None:
    table = read_table(PAGE.read_text(encoding="utf-8"), top, TABLES[top])
    assert all((ROOT / top / f"{part}.py").is_file() for part in table.exempt), table.exempt
    found = {row.package: found_imports(top, row.package) for row in table.rows}
    wrong = differences(table, found)
    assert not wrong, f"{PAGE.relative_to(ROOT)}, '{TABLES[top]}' differs from the code:\n" + "\n".join(wrong)


def test_the_rule_reports_each_kind_of_difference(tmp_path: Path) -> None:
    page = (
        "### Parts\n\n| package | the concern | imports (besides `errors`) |\n|---|---|---|\n"
        "| `pkg/base/` | below the others | — |\n"
        "| `pkg/mid/` | in the middle | `base` (types only), `gone`, `errors` |\n"
        "| `pkg/top/` | above | `mid` (records), `late` |\n"
        "| `pkg/late/` | listed last | `base` (types only: a record) |\n"
    )
    files = {
        "base/__init__.py": "",
        "mid/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.late import x\n",
        "mid/a.py": "def f():\n    from ..base import thing\n",
        "top/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import mid\n"
        "from pkg.late import y\n",
        "late/__init__.py": "import typing\nif typing.TYPE_CHECKING:\n    import pkg.base.types\nimport pkg.errors\n",
    }
    for name, text in files.items():
        (tmp_path / "pkg" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pkg" / name).write_text(text)
    table = read_table(page, "pkg", "Parts")
    assert table.exempt == {"errors"}
    assert [row.listed for row in table.rows] == [
        {},
        {"base": True, "gone": False, "errors": False},
        {"mid": False, "late": False},
        {"base": True},
    ]
    found = {row.package: found_imports("pkg", row.package, tmp_path) for row in table.rows}
    assert differences(table, found) == [
        (
            "pkg/mid/: imports, not listed: `late` (pkg/mid/__init__.py); listed, not imported: `gone`; "
            "listed, though the header exempts it: `errors`; "
            "`base` marked (types only), imported when it runs by pkg/mid/a.py"
        ),
        (
            "pkg/top/: `mid` imported only under TYPE_CHECKING: mark it (types only); "
            "imports packages in rows below its own: `late`"
        ),
    ]
    with pytest.raises(AssertionError, match="cannot read the imports cell"):
        read_table(page.replace("`late` |", "late |"), "pkg", "Parts")


# The site without a network: no diagram drawn by a script, no script or picture from elsewhere.

_FENCE = re.compile(r"^\s*(```|~~~)\s*\{?\s*\.?mermaid\b", re.MULTILINE)
_SCRIPT = re.compile(r"<script\b[^>]*\bsrc\s*=\s*[\"']?(?:https?:)?//", re.IGNORECASE)
_MARKDOWN_IMAGE = re.compile(r"!\[(?P<alt>[^\]]*)\]\((?P<src>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HTML_IMAGE = re.compile(r"<img\b[^>]*\bsrc\s*=\s*[\"'](?P<src>[^\"']+)[\"']", re.IGNORECASE)
_NETWORK = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)


def _pages() -> list[Path]:
    pages = sorted(DOCS.rglob("*.md"))
    assert PAGE in pages
    return pages


def test_no_page_draws_with_a_script_or_loads_one_from_the_network() -> None:
    """Material draws a ```mermaid fence with mermaid.js from a CDN: offline, the reader sees its
    source. Diagrams are pictures in the repository (``docs/images/*.svg``)."""
    fences = [str(p.relative_to(ROOT)) for p in _pages() if _FENCE.search(p.read_text(encoding="utf-8"))]
    assert fences == [], f"pages with a mermaid fence (draw it as an SVG under docs/images/): {fences}"
    scripts = [str(p.relative_to(ROOT)) for p in _pages() if _SCRIPT.search(p.read_text(encoding="utf-8"))]
    assert scripts == [], f"pages that load a script from the network: {scripts}"
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "mermaid" not in config, "mkdocs.yml still configures mermaid, which no page uses"
    assert not re.search(r"^\s*-\s*['\"]?(?:https?:)?//", config, re.MULTILINE), (
        "mkdocs.yml loads from the network"
    )


def test_every_picture_a_page_shows_is_in_the_repository_with_alt_text() -> None:
    wrong: list[str] = []
    for page in _pages():
        text = page.read_text(encoding="utf-8")
        for match in [*_MARKDOWN_IMAGE.finditer(text), *_HTML_IMAGE.finditer(text)]:
            src = match["src"]
            where = f"{page.relative_to(ROOT)}: {src}"
            if _NETWORK.match(src):
                wrong.append(f"{where} is on the network")
            elif not (page.parent / src.split("#")[0]).is_file():
                wrong.append(f"{where} does not exist")
            elif "alt" in match.groupdict() and not match["alt"].strip():
                wrong.append(f"{where} has no alt text")
    assert wrong == []


def test_every_svg_is_a_plain_picture() -> None:
    """An SVG under docs/ is shown by an ``<img>``: it runs no script, loads nothing, names itself
    (``role="img"``, a ``<title>``). Draw it on its own white background, in fixed colours, so it
    reads on a light and a dark theme alike."""
    svgs = sorted(DOCS.rglob("*.svg"))
    assert svgs, "no SVG under docs/"
    wrong: list[str] = []
    for svg in svgs:
        text = svg.read_text(encoding="utf-8")
        root = re.search(r"<svg\b[^>]*>", text)
        checks = {
            'an <svg> with role="img"': bool(root and 'role="img"' in root[0]),
            "a <title>": bool(re.search(r"<title\b[^>]*>[^<]+</title>", text)),
            "no <script>": "<script" not in text.lower(),
            "no event handler": not re.search(r"\son\w+\s*=", text),
            "no link or font from elsewhere": not re.search(
                r"(?:href|src)\s*=\s*[\"'](?!#)|@import|url\((?!#)", text
            ),
        }
        wrong.extend(f"{svg.relative_to(ROOT)} should have {rule}" for rule, ok in checks.items() if not ok)
    assert wrong == []
