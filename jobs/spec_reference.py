"""The job-spec reference page, generated from the spec's pydantic models so it cannot drift.

Walks :class:`cluster.spec.JobSpec` recursively: every key with its dotted path, type, default,
bounds and the attribute docstring written under the field (read from the model's source with
:mod:`ast`, for the class and each of its bases).  The output is deterministic markdown::

    python -m jobs.spec_reference --write docs/reference/job-spec.md   # regenerate the page
    python -m jobs.spec_reference --check docs/reference/job-spec.md   # exit 1 when it differs
"""

from __future__ import annotations

import html
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from cluster.spec import JobSpec
from jobs.docs_types import (
    bounds_of,
    default_of,
    doc_markdown,
    doc_text,
    field_docs,
    generated_page_main,
    nested_models,
    summary_of,
    type_name,
)

PAGE = Path("docs/reference/job-spec.md")
REGENERATE = f"python -m jobs.spec_reference --write {PAGE}"

HEADER = f"""\
---
hide:
  - navigation
---

# Job-spec reference

<!-- Generated from the pydantic models of cluster/spec.py by `{REGENERATE}`: do not edit. -->

Every key a job spec accepts, block by block, with its type, default, bounds and what it is for.
A key not listed here is refused (`unknown key`, naming the dotted field); so is a value of the
wrong type or out of its bounds.  The prose guide is [The job spec](../job-spec.md).

In paths, `[]` stands for any item of a list (`shots[].url`) and `<name>` for any key of a
mapping (`identities.<name>.images`).
"""


@dataclass(frozen=True)
class Block:
    """One model met on the walk, at its dotted path."""

    path: str
    model: type[BaseModel]


def walk(model: type[BaseModel], path: str = "") -> list[Block]:
    """Every block under ``model`` (itself first), depth first in field order, each model once per path."""
    blocks = [Block(path, model)]
    for name, info in model.model_fields.items():
        key = _key(name, info)
        for suffix, child in nested_models(info.annotation):
            child_path = f"{path}.{key}{suffix}" if path else f"{key}{suffix}"
            if child is model or any(block.model is child and block.path == child_path for block in blocks):
                continue
            blocks.extend(walk(child, child_path))
    return blocks


def _key(name: str, info: FieldInfo) -> str:
    return info.alias or name


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def key_cell(key: str) -> str:
    """A dotted key as code that may wrap after a dot, never inside a name (the page's CSS)."""
    escaped = html.escape(key, quote=False).replace(".", ".<wbr>")
    return f'<code class="spec-key">{escaped}</code>'


def anchor(path: str) -> str:
    """The heading id of the block at ``path`` (``shots[].frames`` -> ``shots-frames``)."""
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-") or "top-level"


def homes(blocks: list[Block]) -> dict[type[BaseModel], str]:
    """Where each model's table is written: its shortest path (the first of equals)."""
    home: dict[type[BaseModel], str] = {}
    for block in blocks:
        known = home.get(block.model)
        if known is None or _depth(block.path) < _depth(known):
            home[block.model] = block.path
    return home


def _depth(path: str) -> int:
    return path.count(".") + path.count("[]")


def _describe(name: str, info: FieldInfo, docs: dict[str, str]) -> str:
    """A field's attribute docstring, else the first paragraph of the block it holds."""
    if name in docs:
        return doc_text(docs[name])
    for _, child in nested_models(info.annotation):
        return summary_of(child.__doc__ or "")
    return ""


def render_block(block: Block, home: str, *, one_of: bool = False) -> list[str]:
    """The markdown of one block: a heading, the model's docstring and a table of its keys.

    ``one_of``: other models share the block's path (the kinds of a union, such as a shot's fixes):
    the heading and its id name the model too."""
    title = f"`{block.path}`" if block.path else "Top level"
    ident = anchor(block.path)
    if one_of:
        title, ident = f"{title} ({block.model.__name__})", f"{ident}-{block.model.__name__.lower()}"
    lines = [f"## {title} {{#{ident}}}", ""]
    keys = [
        f"{block.path}.{_key(name, info)}" if block.path else _key(name, info)
        for name, info in block.model.model_fields.items()
    ]
    if home != block.path:
        refused = ""
        if block.path.endswith("fixes[].faces"):  # a fix's frames take the render keys only
            from cluster.spec.fixes import RENDER_FACE_FIELDS

            whole = [key for key in keys if key.rsplit(".", 1)[1] not in RENDER_FACE_FIELDS]
            keys = [key for key in keys if key not in whole]
            refused = f" The others ({', '.join(f'`{k.rsplit(".", 1)[1]}`' for k in whole)}) apply to the whole shot: refused here."
        spans = ", ".join(f"`{key}`" for key in keys)
        return lines + [
            f"The same keys, defaults and bounds as [`{home}`](#{anchor(home)}): {spans}.{refused}",
            "",
        ]
    intro = doc_markdown(block.model.__doc__ or "")
    if intro:
        lines += [intro, ""]
    lines += ["| key | type | default | bounds | what it is |", "|---|---|---|---|---|"]
    docs = field_docs(block.model)
    for key, (name, info) in zip(keys, block.model.model_fields.items(), strict=True):
        cells = [
            key_cell(key),
            _cell(type_name(info.annotation)),
            _cell(default_of(info)),
            _cell(bounds_of(info)),
            _cell(_describe(name, info, docs)),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def render() -> str:
    """The whole page, the same bytes for the same models."""
    blocks = list(dict.fromkeys(walk(JobSpec)))  # a block reached through several kinds of a union once
    home = homes(blocks)
    models_at: dict[str, set[type[BaseModel]]] = {}
    for block in blocks:
        models_at.setdefault(block.path, set()).add(block.model)
    lines = [HEADER]
    for block in blocks:
        lines += render_block(block, home[block.model], one_of=len(models_at[block.path]) > 1)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    return generated_page_main(
        argv, module="jobs.spec_reference", page=PAGE, what="job-spec reference", render=render
    )


if __name__ == "__main__":
    sys.exit(main())
