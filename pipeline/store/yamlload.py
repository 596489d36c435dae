"""YAML for job specs and policy files: ``yaml.safe_load`` with bounds, unique keys and quiet errors.

PyYAML turns ``2027-06-31`` into a ``datetime.date`` while it parses, and a day
that does not exist raises a bare ``ValueError`` with no line or field.  Here
such a value is kept as an :class:`ImpossibleDate` placeholder, and
:func:`load` raises :class:`ImpossibleDateError` with the path of the first one
(``("identities", "hero", "valid_until")``) so that the caller can name the
file and the field.

Every other problem is a :class:`LoadError` with a line, a column and what is
wrong, and never the text of the line: a spec line can hold a secret
(``watermark.key``, a URL with a password), and PyYAML's own message quotes it.

* Nesting is bounded (:data:`MAX_DEPTH` levels), checked while the document is
  composed, so a list nested 20,000 deep is refused instead of exhausting the
  stack.
* Aliases are allowed - anchors and ``<<`` merge keys are how a spec shares
  settings between shots - but what they expand to is bounded: before any
  Python object is built, the composed node graph is walked once (each node's
  expanded size memoised, so a "billion laughs" chain costs its written size)
  and a document whose aliases add more than :data:`MAX_ALIAS_GROWTH` values,
  or nest past :data:`MAX_DEPTH` once expanded, or refer to themselves, is
  refused.  Refusing aliases altogether would also be safe, but would break
  specs that are valid YAML for no gain once the expansion is bounded.
* A key written twice in one mapping is refused (YAML says keys are unique;
  PyYAML keeps the last, so a second ``provenance:`` block would silently drop
  the first), naming the key and both lines.  Keys merged in with ``<<`` may be
  overridden: that is what a merge is for.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import yaml

MAX_DEPTH = 64
"""Most levels of nested mappings and lists in a document (aliases expanded); JSON alike."""

MAX_ALIAS_GROWTH = 100_000
"""Most values that aliases may add to a document beyond those written out."""

_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass(frozen=True)
class ImpossibleDate:
    """A scalar that YAML reads as a timestamp but whose day does not exist."""

    text: str
    reason: str


class ImpossibleDateError(ValueError):
    """``text`` at ``loc`` (keys and list indexes) looks like a date but is not one."""

    def __init__(self, loc: tuple[int | str, ...], text: str, reason: str) -> None:
        super().__init__(f"{text!r} is not a date that exists ({reason})")
        self.loc = loc
        self.text = text
        self.reason = reason


class LoadError(ValueError):
    """Text that is not usable YAML: ``line L, column C: problem`` - never the line's own text."""

    def __init__(self, problem: str, *, line: int | None = None, column: int | None = None) -> None:
        where = "" if line is None else f"line {line}, column {column or 1}: "
        super().__init__(f"{where}{problem}")
        self.problem = problem
        self.line = line
        self.column = column


def _error(problem: str, mark: Any) -> LoadError:
    if mark is None:
        return LoadError(problem)
    return LoadError(problem, line=mark.line + 1, column=mark.column + 1)


_QUOTED = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")
"""A quoted piece of one of PyYAML's problems: a token name (``'<stream end>'``), a character, or source text."""


def _quiet_piece(match: re.Match[str]) -> str:
    inner = match.group(0)[1:-1]
    if len(inner) <= 4 or (inner.startswith("<") and inner.endswith(">")):
        return match.group(0)  # ',' or '\\t' or '<block end>': PyYAML's own words
    return "(text not shown)"  # a tag, an alias name, an escape: text of the source


def _quiet(problem: str) -> str:
    return _QUOTED.sub(_quiet_piece, problem)


def _key_text(key: Any) -> str:
    text = repr(key.text if isinstance(key, ImpossibleDate) else key)
    return text if len(text) <= 60 else text[:57] + "..."


class _Loader(yaml.SafeLoader):
    """SafeLoader with a nesting bound, an alias-expansion bound, unique keys, and placeholder dates."""

    def __init__(self, stream: str | bytes) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        nested = isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent)
        if nested:
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise _error(f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
        try:
            return super().compose_node(parent, index)
        finally:
            if nested:
                self._depth -= 1

    def get_single_data(self) -> Any:
        node = self.get_single_node()
        if node is None:
            return None
        self._check_graph(node)
        return self.construct_document(node)

    def _check_graph(self, root: Any) -> None:
        """Expanded size and depth of every node (memoised, iterative) and unique keys, before construction."""
        size: dict[int, int] = {}
        depth: dict[int, int] = {}
        open_nodes: set[int] = set()
        stack: list[tuple[Any, bool]] = [(root, False)]
        while stack:
            node, done = stack.pop()
            key = id(node)
            children = _children(node)
            if done:
                open_nodes.discard(key)
                size[key] = 1 + sum(size[id(c)] for c in children)
                depth[key] = (1 + max((depth[id(c)] for c in children), default=0)) if children else 0
                if depth[key] > MAX_DEPTH:
                    raise _error(f"aliases nest this deeper than {MAX_DEPTH} levels", node.start_mark)
                if size[key] > len(size) + MAX_ALIAS_GROWTH:
                    raise _error(
                        f"aliases expand this to more than {MAX_ALIAS_GROWTH:,} values", node.start_mark
                    )
                if isinstance(node, yaml.MappingNode):
                    self._unique_keys(node)
                continue
            if key in size:
                continue
            if key in open_nodes:
                raise _error("an alias refers to a collection that holds it (endless)", node.start_mark)
            open_nodes.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in children)

    def _unique_keys(self, node: Any) -> None:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
                continue
            key = self.construct_object(key_node)
            if not isinstance(key, Hashable):
                continue
            first = seen.setdefault(key, key_node)
            if first is not key_node:
                raise _error(
                    f"duplicate key {_key_text(key)} (lines {first.start_mark.line + 1} "
                    f"and {key_node.start_mark.line + 1})",
                    key_node.start_mark,
                )

    def construct_checked_timestamp(self, node: yaml.ScalarNode) -> Any:
        try:
            return self.construct_yaml_timestamp(node)
        except ValueError as exc:
            return ImpossibleDate(str(node.value), str(exc))


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _Loader.construct_checked_timestamp)


def _children(node: Any) -> list[Any]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [item for pair in node.value for item in pair]
    return []


def load(text: str | bytes) -> Any:
    """Parse YAML (or JSON) like ``yaml.safe_load``, within the bounds above.

    ImpossibleDateError for a date that does not exist; LoadError (line, column,
    problem, no source text) for text that is not YAML, too deep, whose aliases
    expand too far, or with a key written twice in one mapping.
    """
    try:
        data = yaml.load(text, Loader=_Loader)  # _Loader is a SafeLoader: no arbitrary objects
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise _error(_quiet(str(exc.problem or exc.context or "not YAML")), mark) from None
    except yaml.reader.ReaderError as exc:
        raise LoadError(f"{exc.reason} (character {exc.character!r}, byte {exc.position})") from None
    except yaml.YAMLError:
        raise LoadError("not YAML") from None
    found = _first_impossible(data, ())
    if found is not None:
        loc, bad = found
        raise ImpossibleDateError(loc, bad.text, bad.reason)
    return data


def _first_impossible(
    node: Any, loc: tuple[int | str, ...]
) -> tuple[tuple[int | str, ...], ImpossibleDate] | None:
    if isinstance(node, ImpossibleDate):
        return loc, node
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(key, ImpossibleDate):
                return (*loc, key.text), key
            found = _first_impossible(value, (*loc, str(key)))
            if found is not None:
                return found
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found = _first_impossible(value, (*loc, i))
            if found is not None:
                return found
    return None
