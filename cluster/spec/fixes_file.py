"""``jobs.render --fixes FILE``: a shot's notes, written as fixes, merged into the spec before it is validated.

A file holds one shot's fixes, the form the report's "Frames to review" downloads
(:mod:`cluster.report.notes`)::

    shot: "sc010"
    fixes:
      - {frames: "1013-1028", track: 2, action: keep_plate}
      - {frames: "1070-1070", box: {1070: [410, 120, 530, 270]}, identity: "hero"}

The file's fixes go after the shot's own ``fixes:`` (the shot named by its ``name``, or by the name its
``url`` gives it).  With ``edit:``, a name that is no ``shots:`` entry becomes a name-only entry (a clip
of the cut, checked when the cut is read).  Errors name the file and the shot: a shot the spec does not
have, a file of another form, a fix the spec refuses (``fixes.yaml (shot sc010, fixes[0]): ...``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cluster.spec.fixes import MAX_FIXES_PER_JOB, MAX_FIXES_PER_SHOT
from cluster.spec.job import JobSpec, parse_spec, read_yaml
from cluster.spec.paths import spec_folder
from cluster.spec.shot_refs import url_shot_name
from pipeline.errors import InputRefused, SpecError, StorageError
from pipeline.store import storage


@dataclass(frozen=True)
class FixesFile:
    """One ``--fixes`` file: the shot it is for and its fixes, as read (validated with the spec)."""

    path: str
    shot: str
    fixes: tuple[Any, ...]


@dataclass(frozen=True)
class MergedFixes:
    """Where each merged fix went: ``shots[i].fixes[j]`` -> the file, the shot and the fix's index there."""

    origins: Mapping[str, tuple[str, str, int]] = field(default_factory=dict)

    def rename(self, exc: SpecError) -> SpecError:
        """``exc`` naming the file and the shot when it is about a merged fix (else ``exc`` itself); a
        merged fix its reason names (the other of two that contradict each other) is named so too."""
        reason = exc.reason
        for where, (path, shot, k) in self.origins.items():
            if where in reason:  # "shots[0].fixes[1]" is no part of "shots[0].fixes[12]"
                reason = reason.replace(where, f"{path} (shot {shot}, fixes[{k}])")
        for where, (path, shot, k) in self.origins.items():
            if exc.field == where or exc.field.startswith((where + ".", where + "[")):
                return SpecError(f"{path} (shot {shot}, fixes[{k}])", reason)
        return exc if reason == exc.reason else SpecError(exc.field, reason)


def read_fixes_file(path: str) -> FixesFile:
    """A ``--fixes`` file: a mapping ``{shot: NAME, fixes: [fix, ...]}`` (SpecError naming the file)."""
    data = read_yaml(path, what="fixes file", field=path)
    if not isinstance(data, Mapping) or set(data) != {"shot", "fixes"}:
        raise SpecError(
            path, "must be a mapping with 'shot' (a shot's name) and 'fixes' (a list), nothing else"
        )
    shot, fixes = data["shot"], data["fixes"]
    if not isinstance(shot, str) or not shot:
        raise SpecError(path, "'shot' must be a shot's name")
    if not isinstance(fixes, list) or not fixes:
        raise SpecError(f"{path} (shot {shot})", "'fixes' must be a list of at least one fix")
    return FixesFile(path, shot, tuple(fixes))


def merge_fixes(data: Any, files: Sequence[FixesFile]) -> tuple[Any, MergedFixes]:
    """``data`` (a parsed spec) with each file's fixes added to its shot, and where they went."""
    if not files or not isinstance(data, Mapping) or not isinstance(data.get("shots", []), list):
        return data, MergedFixes()
    shots = [dict(s) if isinstance(s, Mapping) else s for s in data.get("shots", [])]
    origins: dict[str, tuple[str, str, int]] = {}
    for file in files:
        i = _shot_index(shots, file.shot)
        if i is None and data.get("edit") is not None:
            shots.append({"name": file.shot})
            i = len(shots) - 1
        if i is None:
            names = [n for n in (_entry_name(s) for s in shots) if n]
            raise SpecError(
                file.path,
                f"shot {file.shot!r} is not a shot of the job (its shots: {', '.join(names) or 'none'})",
            )
        own = shots[i].get("fixes") or []
        if not isinstance(own, list):
            raise SpecError(f"shots[{i}].fixes", "must be a list of fixes")
        for k in range(len(file.fixes)):
            origins[f"shots[{i}].fixes[{len(own) + k}]"] = (file.path, file.shot, k)
        shots[i] = {**shots[i], "fixes": [*own, *file.fixes]}
    return {**data, "shots": shots}, MergedFixes(origins)


MAX_FIXES_FILES_BYTES = 4 << 20
"""Most bytes the ``--fixes`` files of one job may hold together (each is at most 1 MiB, as a spec):
a note holds a few fixes of a few hundred bytes each."""


def read_fixes_files(paths: Sequence[str]) -> list[FixesFile]:
    """The ``--fixes`` files, read one after another and refused as soon as they hold more than
    :data:`MAX_FIXES_FILES_BYTES` together, or more fixes than a shot or a job takes (naming the file
    that passes the bound): many files cost no more than the bound."""
    files: list[FixesFile] = []
    size = 0
    per_shot: dict[str, int] = {}
    for path in paths:
        try:
            size += storage.size(path)
        except (StorageError, InputRefused):
            pass  # read_fixes_file says what is wrong with it
        if size > MAX_FIXES_FILES_BYTES:
            raise SpecError(
                path,
                f"the --fixes files hold more than {storage.describe_bytes(MAX_FIXES_FILES_BYTES)} together "
                "(by this one); merge the notes of a shot into one file",
            )
        file = read_fixes_file(path)
        per_shot[file.shot] = per_shot.get(file.shot, 0) + len(file.fixes)
        if per_shot[file.shot] > MAX_FIXES_PER_SHOT:
            raise SpecError(
                f"{path} (shot {file.shot})",
                f"the --fixes files give shot {file.shot} {per_shot[file.shot]:,} fixes (by this one); a "
                f"shot takes at most {MAX_FIXES_PER_SHOT:,}",
            )
        if sum(per_shot.values()) > MAX_FIXES_PER_JOB:
            raise SpecError(
                path, f"the --fixes files hold more than {MAX_FIXES_PER_JOB:,} fixes (by this one)"
            )
        files.append(file)
    return files


def load_spec_with_fixes(path_or_url: str, fixes_paths: Sequence[str]) -> tuple[JobSpec, MergedFixes]:
    """:func:`cluster.spec.job.load_spec` with the ``--fixes`` files merged in before validation."""
    files = read_fixes_files(fixes_paths)
    data, merged = merge_fixes(read_yaml(path_or_url), files)
    try:
        return parse_spec(data, base_dir=spec_folder(path_or_url)), merged
    except SpecError as exc:
        raise merged.rename(exc) from None


def _entry_name(shot: Any) -> str | None:
    if not isinstance(shot, Mapping):
        return None
    if isinstance(shot.get("name"), str):
        return str(shot["name"])
    return url_shot_name(shot["url"]) if isinstance(shot.get("url"), str) else None


def _shot_index(shots: Sequence[Any], name: str) -> int | None:
    return next((i for i, s in enumerate(shots) if _entry_name(s) == name), None)
