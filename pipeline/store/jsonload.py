"""JSON from files that can come from outside or be tampered with: bounded depth, unique keys.

``json.loads`` recurses once per level of nesting, so 200,000 ``[`` end in a
``RecursionError`` (a traceback, not a refusal), and it keeps the last of two
equal keys, so a second ``"sha256"`` in a pack manifest would silently replace
the first.  :func:`loads` scans the brackets outside strings first - a loop,
never a recursion on the input's depth - and refuses more than
:data:`pipeline.store.yamlload.MAX_DEPTH` levels, then parses with a hook that refuses
a key written twice in one object.  Every refusal is a :class:`JsonError`, a
``ValueError`` like ``json.JSONDecodeError``, so callers that treat unparsable
JSON as absent or invalid treat these the same way.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from pipeline.store.yamlload import MAX_DEPTH


class JsonError(ValueError):
    """JSON refused before or while parsing: too deep, or a key written twice."""


_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')
"""A whole string (its brackets do not count) or one bracket."""
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def check_depth(text: str, *, max_depth: int = MAX_DEPTH) -> None:
    """JsonError when ``text`` nests more than ``max_depth`` arrays and objects (brackets outside strings)."""
    # The strings removed, then everything but brackets (both in C): the depth is a running sum.
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text)).encode()
    if brackets.count(b"[") + brackets.count(b"{") <= max_depth:
        return
    codes = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    if int(np.cumsum(steps).max()) <= max_depth:
        return
    depth = 0  # too deep: found again token by token, to say where
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if token in ("[", "{"):
            depth += 1
            if depth > max_depth:
                raise JsonError(f"nested deeper than {max_depth} levels (at character {match.start()})")
        elif token in ("]", "}"):
            depth -= 1
    raise AssertionError("unreachable: the bracket count said too deep")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            shown = repr(key) if len(key) <= 60 else repr(key[:57]) + "..."
            raise JsonError(f"duplicate key {shown} in one object")
        out[key] = value
    return out


def loads(data: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` within the depth bound, refusing duplicate keys.

    Raises JsonError, ``json.JSONDecodeError`` or ``UnicodeDecodeError``: all ``ValueError``.
    """
    if isinstance(data, bytes | bytearray):
        data = data.decode(json.detect_encoding(data), "surrogatepass")
    text = data
    check_depth(text, max_depth=max_depth)
    return json.loads(text, object_pairs_hook=_unique)
