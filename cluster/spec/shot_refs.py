"""The concrete shots of a job: patterns expanded, names unique, output and work URLs filled in."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction

from cluster.spec.fixes import ShotFix
from cluster.spec.job import JobSpec
from cluster.spec.shot import ColourSpec, FrameRange, ShotSpec, overridden
from pipeline.errors import SpecError
from pipeline.faces.config import FaceConfig, SelectionConfig
from pipeline.plates.sequence import is_sequence_url
from pipeline.provenance.paths import render_url
from pipeline.store import storage


@dataclass(frozen=True)
class ShotSettings:
    """What a shot renders with: the job's settings with the shot's own overrides applied."""

    selection: SelectionConfig
    faces: FaceConfig
    colour: ColourSpec
    frames: FrameRange | None = None
    handles: int = 0
    fps: Fraction | None = None
    field: str = "shots"
    """The spec field of the shot (``shots[2]``), for errors about its settings."""
    fixes: tuple[ShotFix, ...] = ()
    """The shot's ``fixes:`` (:mod:`cluster.spec.fixes`)."""


@dataclass(frozen=True)
class ShotRef:
    """A concrete shot of a job after pattern expansion."""

    name: str
    url: str
    output_url: str
    settings: ShotSettings | None = field(default=None, compare=False)
    """None only for refs built by hand (tests): the job's settings apply."""
    output_field: str = field(default="output.url", compare=False)
    """The spec field that gives ``output_url`` (``output.url``, or the shot's own ``shots[i].output``)."""

    @property
    def is_sequence(self) -> bool:
        return is_sequence_url(self.url)


def shot_settings(spec: JobSpec, index: int, shot: ShotSpec) -> ShotSettings:
    """The settings of ``spec.shots[index]``: the job's, overridden by the shot's own keys."""
    return ShotSettings(
        selection=overridden(spec.selection, shot.selection),
        faces=overridden(spec.faces, shot.faces),
        colour=overridden(spec.colour, shot.colour),
        frames=shot.frames,
        handles=shot.handles,
        fps=shot.frame_rate(),
        field=f"shots[{index}]",
        fixes=shot.fixes,
    )


def settings_of(spec: JobSpec, ref: ShotRef) -> ShotSettings:
    """``ref``'s settings (the job's own for a ref without any)."""
    if ref.settings is not None:
        return ref.settings
    return ShotSettings(selection=spec.selection, faces=spec.faces, colour=spec.colour)


def url_shot_name(url: str) -> str:
    """The name a ``url`` shot without a ``name`` gets: its file's stem (a sequence's with ``.seq``)."""
    base = url.rstrip("/").rsplit("/", 1)[-1]
    if is_sequence_url(url):
        # sc010_plate.####.exr -> sc010_plate
        base = re.split(r"[#@]|%0?\d*d", base, maxsplit=1)[0].rstrip("._-") + ".seq"
    stem = base.rsplit(".", 1)[0] if "." in base else base
    return re.sub(r"[^A-Za-z0-9._-]", "_", stem) or "shot"


def expand_shots(spec: JobSpec) -> list[ShotRef]:
    """Concrete shots of the job: patterns expanded (sorted), names unique, output URLs filled in."""
    pairs: list[tuple[str, str, str | None, ShotSettings]] = []
    max_shots = spec.limits.max_shots
    for i, shot in enumerate(spec.shots):
        settings = shot_settings(spec, i, shot)
        if shot.is_override:
            raise SpecError(
                f"shots[{i}]", f"{shot.name} overrides an edit clip: expand the edit first (cluster.edit)"
            )
        if shot.url is not None:
            pairs.append((shot.name or url_shot_name(shot.url), shot.url, shot.output, settings))
        else:
            assert shot.pattern is not None
            field = f"shots[{i}].pattern"
            matches = _glob(shot.pattern, field, max_shots - len(pairs))
            if not matches:
                raise SpecError(field, f"{shot.pattern} matches no files")
            pairs.extend((url_shot_name(url), url, None, settings) for url in matches)
        if len(pairs) > max_shots:
            raise SpecError(
                field if shot.url is None else "shots",
                f"the job has more than {max_shots:,} shots (limits.max_shots); split it into several jobs",
            )
    name_counts = Counter(p[0] for p in pairs)
    duplicates = sorted(n for n, count in name_counts.items() if count > 1)
    if duplicates:
        raise SpecError("shots", f"duplicate shot name(s) {duplicates}; give each shot a distinct 'name'")
    templated = [p for p in pairs if p[2] is None]
    if len(templated) > 1 and "{shot}" not in spec.output.url:
        raise SpecError("output.url", "needs a {shot} placeholder when the job has several shots")
    refs = []
    for name, url, output, settings in pairs:
        field = f"{settings.field}.output" if output else "output.url"
        ref = ShotRef(name, url, output or output_url_for(spec, name, url), settings, field)
        if output:
            render_url(output, {}, field=field)  # a literal URL: no '..' segment, no placeholder
        _same_kind(ref, field)
        problem = spec.output.container_problem(ref.output_url)
        if problem:
            raise SpecError(field, f"{ref.output_url}: {problem}")
        refs.append(ref)
    first: dict[str, ShotRef] = {}
    for ref in refs:
        earlier = first.setdefault(ref.output_url, ref)
        if earlier is not ref:
            raise SpecError(
                ref.output_field,
                f"the outputs of shots {earlier.name} and {ref.name} are the same file {ref.output_url}; "
                "give each a place of its own",
            )
    return refs


def _same_kind(ref: ShotRef, field: str) -> None:
    """An image sequence is delivered as a sequence of its own format; a video as a video."""
    out_sequence = is_sequence_url(ref.output_url)
    if ref.is_sequence != out_sequence:
        kinds = ("an image sequence", "a video")
        source, output = kinds[0 if ref.is_sequence else 1], kinds[0 if out_sequence else 1]
        raise SpecError(
            field,
            f"shot {ref.name}: {ref.url} is {source} but its output {ref.output_url} is {output}; "
            "deliver sequences as sequences of the same format and videos as videos",
        )
    if out_sequence and _ext(ref.url) != _ext(ref.output_url):
        raise SpecError(
            field,
            f"shot {ref.name}: the output {ref.output_url} must have the source's format "
            f"(.{_ext(ref.url)}): plates are delivered in the format they came in",
        )


def _ext(url: str) -> str:
    ext = url.rsplit(".", 1)[-1].lower()
    return "tif" if ext == "tiff" else ext


def output_url_for(spec: JobSpec, shot_name: str, source_url: str = "") -> str:
    """``output.url`` filled in for one shot (``{ext}``: the source's own extension).

    Rendered by :func:`pipeline.provenance.paths.render_url`: a shot name or extension
    that is not a plain name, or a ``..`` in the template, is a SpecError naming ``output.url``.
    """
    values = {"shot": shot_name, "job_id": spec.job_id, "ext": source_url.rsplit(".", 1)[-1]}
    return render_url(spec.output.url, values, field="output.url")


def output_prefix_for(spec: JobSpec) -> str:
    """The fixed folder of ``output.url`` (everything before the first placeholder's folder)."""
    template = spec.output.url.replace("{job_id}", spec.job_id)
    head = template.split("{", 1)[0]
    return head.rsplit("/", 1)[0] if "/" in head else "."


def work_url_for(spec: JobSpec, shots: list[ShotRef]) -> str:
    """Where segments and the summary of the job go."""
    if spec.output.work_url is not None:
        template = spec.output.work_url.rstrip("/") or spec.output.work_url
        return storage.join(render_url(template, {"job_id": spec.job_id}, field="output.work_url"))
    first = shots[0].output_url
    parent = first.rsplit("/", 1)[0] if "/" in first else "."
    return storage.join(parent, ".recast-work", spec.job_id)


def _glob(pattern: str, field: str, room: int) -> list[str]:
    """The URLs ``pattern`` matches, sorted; a local glob stops after ``room + 1`` matches (one more than
    the job has room for is enough to refuse it).  An object store's glob lists what it lists."""
    try:
        if storage.is_local(pattern):
            import glob
            import itertools

            return sorted(itertools.islice(glob.iglob(storage.local_path(pattern)), max(0, room) + 1))
        fs, path = storage.filesystem(pattern)
        protocol = pattern.split("://", 1)[0]
        return sorted(f"{protocol}://{p}" for p in fs.glob(path))
    except SpecError:
        raise
    except Exception as exc:
        raise SpecError(field, f"cannot expand {pattern}: {exc}") from exc
