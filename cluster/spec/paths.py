"""Every URL of a job spec brought to its one canonical spelling, once, before validation.

:func:`canonical_paths` walks every field that names a place (:data:`READ_FIELDS`,
:data:`WRITTEN_FIELDS`) and replaces its value by :func:`pipeline.store.urls.canonical`:
relative local paths are taken against the spec file's folder, ``file://``,
``local://`` and their ``:``-only forms become absolute paths, object-store
schemes are lower-cased with aliases folded.  Everything after (collision
checks, the studio policy, storage) sees only that form.

A field whose value cannot be a storage URL (a chained ``simplecache::`` URL, an
unknown scheme) is a SpecError naming the field.  A field the job *writes*
(``output.url``, ``output.work_url``, ``output.pass_url``, ``output.timeline_url``,
``output.review.url``, ``output.review_timeline_url``, ``shots[i].output``)
is checked for ``..`` segments as written, before anything is normalised:
``out/../../escape/{shot}.mp4`` is refused, not collapsed into a place outside
the folder it seems to name.

No field may name a store inside one process (``memory://``, :func:`pipeline.store.urls.unshared`):
the job's actors are other processes, on other nodes, and would neither find what the driver reads
there nor write where the driver reads back (its outputs, passes, review media, timelines and work
area alike).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

from pipeline.errors import InputRefused, SpecError
from pipeline.store import urls

WRITTEN_FIELDS = (
    "output.url",
    "output.work_url",
    "output.pass_url",
    "output.timeline_url",
    "output.review.url",
    "output.review_timeline_url",
    "shots[].output",
)
"""Fields naming where the job writes: ``..`` is refused in them as written."""
READ_FIELDS = (
    "shots[].url",
    "shots[].pattern",
    "shots[].colour.config",
    "edit.url",
    "edit.media.pattern",
    "colour.config",
    "identities.*.images[]",
    "identities.*.adapter.url",
    "provenance.policy_url",
    "provenance.signer.certificate_chain_url",
    "provenance.signer.private_key_url",
    "models.pack",
)
"""Fields naming what the job reads (``..`` is collapsed in them: ``../plates/x.mov`` is fine)."""
NOT_STORAGE = ("ocio://", "builtin:")
"""Values of those fields that name no file: an OCIO built-in config, the embedded model pack."""


def canonical_paths(data: dict[str, Any], base_dir: str | None) -> dict[str, Any]:
    """``data`` (parsed YAML, not yet validated) with every URL field in canonical form.

    Relative local paths resolve against ``base_dir`` (the current folder when
    None).  Malformed structure is left for validation to report.  Raises
    SpecError naming the field for a ``..`` in a written field or a URL that
    cannot be canonical (:func:`pipeline.store.urls.problem`).
    """
    for spec_field in WRITTEN_FIELDS:
        for name, value in _values(data, spec_field):
            if urls.has_dotdot(value):
                raise SpecError(name, f"{value!r} has a '..' segment: give the folder itself")
    for spec_field in (*WRITTEN_FIELDS, *READ_FIELDS):
        data = _mapped(data, spec_field.split("."), "", lambda name, v: _canonical(name, v, base_dir))
    return data


def _canonical(name: str, value: Any, base_dir: str | None) -> Any:
    if not isinstance(value, str) or value.startswith(NOT_STORAGE):
        return value
    try:
        url = urls.canonical(value, base_dir)
    except InputRefused as exc:
        raise SpecError(name, f"{value!r}: {exc.reason}") from None
    reason = urls.unshared(url)
    if reason is not None:
        raise SpecError(name, reason)
    return url


def _values(data: Any, spec_field: str) -> Iterator[tuple[str, str]]:
    """(dotted name, value) of every string at ``spec_field`` in ``data``."""
    found: list[tuple[str, str]] = []

    def keep(name: str, value: Any) -> Any:
        if isinstance(value, str):
            found.append((name, value))
        return value

    _mapped(data, spec_field.split("."), "", keep)
    return iter(found)


def _mapped(node: Any, path: list[str], name: str, fn: Callable[[str, Any], Any]) -> Any:
    """``node`` with ``fn(dotted name, value)`` applied at ``path`` (``key``, ``key[]``, ``*``); copies."""
    if not path:
        return fn(name, node)
    step, rest = path[0], path[1:]
    if not isinstance(node, dict):
        return node
    if step == "*":
        return {k: _mapped(v, rest, f"{name}.{k}", fn) for k, v in node.items()}
    key, is_list = step.removesuffix("[]"), step.endswith("[]")
    if key not in node:
        return node
    here = f"{name}.{key}" if name else key
    value = node[key]
    if is_list:
        if not isinstance(value, list):
            return node
        value = [_mapped(v, rest, f"{here}[{i}]", fn) for i, v in enumerate(value)]
    else:
        value = _mapped(value, rest, here, fn)
    return {**node, key: value}


def spec_folder(path_or_url: str) -> str | None:
    """The folder relative paths of the spec at ``path_or_url`` resolve against (None: a remote spec)."""
    if not urls.is_local(path_or_url):
        return None
    return os.path.dirname(urls.canonical_path(urls.local_path(path_or_url)))
