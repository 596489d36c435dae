"""Media bundled in an ``.otioz``: read with OpenTimelineIO's ``otioz`` adapter, extracted where
every actor can read it.

An ``.otioz`` is a zip of the timeline (``content.otio``) and its media under ``media/``
(:mod:`opentimelineio.adapters.file_bundle_utils`); its media references are relative URLs into
the zip (``media/M30.mp4``, a sequence's ``media/A001C003/A001C003.####.exr``).  The bundle is
fetched once (at most :data:`BUNDLE_MAX_BYTES`), hashed, its timeline read by the adapter, and
its media extracted to a private local folder, where the clips are resolved (listed, probed)
like any media.  :func:`cluster.edit.plan.with_edit_shots` then moves them to the job's work
area, ``<work_url>/edit-media/<bundle sha256[:12]>/media/...``, and :func:`publish_bundled` writes
them there, atomically and once: a file already there of the same size and sha256 (a resubmission,
another driver) is kept, not copied again.

Guards, all checked from the zip's directory before a byte is extracted: every member name is a
plain relative path (no absolute path, no ``..``, no backslash, no repeated name), at most
:data:`MAX_MEMBERS` members, none unpacking to more than :data:`MAX_RATIO` times its packed size
(a zip bomb), nor all of them together (many small bombs), the media together at most
:data:`BUNDLE_MAX_BYTES`, ``content.otio`` at most
:data:`cluster.edit.read.TIMELINE_MAX_BYTES` and within the bounds of any timeline
(:mod:`cluster.edit.bounds`, scanned before the adapter reads it, in a child process); a damaged member (bad CRC, cut short) or a
file that is no zip is a SpecError naming ``edit.url`` and the member or file.  A reference into
``media/`` that the zip does not hold is offline.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import weakref
import zipfile
import zlib
from dataclasses import dataclass, field

import opentimelineio as otio
from opentimelineio.adapters import file_bundle_utils

from cluster.edit.bounds import check_document
from cluster.edit.read import TIMELINE_MAX_BYTES, adapter_read, one_timeline
from cluster.spec.edit import EditSpec
from pipeline.errors import SpecError, StorageError
from pipeline.store import storage, urls
from pipeline.store.hashing import sha256_file, sha256_url

BUNDLE_MAX_BYTES = 16 << 30
"""Largest ``.otioz`` read, and the most its media may extract to, together (16 GiB)."""
MAX_MEMBERS = 200_000
"""Most files one ``.otioz`` may hold (a bundled plate is one file a frame)."""
MAX_RATIO = 100
"""Most a member may unpack to, per byte packed (beyond :data:`RATIO_ALLOWANCE`): film media are
compressed already (a movie, a ZIP-compressed EXR: about 1:1; an uncompressed 10-bit DPX: under 4:1);
1 GiB of zeros packs into 1 MiB (1000:1)."""
RATIO_ALLOWANCE = 1 << 20
"""Bytes a member may unpack to beyond :data:`MAX_RATIO` times its packed size (small text files and
``content.otio`` compress well)."""
MEDIA_FOLDER = "edit-media"
"""The work area's folder of extracted bundle media (one folder per bundle, by its sha256)."""
_DRIVE = re.compile(r"^[A-Za-z]:")
_DAMAGED = (zipfile.BadZipFile, zlib.error, EOFError, RuntimeError, NotImplementedError, OSError)
"""What extracting a member raises when its bytes are bad (CRC, cut short), it is encrypted or compressed
in a way zipfile cannot read, or its path clashes with another member's."""


@dataclass(frozen=True)
class Member:
    """A media file of the bundle: its name in the zip, size and sha256 (as extracted)."""

    name: str
    size: int
    sha256: str


class Bundle:
    """An ``.otioz``'s media extracted to a private local folder (removed with the object, or by
    :meth:`close`)."""

    def __init__(self, url: str, sha256: str, folder: str, members: dict[str, Member]) -> None:
        self.url = url
        self.sha256 = sha256
        self.folder = folder
        self.members = members
        self.local_root = urls.canonical(folder)
        self._folders = {name.rsplit("/", 1)[0] for name in members}
        self._cleanup = weakref.finalize(self, shutil.rmtree, folder, ignore_errors=True)

    @property
    def key(self) -> str:
        """The bundle's folder name in the work area."""
        return self.sha256[:12]

    def close(self) -> None:
        self._cleanup()

    def member_path(self, raw: str) -> str | None:
        """``raw`` (a media reference's URL) as a path inside the bundle, when it points into it:
        relative, and under ``media/`` or naming what the bundle holds; None otherwise."""
        if urls.scheme(raw) is not None or raw.startswith(("/", "\\")):
            return None
        path = raw.removeprefix("./")
        parts = path.split("/")
        if any(p in ("", ".", "..") for p in parts):
            return None
        if path.startswith(file_bundle_utils.BUNDLE_DIR_NAME + "/") or self.holds(path):
            return path
        return None

    def holds(self, path: str) -> bool:
        """Whether ``path`` is a media file of the bundle, or a sequence pattern in one of its folders."""
        return path in self.members or path.rsplit("/", 1)[0] in self._folders

    def local_url(self, path: str) -> str:
        """Where the extracted ``path`` (a member or a sequence pattern) is on this machine."""
        return f"{self.local_root}/{path}"

    def extracted(self, url: str) -> str | None:
        """The bundle path of ``url`` when it is one of this bundle's extracted files (or patterns)."""
        return url[len(self.local_root) + 1 :] if url.startswith(self.local_root + "/") else None

    def root_in(self, work_url: str) -> str:
        """Where the bundle's media go in the work area ``work_url``."""
        return storage.join(work_url, MEDIA_FOLDER, self.key)


@dataclass(frozen=True)
class BundledMedia:
    """What the cut uses of a bundle, and where it goes: (bundle path, URL in the work area)."""

    bundle: Bundle = field(compare=False)
    root: str
    """``<work_url>/edit-media/<sha256[:12]>``."""
    files: tuple[tuple[str, str], ...]


def read_bundle(edit: EditSpec) -> tuple[otio.schema.Timeline, Bundle]:
    """The timeline of the ``.otioz`` ``edit.url`` (read by OTIO's ``otioz`` adapter) and its media,
    extracted to a private local folder; SpecError naming ``edit.url`` and the file or member."""
    url, max_bytes = edit.url, BUNDLE_MAX_BYTES
    try:
        size = storage.size(url)
        if size > max_bytes:
            raise SpecError(
                "edit.url", f"{url} is {storage.describe_bytes(size)}: an .otioz is read up to "
                f"{storage.describe_bytes(max_bytes)} (reference large media by URL instead)",
            )  # fmt: skip
        with storage.fetched(url, ".otioz") as path:
            digest = sha256_file(path)
            infos = _members(url, path, max_bytes)
            _check_playlist(url, path, infos)
            timeline = one_timeline(adapter_read(path, "otioz", url), url)
            folder = tempfile.mkdtemp(prefix="recast-otioz-")
            try:
                members = _extract(url, path, [i for i in infos.values() if _is_media(i)], folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
    except StorageError as exc:
        raise SpecError("edit.url", f"cannot read the timeline: {exc}") from None
    except OSError as exc:  # the local copy (a FIFO refused, a disk full...)
        raise SpecError("edit.url", f"cannot read the timeline {url}: {exc}") from None
    return timeline, Bundle(url, digest, folder, members)


def _check_playlist(url: str, path: str, infos: dict[str, zipfile.ZipInfo]) -> None:
    """The bundle's ``content.otio``, at most :data:`TIMELINE_MAX_BYTES` unpacked, scanned by
    :func:`cluster.edit.bounds.check_document` before the adapter reads it."""
    playlist = file_bundle_utils.BUNDLE_PLAYLIST_PATH
    info = infos.get(playlist)
    if info is None:
        raise SpecError("edit.url", f"{url} holds no {playlist}: not an .otioz bundle")
    if info.file_size > TIMELINE_MAX_BYTES:
        raise SpecError(
            "edit.url", f"{url}: its {playlist} is larger than {storage.describe_bytes(TIMELINE_MAX_BYTES)}"
        )
    try:
        with zipfile.ZipFile(path) as zf, zf.open(info) as member:
            raw = member.read(TIMELINE_MAX_BYTES + 1)
    except _DAMAGED as exc:
        raise SpecError(
            "edit.url", f"{url}: member {playlist!r} is damaged or cannot be read: {exc}"
        ) from None
    check_document(raw, "otio_json", field="edit.url", url=f"{url} ({playlist})")


def _is_media(info: zipfile.ZipInfo) -> bool:
    return info.filename.startswith(file_bundle_utils.BUNDLE_DIR_NAME + "/") and not info.is_dir()


def member_problem(name: str) -> str | None:
    """Why a zip member name could escape the folder it is extracted to (None: it cannot)."""
    if "\\" in name or "\x00" in name:
        return "has a backslash or a NUL in its name"
    if name.startswith("/") or _DRIVE.match(name):
        return "is an absolute path"
    parts = name.removesuffix("/").split("/")
    if ".." in parts:
        return "escapes the bundle ('..')"
    if any(p in ("", ".") for p in parts):
        return "is not a plain relative path"
    return None


def _members(url: str, path: str, max_bytes: int) -> dict[str, zipfile.ZipInfo]:
    """The bundle's members by name, every name checked, their media's total size bounded."""
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
        raise SpecError("edit.url", f"{url} is not a readable .otioz (a zip file): {exc}") from None
    if len(infos) > MAX_MEMBERS:
        raise SpecError(
            "edit.url", f"{url} holds {len(infos):,} files, more than the {MAX_MEMBERS:,} an .otioz may hold"
        )
    out: dict[str, zipfile.ZipInfo] = {}
    for info in infos:
        problem = member_problem(info.filename)
        if problem is None and info.filename in out:
            problem = "appears twice"
        if (
            problem is None
            and _is_media(info)
            and info.file_size > MAX_RATIO * info.compress_size + RATIO_ALLOWANCE
        ):
            problem = (
                f"unpacks to {storage.describe_bytes(info.file_size)} from "
                f"{storage.describe_bytes(info.compress_size)} (more than {MAX_RATIO}:1: a zip bomb, "
                "not media)"
            )
        if problem is not None:
            raise SpecError("edit.url", f"{url}: member {info.filename!r} {problem}; the bundle is refused")
        out[info.filename] = info
    media = [i for i in out.values() if _is_media(i)]
    total = sum(i.file_size for i in media)
    packed = sum(i.compress_size for i in media)
    if total > MAX_RATIO * packed + RATIO_ALLOWANCE:  # many small bombs, each under its own allowance
        raise SpecError(
            "edit.url",
            f"{url}: its {len(media):,} media files unpack to {storage.describe_bytes(total)} from "
            f"{storage.describe_bytes(packed)} (more than {MAX_RATIO}:1 together: a zip bomb, not media); "
            "the bundle is refused",
        )
    if total > max_bytes:
        raise SpecError(
            "edit.url",
            f"{url}: its media extract to {storage.describe_bytes(total)}, more than "
            f"{storage.describe_bytes(max_bytes)}",
        )
    return out


def _extract(url: str, path: str, infos: list[zipfile.ZipInfo], folder: str) -> dict[str, Member]:
    """Each media member written under ``folder`` and hashed on the way."""
    members: dict[str, Member] = {}
    with zipfile.ZipFile(path) as zf:
        for info in infos:
            dest = os.path.join(folder, *info.filename.split("/"))
            digest, written = hashlib.sha256(), 0
            try:
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                with zf.open(info) as src, open(dest, "xb") as out:
                    while block := src.read(1 << 20):
                        digest.update(block)
                        out.write(block)
                        written += len(block)
            except _DAMAGED as exc:
                raise SpecError(
                    "edit.url", f"{url}: member {info.filename!r} is damaged or cannot be extracted: {exc}"
                ) from None
            if written != info.file_size:
                raise SpecError(
                    "edit.url", f"{url}: member {info.filename!r} holds {written} bytes, not {info.file_size}"
                )
            members[info.filename] = Member(info.filename, written, digest.hexdigest())
    return members


def publish_bundled(media: BundledMedia) -> tuple[int, int]:
    """Write the bundle's used media to the work area (atomically, each only if not there already);
    the extraction is removed afterwards.  Returns (files written, files found there and kept)."""
    written = kept = 0
    try:
        for path, dest in media.files:
            member = media.bundle.members[path]
            if _publish(os.path.join(media.bundle.folder, *path.split("/")), dest, member):
                written += 1
            else:
                kept += 1
    finally:
        media.bundle.close()
    return written, kept


def _holds(url: str, member: Member) -> bool:
    """Whether ``url`` already holds ``member`` (same size, then same sha256)."""
    return storage.size(url) == member.size and sha256_url(url) == member.sha256


def _publish(local: str, dest: str, member: Member) -> bool:
    """``local`` to ``dest`` unless ``dest`` holds it already; a different file there is replaced
    (in one step).  True when written."""
    if storage.exists(dest):
        if _holds(dest, member):
            return False
        storage.publish_file(local, dest, overwrite=True)
        return True
    try:
        storage.publish_file(local, dest, overwrite=False)
    except StorageError as exc:
        if exc.reason != storage.ALREADY_EXISTS:
            raise
        if _holds(dest, member):  # another driver of the job published it meanwhile
            return False
        storage.publish_file(local, dest, overwrite=True)
    return True
