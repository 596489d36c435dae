"""Where a job writes, checked against itself and against what it reads, before anything is written.

Every destination (each shot's output, its passes, the work area) is compared as a
normalised location, not as the string the spec spelled: ``//`` and ``.`` segments
collapse, local paths are made absolute with their symlinks resolved, and an image
sequence is its folder, head and tail whatever its padding is spelt (``####``,
``%04d``).  Refused, whatever ``output.if_exists`` says (SpecError naming both):

* two destinations that are the same file or sequence;
* a destination that is one of the job's inputs (:func:`inputs`): a shot's source (or, for a
  sequence destination, one of a source sequence's frames, followed through symlinks), an
  identity picture or adapter, the edit's timeline, an OCIO config, the job's own spec and
  ``--fixes`` files (:class:`SpecFiles`), the studio policy, the signer's key and certificate
  chain, the model pack's manifest and model files;
* a destination (or the work area) inside the model pack's folder (:func:`input_folders`);
* a destination or an input among the work area's own files (:data:`WORK_FOLDERS`,
  :data:`WORK_FILES`: segments and records are written and deleted there).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cluster.spec.job import JobSpec
from cluster.spec.review import contact_url
from cluster.spec.shot_refs import ShotRef
from pipeline.errors import SpecError
from pipeline.plates.sequence import is_sequence_url, list_frames, parse_sequence_url
from pipeline.provenance.config import EMBEDDED_SUFFIXES
from pipeline.store import storage, urls

if TYPE_CHECKING:
    from pipeline.models.pack import ManifestFile

WORK_FOLDERS = ("segments", "manifest")
"""What the driver writes, and deletes, under the work area (:mod:`cluster.schedule.shot_run`, :mod:`cluster.state.manifest`)."""
WORK_FILES = ("summary.json", "report.html", "report.json")


def normalise(url: str) -> str:
    """``url`` as one spelling per place (:func:`pipeline.store.urls.canonical`): local paths absolute
    with symlinks resolved, whatever the spelling (``file://``, ``local://``, ``./``, ``//``);
    other URLs with their scheme folded and empty and ``.`` segments dropped
    (``S3A://b/out//./x`` -> ``s3://b/out/x``)."""
    canonical = urls.canonical(url)
    return os.path.realpath(canonical) if urls.is_local(canonical) else canonical


@dataclass(frozen=True, kw_only=True)
class SpecFiles:
    """The files of the driver's command line (:mod:`jobs.render`; a spec built in code has none): the
    spec and the ``--fixes`` files it was read from, which the job never writes over, and the local
    file ``--summary-json`` writes the summary to, which is checked as any destination is."""

    spec: str | None = None
    fixes: tuple[str, ...] = ()
    summary_json: str | None = None


@dataclass(frozen=True)
class Place:
    """A normalised location: one file (``tail`` None) or an image sequence ``folder/head<number>tail``."""

    folder: str
    name: str
    """The file's name, or the sequence's head."""
    tail: str | None
    url: str
    """As the spec spelt it, for messages."""
    what: str
    """What it is, for messages: ``shot sc01's output``, ``identity hero's picture``..."""

    @classmethod
    def of(cls, url: str, what: str) -> Place:
        if is_sequence_url(url):
            pattern = parse_sequence_url(url)
            return cls(normalise(pattern.directory), pattern.head, pattern.tail, url, what)
        folder, _, name = normalise(url).rpartition("/")
        return cls(folder, name, None, url, what)

    @property
    def path(self) -> str:
        """The normalised file, or the sequence's frames as ``folder/head<frame>tail``."""
        return f"{self.folder}/{self.name}" + ("" if self.tail is None else f"<frame>{self.tail}")

    def same(self, other: Place) -> bool:
        """Whether a file of one is a file of the other."""
        if self.folder != other.folder:
            return False
        if self.tail is None and other.tail is None:
            return self.name == other.name
        if self.tail is not None and other.tail is not None:
            return (self.name, self.tail) == (other.name, other.tail)
        seq, single = (self, other) if self.tail is not None else (other, self)
        assert seq.tail is not None
        return re.fullmatch(rf"{re.escape(seq.name)}-?\d+{re.escape(seq.tail)}", single.name) is not None

    def in_work_area(self, work: str) -> bool:
        """Whether this is (or is inside) one of the work area ``work``'s own files and folders."""
        if self.path == work or any(self.same(Place(work, name, None, "", "")) for name in WORK_FILES):
            return True
        folders = [f"{work}/{name}" for name in WORK_FOLDERS]
        return any(self.path == f or self.folder == f or self.folder.startswith(f + "/") for f in folders)


def pass_urls_of(spec: JobSpec, ref: ShotRef) -> dict[str, str]:
    """Where each of ``output.passes`` of the shot goes (:func:`pipeline.passes.naming.pass_url`)."""
    from pipeline.passes.naming import pass_url

    out = spec.output
    return {
        name: pass_url(ref.output_url, name, out.pass_url, shot=ref.name, job_id=spec.job_id)
        for name in out.passes
    }


def review_urls_of(spec: JobSpec, ref: ShotRef) -> tuple[str, str] | None:
    """The shot's review movie and contact sheet (``output.review``; None: no review)."""
    review = spec.output.review
    if review is None:
        return None
    movie = review.movie_url(ref.name, spec.job_id)
    return movie, contact_url(movie)


def _published(spec: JobSpec, shots: list[ShotRef]) -> Iterator[tuple[str, str, str]]:
    """(url, spec field, what it is) of every file the job publishes: each output, its passes and
    its review media."""
    pass_field = "output.pass_url" if spec.output.pass_url is not None else "output.passes"
    for ref in shots:
        yield ref.output_url, ref.output_field, f"shot {ref.name}'s output"
        for name, url in pass_urls_of(spec, ref).items():
            yield url, pass_field, f"shot {ref.name}'s {name} pass"
        review = review_urls_of(spec, ref)
        if review is not None:
            yield review[0], "output.review.url", f"shot {ref.name}'s review movie"
            yield review[1], "output.review.url", f"shot {ref.name}'s contact sheet"
        if spec.marking.content_credentials and not ref.output_url.lower().endswith(EMBEDDED_SUFFIXES):
            from pipeline.provenance.sidecar import sidecar_url

            yield sidecar_url(ref.output_url), ref.output_field, f"shot {ref.name}'s Content Credentials"


def written_urls(spec: JobSpec, shots: list[ShotRef], work_url: str) -> list[tuple[str, str]]:
    """Every place the job writes, each with the spec field that names it: each shot's output and
    passes, the work area and the cut written back (``output.timeline_url``).  The studio policy
    authorises exactly these (and the audit folder, :func:`cluster.checks.trust.authorise`);
    :func:`check_names` checks them before Ray."""
    out = [(url, field) for url, field, _ in _published(spec, shots)]
    out.append((work_url, "output.work_url" if spec.output.work_url is not None else "output.url"))
    for url, field in _timelines(spec):
        out.append((url, field))
    return out


def _timelines(spec: JobSpec) -> list[tuple[str, str]]:
    """The timelines the job writes once its shots are published, each with its spec field."""
    out = spec.output
    named = [
        (out.timeline_url, "output.timeline_url"),
        (out.review_timeline_url, "output.review_timeline_url"),
    ]
    return [(url, field) for url, field in named if url is not None]


def destinations(spec: JobSpec, shots: list[ShotRef]) -> list[tuple[Place, str]]:
    """Every file the job publishes (outputs, passes, the cut written back), each with the spec field
    that names it."""
    out = [(Place.of(url, what), field) for url, field, what in _published(spec, shots)]
    for url, field in _timelines(spec):
        what = "the cut written back" if field == "output.timeline_url" else "the review playlist"
        out.append((Place.of(url, what), field))
    return out


def inputs(
    spec: JobSpec,
    shots: list[ShotRef],
    *,
    read_from: SpecFiles | None = None,
    pack_manifest: ManifestFile | None = None,
) -> list[Place]:
    """Every file the job reads that a write could destroy: sources (and, for a local source
    sequence, the frames its symlinks point at), identity pictures and adapters, the edit's timeline,
    OCIO configs, the files the spec was read from (``read_from``), the studio policy, the signer's
    key and chain, and the model pack's manifest and model files (those ``pack_manifest`` names)."""
    out = []
    for ref in shots:
        out.append(Place.of(ref.url, f"shot {ref.name}'s source"))
        if ref.is_sequence and storage.is_local(ref.url):
            for frame in list_frames(parse_sequence_url(ref.url)):
                if os.path.islink(storage.local_path(frame.url)):
                    out.append(Place.of(frame.url, f"shot {ref.name}'s source frame {frame.number}"))
        if ref.settings is not None and ref.settings.colour.config != spec.colour.config:
            out.extend(_file(ref.settings.colour.config, f"shot {ref.name}'s OCIO config"))
    out.extend(_file(spec.colour.config, "the OCIO config (colour.config)"))
    if spec.edit is not None:
        out.append(Place.of(spec.edit.url, "the edit's timeline"))
    for name, ident in spec.identities.items():
        out.extend(Place.of(url, f"identity {name}'s picture") for url in ident.images)
        if ident.adapter is not None:
            out.append(Place.of(ident.adapter.url, f"identity {name}'s adapter"))
    read_from = read_from or SpecFiles()
    if read_from.spec is not None:
        out.extend(_file(read_from.spec, "the job's spec"))
    for path in read_from.fixes:
        out.extend(_file(path, "the --fixes file"))
    out.extend(_trusted(spec))
    if pack_manifest is not None:
        out.extend(_file(pack_manifest.url, "the model pack's manifest"))
        for url in pack_manifest.model_urls(spec.models.pack):
            out.extend(_file(url, "a model file of the model pack"))
    return out


def _trusted(spec: JobSpec) -> list[Place]:
    """The studio policy (the cluster's ``RECAST_POLICY_URL`` and the spec's ``provenance.policy_url``)
    and the signer's key and certificate chain (``provenance.signer``)."""
    from cluster.checks.trust import POLICY_ENV, job_policy_url

    prov = spec.provenance
    out = []
    cluster_policy = job_policy_url(spec)
    if prov is not None and prov.policy_url is not None:
        out.extend(_file(prov.policy_url, "the studio policy (provenance.policy_url)"))
    if cluster_policy is not None and (prov is None or prov.policy_url != cluster_policy):
        out.extend(_file(cluster_policy, f"the studio policy ({POLICY_ENV})"))
    if prov is not None and prov.signer is not None:
        key, chain = prov.signer.private_key_url, prov.signer.certificate_chain_url
        out.extend(_file(key, "the signer's private key (provenance.signer.private_key_url)"))
        out.extend(_file(chain, "the signer's certificate chain (provenance.signer.certificate_chain_url)"))
    return out


def _file(url: str, what: str) -> list[Place]:
    """``url`` as one file (whatever characters its name has); none for a built-in ``ocio://`` config."""
    if url.startswith("ocio://"):
        return []
    folder, _, name = normalise(url).rpartition("/")
    return [Place(folder, name, None, url, what)]


def input_folders(spec: JobSpec) -> list[tuple[str, str, str]]:
    """(normalised folder, as the spec spelt it, what it is) of every folder the job reads whole: the
    model pack's (``models.pack``; none for the embedded ``builtin:`` pack)."""
    pack = spec.models.pack
    if pack.startswith("builtin:"):
        return []
    return [(normalise(pack.rstrip("/")), pack, "the model pack's folder (models.pack)")]


class _Places:
    """Places by key, so a job of thousands of shots is checked in one pass: a file by
    (folder, name), a sequence by (folder, head, tail), and a file also by every sequence
    (folder, head, tail) whose frame it could be."""

    def __init__(self) -> None:
        self._files: dict[tuple[str, str], tuple[Place, str]] = {}
        self._sequences: dict[tuple[str, str, str], tuple[Place, str]] = {}
        self._frames: dict[tuple[str, str, str], tuple[Place, str]] = {}

    def find(self, place: Place) -> tuple[Place, str] | None:
        """A place added earlier that shares a file with ``place``, with its field."""
        if place.tail is not None:
            key = (place.folder, place.name, place.tail)
            return self._sequences.get(key) or self._frames.get(key)
        for head, tail in _frame_splits(place.name):
            hit = self._sequences.get((place.folder, head, tail))
            if hit is not None:
                return hit
        return self._files.get((place.folder, place.name))

    def add(self, place: Place, field: str) -> None:
        if place.tail is not None:
            self._sequences.setdefault((place.folder, place.name, place.tail), (place, field))
            return
        self._files.setdefault((place.folder, place.name), (place, field))
        for head, tail in _frame_splits(place.name):
            self._frames.setdefault((place.folder, head, tail), (place, field))


def _frame_splits(name: str) -> list[tuple[str, str]]:
    """Every (head, tail) such that ``name`` is head + a frame number + tail."""
    out = []
    for run in re.finditer(r"\d+", name):
        for start in range(run.start(), run.end()):
            out.append((name[:start], name[run.end() :]))
            if start == run.start() and name[:start].endswith("-"):
                out.append((name[: start - 1], name[run.end() :]))  # a negative frame number
    return out


def check_destinations(
    spec: JobSpec,
    shots: list[ShotRef],
    work_url: str,
    *,
    read_from: SpecFiles | None = None,
    pack_manifest: ManifestFile | None = None,
) -> None:
    """Refuse a job whose writes would collide, replace one of its inputs (:func:`inputs`: with the
    files it was ``read_from`` and the model files ``pack_manifest`` names), land in a folder it reads
    whole (:func:`input_folders`) or in its work area, or whose file names the file system or store
    cannot hold (:func:`check_names`)."""
    from cluster.checks.dest_names import check_names

    check_names(written_urls(spec, shots, work_url), work_url)
    dests = destinations(spec, shots)
    if read_from is not None and read_from.summary_json:
        # Written with open() once the job ends: a plain local path, whatever it looks like.
        local = os.path.abspath(read_from.summary_json)
        dests.append((Place.of(local, "the summary (--summary-json)"), "--summary-json"))
    written = _Places()
    for dest, field in dests:
        hit = written.find(dest)
        if hit is not None:
            earlier = hit[0]
            raise SpecError(
                field,
                f"{dest.what} {dest.url} and {earlier.what} {earlier.url} are the same file "
                f"({earlier.path}); give each a place of its own",
            )
        written.add(dest, field)
    reads = inputs(spec, shots, read_from=read_from, pack_manifest=pack_manifest)
    for source in reads:
        hit = written.find(source)
        if hit is not None:
            dest, field = hit
            raise SpecError(
                field,
                f"{dest.what} {dest.url} would replace {source.what} {source.url} ({source.path}); "
                "an output never replaces one of the job's inputs, whatever output.if_exists says",
            )
    work = normalise(work_url)
    work_field = "output.work_url" if spec.output.work_url is not None else "output.url"
    for folder, url, what in input_folders(spec):
        inside = [(d, f) for d, f in dests if d.folder == folder or d.folder.startswith(folder + "/")]
        if work == folder or work.startswith(folder + "/"):
            inside.append((Place(work, "", None, work_url, "the work area"), work_field))
        if inside:
            dest, field = inside[0]
            raise SpecError(
                field,
                f"{dest.what} {dest.url} would be written inside {what} {url} ({folder}), which the job "
                "reads; write elsewhere, whatever output.if_exists says",
            )
    for place in [*(d for d, _ in dests), *reads]:
        if place.in_work_area(work):
            raise SpecError(
                "output.work_url",
                f"{place.what} {place.url} is one of the work area's own files ({work_url}: "
                f"{', '.join([*WORK_FOLDERS, *WORK_FILES])}), which the job writes and deletes; "
                "give the work area a folder of its own",
            )
