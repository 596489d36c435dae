"""YAML for job specs and policy files: ``yaml.safe_load`` that names an impossible date.

PyYAML turns ``2027-06-31`` into a ``datetime.date`` while it parses, and a day
that does not exist raises a bare ``ValueError`` with no line or field.  Here
such a value is kept as an :class:`ImpossibleDate` placeholder, and
:func:`load` raises :class:`ImpossibleDateError` with the path of the first one
(``("identities", "hero", "valid_until")``) so that the caller can name the
file and the field.  Real dates and every other value parse exactly as with
``yaml.safe_load``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml


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


class _Loader(yaml.SafeLoader):
    """SafeLoader whose timestamps that cannot be built become ImpossibleDate placeholders."""

    def construct_checked_timestamp(self, node: yaml.ScalarNode) -> Any:
        try:
            return self.construct_yaml_timestamp(node)
        except ValueError as exc:
            return ImpossibleDate(str(node.value), str(exc))


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _Loader.construct_checked_timestamp)


def load(text: str | bytes) -> Any:
    """Parse YAML (or JSON) like ``yaml.safe_load``; ImpossibleDateError for a date that does not exist.

    ``yaml.YAMLError`` is raised for text that is not YAML, as by ``yaml.safe_load``.
    """
    data = yaml.load(text, Loader=_Loader)  # _Loader is a SafeLoader: no arbitrary objects
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
