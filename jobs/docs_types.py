"""What the job-spec reference says about one pydantic field: its type, default, bounds and docstring.

Helpers of :mod:`jobs.spec_reference`; nothing here imports the spec itself.  Attribute docstrings
(the string literal right under a field) are read from each model's source with :mod:`ast`, for the
class and its bases, so nothing global has to be switched on in the models.
"""

from __future__ import annotations

import argparse
import ast
import enum
import inspect
import re
import sys
import textwrap
import types
import typing
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

_BOUNDS = (
    (annotated_types.Ge, "ge", ">= {}"),
    (annotated_types.Gt, "gt", "> {}"),
    (annotated_types.Le, "le", "<= {}"),
    (annotated_types.Lt, "lt", "< {}"),
    (annotated_types.MinLen, "min_length", "length >= {}"),
    (annotated_types.MaxLen, "max_length", "length <= {}"),
    (annotated_types.MultipleOf, "multiple_of", "a multiple of {}"),
)


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _is_enum(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, enum.Enum)


def _literal_values(tp: Any) -> tuple[Any, ...]:
    return typing.get_args(tp) if typing.get_origin(tp) is typing.Literal else ()


def _union_args(tp: Any) -> tuple[Any, ...]:
    origin = typing.get_origin(tp)
    return typing.get_args(tp) if origin in (typing.Union, types.UnionType) else ()


def type_name(tp: Any) -> str:
    """A reader's name for annotation ``tp``: ``int``, ``list of str``, ``"a" | "b"``, ``ShotSpec``..."""
    if tp is type(None):
        return "null"
    values = _literal_values(tp)
    if values:
        return " | ".join(f"`{value!r}`".replace("'", '"') for value in values)
    if _is_enum(tp):
        return " | ".join(f'`"{member.value}"`' for member in tp)
    args = _union_args(tp)
    if args:
        return " or ".join(type_name(arg) for arg in args)
    origin, params = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return type_name(params[0])
    if origin in (tuple, list, set, frozenset) and params:
        return f"list of {type_name(params[0])}"
    if origin is dict and params:
        return f"mapping of {type_name(params[0])} to {type_name(params[1])}"
    if _is_model(tp):
        return f"block ({tp.__name__})"
    return getattr(tp, "__name__", str(tp)).replace("typing.", "")


def nested_models(tp: Any) -> Iterator[tuple[str, type[BaseModel]]]:
    """The models inside annotation ``tp``, each with the path suffix that reaches it (``[]``, ``.<name>``)."""
    if _is_model(tp):
        yield "", tp
        return
    origin, params = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        yield from nested_models(params[0])
    elif _union_args(tp):
        for arg in params:
            yield from nested_models(arg)
    elif origin in (tuple, list, set, frozenset) and params:
        for suffix, model in nested_models(params[0]):
            yield f"[]{suffix}", model
    elif origin is dict and len(params) == 2:
        for suffix, model in nested_models(params[1]):
            yield f".<name>{suffix}", model


def _shown(value: Any) -> str:
    if isinstance(value, BaseModel):
        return "its block's defaults"
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, (tuple, list)):
        return "`[" + ", ".join(str(item) for item in value) + "]`"
    return f"`{value!r}`"


def default_of(info: FieldInfo) -> str:
    """The default as YAML would spell it; "required" when there is none."""
    if info.default_factory is not None:
        factory: Any = info.default_factory
        return _shown(factory()) if not _is_model(factory) else "its block's defaults"
    if info.default is PydanticUndefined:
        return "required"
    return _shown(info.default)


def bounds_of(info: FieldInfo) -> str:
    """Numeric and length bounds of the field; choices are in its type."""
    found: list[str] = []
    for constraint in info.metadata:
        for kind, attr, text in _BOUNDS:
            if isinstance(constraint, kind):
                found.append(text.format(getattr(constraint, attr)))
        if isinstance(constraint, annotated_types.Interval):
            for kind, attr, text in _BOUNDS[:4]:
                value = getattr(constraint, attr)
                if value is not None:
                    found.append(text.format(value))
    return ", ".join(found)


def _docs_in_class(cls: type) -> dict[str, str]:
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    tree = ast.parse(source)
    node = tree.body[0]
    if not isinstance(node, ast.ClassDef):
        return {}
    docs: dict[str, str] = {}
    for first, second in zip(node.body, node.body[1:], strict=False):
        if (
            isinstance(first, ast.AnnAssign)
            and isinstance(first.target, ast.Name)
            and isinstance(second, ast.Expr)
            and isinstance(second.value, ast.Constant)
            and isinstance(second.value.value, str)
        ):
            docs[first.target.id] = second.value.value
    return docs


def attribute_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings written under the fields of ``cls`` itself (a dataclass or a model)."""
    return _docs_in_class(cls)


@cache
def field_docs(model: type[BaseModel]) -> dict[str, str]:
    """Attribute docstrings of ``model``'s fields; a subclass's own replace its bases'."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if _is_model(cls) and cls is not BaseModel:
            docs.update(_docs_in_class(cls))
    return docs


_ROLE = re.compile(r":(?:mod|class|func|data|meth|attr):`~?([^`]+)`")


def doc_markdown(text: str) -> str:
    """A docstring as markdown, its paragraphs and lists kept: reST literals and roles become code spans."""
    text = _ROLE.sub(r"`\1`", inspect.cleandoc(text)).replace("``", "`")
    paragraphs = []
    for paragraph in text.split("\n\n"):
        # Each line joins the one before unless it starts a list item, so a wrapped line that
        # happens to begin with ">" or "1." is not read as markdown of its own.
        lines: list[str] = []
        for line in paragraph.splitlines():
            if lines and not line.startswith(("- ", "* ")):
                lines[-1] += " " + line.strip()
            else:
                lines.append(line.strip())
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)


def doc_text(text: str) -> str:
    """A docstring as one line of markdown (a table cell)."""
    return " ".join(doc_markdown(text).split())


def summary_of(text: str) -> str:
    """The first paragraph of a docstring, as one line."""
    return doc_text(inspect.cleandoc(text).split("\n\n", 1)[0])


def generated_page_main(
    argv: list[str] | None, *, module: str, page: Path, what: str, render: Callable[[], str]
) -> int:
    """``--write [PAGE]`` or ``--check [PAGE]`` of a generated reference page (exit 1 when it differs)."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=f"The {what} page, generated.")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", metavar="PAGE", nargs="?", const=str(page), help="exit 1 if PAGE differs")
    mode.add_argument("--write", metavar="PAGE", nargs="?", const=str(page), help="write the page to PAGE")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        Path(args.write).parent.mkdir(parents=True, exist_ok=True)
        Path(args.write).write_text(text, encoding="utf-8")
        return 0
    target = Path(args.check)
    if (target.read_text(encoding="utf-8") if target.is_file() else "") != text:
        regenerate = f"python -m {module} --write {page}"
        print(f"{target} is not the generated {what}; regenerate it: {regenerate}", file=sys.stderr)
        return 1
    return 0
