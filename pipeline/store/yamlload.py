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
* A tag of the safe schema is taken only where its value fits it: ``!!int abc``,
  ``!!float abc``, ``!!bool maybe``, ``!!null x`` or ``!!timestamp abc`` is refused
  (PyYAML's own constructors raise a bare ``ValueError``, ``KeyError`` or
  ``AttributeError`` that quotes the value), and an integer is bounded in digits
  (:data:`MAX_INT_DIGITS`) before it is converted, written with a tag or not
  (Python refuses more than 4,300 digits with a bare ``ValueError``).  No job spec,
  policy or fixes file holds bytes, sets or ordered pairs, so ``!!binary``,
  ``!!set``, ``!!omap`` and ``!!pairs`` are refused wherever they appear (their
  values would pass the checks that read strings and lists: a ``!!binary`` URL is
  not made canonical).  Such a value is kept as a :class:`BadValue` placeholder while
  the document is built, so that the :class:`LoadError` that :func:`load` raises
  names where it is (``loc``), besides its line and column.

Events come from libyaml when PyYAML was built with it (the whole load three times faster on a
1 MiB spec); nodes are composed and checked here, in Python, either way.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

try:  # libyaml's parser, when PyYAML has it; the rest of the loader is Python either way
    from yaml.cyaml import CParser as _EventParser
except ImportError:  # pragma: no cover - PyYAML without libyaml
    _EventParser = None

MAX_DEPTH = 64
"""Most levels of nested mappings and lists in a document (aliases expanded); JSON alike."""

MAX_ALIAS_GROWTH = 100_000
"""Most values that aliases may add to a document beyond those written out."""

MAX_INT_DIGITS = 30
"""Most digits of an integer in a document (no count, frame or size a spec or policy holds comes near)."""

_MERGE_TAG = "tag:yaml.org,2002:merge"
_LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"
_TAG = "tag:yaml.org,2002:"


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


@dataclass(frozen=True)
class BadValue:
    """A value the loader refuses (a tag its value does not fit, an integer too long, bytes or a set),
    kept in place while the document is built so that :func:`load` can say where it is."""

    problem: str
    line: int
    column: int


class LoadError(ValueError):
    """Text that is not usable YAML: ``line L, column C: problem`` - never the line's own text.

    ``loc``: the keys and list indexes of the value refused (:class:`BadValue`), when known (``()``:
    the document itself); None for text that is not YAML."""

    def __init__(
        self,
        problem: str,
        *,
        line: int | None = None,
        column: int | None = None,
        loc: tuple[int | str, ...] | None = None,
    ) -> None:
        where = "" if line is None else f"line {line}, column {column or 1}: "
        super().__init__(f"{where}{problem}")
        self.problem = problem
        self.line = line
        self.column = column
        self.loc = loc


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


class _PyEvents(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):
    """PyYAML's own event parser, where libyaml's is missing."""

    def __init__(self, stream: str | bytes) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)


class _Loader(Composer, SafeConstructor, Resolver):
    """A safe loader (SafeConstructor: no arbitrary objects) with a nesting bound, an alias-expansion
    bound, unique keys, and placeholders for dates that do not exist and values refused."""

    def __init__(self, stream: str | bytes) -> None:
        events = _EventParser(stream) if _EventParser is not None else _PyEvents(stream)
        # What the Composer reads events through, bound once (a call per event, not two).
        self.check_event, self.peek_event, self.get_event = (
            events.check_event,
            events.peek_event,
            events.get_event,
        )
        self.dispose = events.dispose
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
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
        if not isinstance(node.value, str) or not self.timestamp_regexp.match(node.value):
            return _bad(node, "a value tagged !!timestamp is not a date")
        try:
            return self.construct_yaml_timestamp(node)
        except ValueError as exc:
            return ImpossibleDate(str(node.value), str(exc))

    def construct_checked_int(self, node: yaml.ScalarNode) -> Any:
        value = self.construct_scalar(node)
        if not _fits(value, "int"):
            return _bad(node, "a value tagged !!int is not a whole number")
        body = re.sub(r"^[-+]?(0[xbo])?", "", value.replace("_", ""))
        if sum(c != ":" for c in body) > MAX_INT_DIGITS:
            return _bad(node, f"an integer of more than {MAX_INT_DIGITS} digits")
        return self._converted(node, self.construct_yaml_int, "a value tagged !!int is not a whole number")

    def construct_checked_float(self, node: yaml.ScalarNode) -> Any:
        value = self.construct_scalar(node)
        if not (_fits(value, "float") or _FLOAT_12.fullmatch(value)):
            return _bad(node, "a value tagged !!float is not a number")
        return self._converted(node, self.construct_yaml_float, "a value tagged !!float is not a number")

    def construct_checked_bool(self, node: yaml.ScalarNode) -> Any:
        if str(self.construct_scalar(node)).lower() not in self.bool_values:
            return _bad(node, "a value tagged !!bool is not true or false")
        return self.construct_yaml_bool(node)

    def construct_checked_null(self, node: yaml.ScalarNode) -> Any:
        if not _fits(self.construct_scalar(node), "null"):
            return _bad(node, "a value tagged !!null is not empty, ~ or null")
        return None

    def construct_refused(self, node: yaml.Node) -> Any:
        kind = str(node.tag).removeprefix(_TAG)
        return _bad(node, f"!!{kind} values are not accepted here (only text, numbers, lists and mappings)")

    def _converted(self, node: yaml.ScalarNode, convert: Any, problem: str) -> Any:
        try:
            return convert(node)
        except (ValueError, ArithmeticError):  # "0x_" fits the pattern; int("", 16) does not
            return _bad(node, problem)


def _bad(node: yaml.Node, problem: str) -> BadValue:
    return BadValue(problem, node.start_mark.line + 1, node.start_mark.column + 1)


_IMPLICIT = {
    tag.removeprefix(_TAG): pattern
    for resolvers in Resolver.yaml_implicit_resolvers.values()
    for tag, pattern in resolvers
}
"""The patterns by which PyYAML reads a plain scalar as an int, a float, a bool, null or a date."""

_FLOAT_12 = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
"""A float as YAML 1.2 writes it (``1e5``, ``12``): also taken with a ``!!float`` tag."""


def _fits(value: Any, kind: str) -> bool:
    return isinstance(value, str) and bool(_IMPLICIT[kind].match(value))


_Loader.add_constructor(_TAG + "timestamp", _Loader.construct_checked_timestamp)
_Loader.add_constructor(_TAG + "int", _Loader.construct_checked_int)
_Loader.add_constructor(_TAG + "float", _Loader.construct_checked_float)
_Loader.add_constructor(_TAG + "bool", _Loader.construct_checked_bool)
_Loader.add_constructor(_TAG + "null", _Loader.construct_checked_null)
for _kind in ("binary", "set", "omap", "pairs"):
    _Loader.add_constructor(_TAG + _kind, _Loader.construct_refused)


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
    expand too far, with a key written twice in one mapping, or with a value
    refused (a tag it does not fit, an integer too long, bytes or a set: with
    ``loc``, where it is).
    """
    try:
        loader = _Loader(text)
        try:
            data = loader.get_single_data()
        finally:
            loader.dispose()
    except LoadError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = str(exc.problem or exc.context or "not YAML")
        if problem == _LIBYAML_TOO_DEEP:  # libyaml's own bound (1,000 levels), met while it looks ahead
            problem = f"nested deeper than {MAX_DEPTH} levels"
        raise _error(_quiet(problem), mark) from None
    except yaml.reader.ReaderError as exc:
        raise LoadError(f"{exc.reason} (character {exc.character!r}, byte {exc.position})") from None
    except yaml.YAMLError:
        raise LoadError("not YAML") from None
    except UnicodeError:  # a str with a lone surrogate: libyaml reads UTF-8
        raise LoadError("not UTF-8 text") from None
    except (ValueError, TypeError, KeyError, AttributeError, ArithmeticError):
        # A constructor this module does not check failed (never seen): no traceback, no value quoted.
        raise LoadError("a value could not be read") from None
    found = _first_placeholder(data, ())
    if found is not None:
        loc, bad = found
        if isinstance(bad, BadValue):
            raise LoadError(bad.problem, line=bad.line, column=bad.column, loc=loc)
        raise ImpossibleDateError(loc, bad.text, bad.reason)
    return data


def _first_placeholder(
    node: Any, loc: tuple[int | str, ...]
) -> tuple[tuple[int | str, ...], ImpossibleDate | BadValue] | None:
    """The first date that does not exist or value refused in ``node``, and where it is (a refused key:
    where its mapping is)."""
    if isinstance(node, ImpossibleDate | BadValue):
        return loc, node
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(key, ImpossibleDate):
                return (*loc, key.text), key
            if isinstance(key, BadValue):
                return loc, key
            found = _first_placeholder(value, (*loc, str(key)))
            if found is not None:
                return found
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found = _first_placeholder(value, (*loc, i))
            if found is not None:
                return found
    return None
