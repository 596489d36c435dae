"""Output URL templates that cannot leave the job's output prefix.

A template such as ``"{shot}/{shot}_v{version:03d}.mp4"`` is rendered with
values that come from specs and edit lists (shot names), which we treat as
untrusted: a value may only be a plain name, and the rendered path must stay
under the output prefix (no ``..``, no absolute paths, no other bucket or
scheme).
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping

from pipeline.errors import SpecError
from pipeline.store import storage

_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\- ]{0,199}$")
"""A field value: a plain name; no separators, no leading dot, no control characters."""


def render_output_url(
    template: str, output_prefix: str, values: Mapping[str, object], *, field: str = "output.template"
) -> str:
    """The URL of one output: ``template`` filled with ``values``, under ``output_prefix``.

    ``template`` is relative to ``output_prefix`` (a full URL that starts with the
    prefix is accepted too).  Raises SpecError naming ``field`` when a value is not
    a plain name, the template uses attribute/index lookups or unknown fields, or
    the result would escape the prefix.
    """
    prefix = output_prefix.rstrip("/")
    if not prefix or ".." in prefix.split("://", 1)[-1].split("/"):
        raise SpecError("output.prefix", f"{output_prefix!r} is empty or contains '..'")
    for name, value in values.items():
        _check_value(f"{field}.{name}", value)
    relative = template
    if "://" in template or template.startswith(prefix):
        if not (template == prefix or template.startswith(prefix + "/")):
            raise SpecError(field, f"{template!r} is not under the output prefix {output_prefix!r}")
        relative = template[len(prefix) + 1 :]
    rendered = _format(relative, values, field)
    _check_relative(rendered, field)
    return storage.join(prefix, rendered)


def render_url(template: str, values: Mapping[str, object], *, field: str) -> str:
    """``template`` (a whole URL or path, e.g. ``output.url``) filled with ``values``.

    The part before the folder of the first placeholder is the template's fixed
    folder; what the placeholders render must stay under it (as
    :func:`render_output_url`), and the fixed folder itself may not hold a
    ``..`` segment or leave the bucket to a placeholder.  Only the values the
    template uses are checked.  A relative template stays relative.  Raises
    SpecError naming ``field`` (values: ``<field>.<name>``).
    """
    head = template.split("{", 1)[0]
    cut = head.rfind("/") + 1
    fixed, rest = template[:cut], template[cut:]
    if ".." in fixed.rpartition("://")[2].split("/"):
        raise SpecError(field, f"{template!r} has a '..' segment: give the folder itself")
    _, sep, after = template.partition("://")
    if sep and "{" in after.split("/", 1)[0]:
        raise SpecError(field, f"{template!r}: the bucket or host must be fixed, not a placeholder")
    used = _names(rest, field)
    for name in used:
        if name in values:
            _check_value(f"{field}.{name}", values[name])
    rendered = _format(rest, {k: v for k, v in values.items() if k in used}, field)
    _check_relative(rendered, field)
    return fixed + rendered


def _names(template: str, field: str) -> set[str]:
    try:
        return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise SpecError(field, f"bad template {template!r}: {exc}") from exc


def _check_value(field: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise SpecError(field, f"must be a name or an integer, not {type(value).__name__}")
    if isinstance(value, int):
        return
    # No separators and no leading dot: a value can never make a "..", "." or empty segment.
    if not _SAFE_VALUE.match(value):
        raise SpecError(
            field,
            f"{value!r} is not a plain name (letters, digits, '_', '-', '.', space; "
            "no '/', '\\', '..', leading '.' or control characters)",
        )


def _format(template: str, values: Mapping[str, object], field: str) -> str:
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise SpecError(field, f"bad template {template!r}: {exc}") from exc
    for _literal, name, _spec, conversion in parsed:
        if name is None:
            continue
        # Attribute and index lookups ({shot.__class__}, {x[0]}) would reach into objects.
        if not name.isidentifier():
            raise SpecError(field, f"template field {{{name}}} must be a plain name")
        if name not in values:
            raise SpecError(
                field, f"template field {{{name}}} has no value (known: {', '.join(sorted(values))})"
            )
        if conversion:
            raise SpecError(field, f"template field {{{name}!{conversion}}}: conversions are not allowed")
    try:
        return template.format_map(dict(values))
    except (ValueError, TypeError) as exc:
        raise SpecError(field, f"cannot render {template!r}: {exc}") from exc


def _check_relative(path: str, field: str) -> None:
    if not path or path.endswith("/"):
        raise SpecError(field, f"rendered path {path!r} does not name a file")
    if "://" in path or path.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", path):
        raise SpecError(field, f"rendered path {path!r} is absolute or names another location")
    if "\\" in path or any(ord(c) < 32 for c in path):
        raise SpecError(field, f"rendered path {path!r} contains a backslash or control character")
    for part in path.split("/"):
        if part in ("", ".", ".."):
            raise SpecError(field, f"rendered path {path!r} has an empty, '.' or '..' segment")
