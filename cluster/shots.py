"""The concrete shots of a job: patterns expanded, names unique, output and work URLs filled in."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from cluster.spec import JobSpec
from pipeline import storage
from pipeline.errors import SpecError


@dataclass(frozen=True)
class ShotRef:
    """A concrete shot of a job after pattern expansion."""

    name: str
    url: str
    output_url: str


def _shot_name(url: str) -> str:
    base = url.rstrip("/").rsplit("/", 1)[-1]
    stem = base.rsplit(".", 1)[0] if "." in base else base
    return re.sub(r"[^A-Za-z0-9._-]", "_", stem) or "shot"


def expand_shots(spec: JobSpec) -> list[ShotRef]:
    """Concrete shots of the job: patterns expanded (sorted), names unique, output URLs filled in."""
    pairs: list[tuple[str, str, str | None]] = []
    for i, shot in enumerate(spec.shots):
        if shot.url is not None:
            pairs.append((shot.name or _shot_name(shot.url), shot.url, shot.output))
            continue
        assert shot.pattern is not None
        matches = _glob(shot.pattern, f"shots[{i}].pattern")
        if not matches:
            raise SpecError(f"shots[{i}].pattern", f"{shot.pattern} matches no files")
        pairs.extend((_shot_name(url), url, None) for url in matches)
    name_counts = Counter(name for name, _, _ in pairs)
    duplicates = sorted(n for n, count in name_counts.items() if count > 1)
    if duplicates:
        raise SpecError("shots", f"duplicate shot name(s) {duplicates}; give each shot a distinct 'name'")
    templated = [p for p in pairs if p[2] is None]
    if len(templated) > 1 and "{shot}" not in spec.output.url:
        raise SpecError("output.url", "needs a {shot} placeholder when the job has several shots")
    refs = [ShotRef(name, url, output or output_url_for(spec, name)) for name, url, output in pairs]
    output_counts = Counter(r.output_url for r in refs)
    clashes = sorted(o for o, count in output_counts.items() if count > 1)
    if clashes:
        raise SpecError("output.url", f"several shots would write {clashes[0]}")
    return refs


def output_url_for(spec: JobSpec, shot_name: str) -> str:
    return spec.output.url.replace("{shot}", shot_name).replace("{job_id}", spec.job_id)


def output_prefix_for(spec: JobSpec) -> str:
    """The fixed folder of ``output.url`` (everything before the first placeholder's folder)."""
    template = spec.output.url.replace("{job_id}", spec.job_id)
    head = template.split("{", 1)[0]
    return head.rsplit("/", 1)[0] if "/" in head else "."


def work_url_for(spec: JobSpec, shots: list[ShotRef]) -> str:
    """Where segments and the summary of the job go."""
    if spec.output.work_url is not None:
        return storage.join(spec.output.work_url.replace("{job_id}", spec.job_id))
    first = shots[0].output_url
    parent = first.rsplit("/", 1)[0] if "/" in first else "."
    return storage.join(parent, ".recast-work", spec.job_id)


def _glob(pattern: str, field: str) -> list[str]:
    try:
        if storage.is_local(pattern):
            import glob

            return sorted(glob.glob(storage.local_path(pattern)))
        fs, path = storage.filesystem(pattern)
        protocol = pattern.split("://", 1)[0]
        return sorted(f"{protocol}://{p}" for p in fs.glob(path))
    except SpecError:
        raise
    except Exception as exc:
        raise SpecError(field, f"cannot expand {pattern}: {exc}") from exc
