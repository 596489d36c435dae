"""Append-only audit log in the output store.

Object stores cannot append to an object atomically, so every record is a new
JSON object under ``<prefix>/audit/`` named ``<UTC time>-<uuid>.json``; names
sort in time order and the reader lists them in that order.  Writing refuses to
replace an existing object, and nothing here deletes or rewrites one.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import uuid
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from pipeline.configbase import Frozen
from pipeline.errors import StorageError
from pipeline.limits import WORK_RECORD_MAX_BYTES
from pipeline.store import storage
from pipeline.store.hashing import sha256_url
from pipeline.store.redact import redact

log = logging.getLogger(__name__)

AUDIT_DIR = "audit"


class FileDigest(Frozen):
    """A file the job read or wrote, with its content hash."""

    url: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class AuditRecord(Frozen):
    """What one job did, who asked for it and under which consent."""

    job_id: str
    submitter: str
    time_utc: str
    """ISO 8601 UTC time the record was made."""
    spec_sha256: str
    identities: dict[str, str] = Field(default_factory=dict)
    """Identity name -> consent reference."""
    model_pack_sha256: str = ""
    adapters: dict[str, str] = Field(default_factory=dict)
    """Adapter name -> sha256."""
    inputs: tuple[FileDigest, ...] = ()
    outputs: tuple[FileDigest, ...] = ()
    ray_submission_id: str | None = None
    event: str = "job.completed"
    extra: dict[str, Any] = Field(default_factory=dict)


def submitter_from_env(
    env: Mapping[str, str] | None = None, job_metadata: Mapping[str, str] | None = None
) -> str:
    """Who submitted the job.

    Ray job metadata (``ray job submit --metadata-json '{"submitter": ...}'``,
    read by the driver and passed here) wins, then ``RECAST_SUBMITTER``, then the
    OS user (``USER``/``LOGNAME``).
    """
    env = os.environ if env is None else env
    for key in ("submitter", "user"):
        if job_metadata and job_metadata.get(key):
            return str(job_metadata[key])
    for key in ("RECAST_SUBMITTER", "USER", "LOGNAME"):
        if env.get(key):
            return env[key]
    return "unknown"


def spec_sha256(spec: Any) -> str:
    """sha256 of a job spec in canonical JSON (sorted keys), so equal specs hash equal."""
    if hasattr(spec, "model_dump"):
        spec = spec.model_dump(mode="json")
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def file_digest(url: str) -> FileDigest:
    """A FileDigest for ``url`` (reads it once)."""
    return FileDigest(url=url, sha256=sha256_url(url))


def make_record(
    *,
    job_id: str,
    spec: Any,
    identities: Mapping[str, str],
    model_pack_sha256: str,
    adapters: Mapping[str, str] | None = None,
    inputs: Mapping[str, str] | None = None,
    outputs: Mapping[str, str] | None = None,
    job_metadata: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    event: str = "job.completed",
    extra: Mapping[str, Any] | None = None,
    now: dt.datetime | None = None,
) -> AuditRecord:
    """Build a record; ``inputs``/``outputs`` map URL -> sha256 (see ``file_digest``)."""
    env = os.environ if env is None else env
    now = now or dt.datetime.now(dt.UTC)
    return AuditRecord(
        job_id=job_id,
        submitter=submitter_from_env(env, job_metadata),
        time_utc=now.astimezone(dt.UTC).isoformat(timespec="microseconds"),
        spec_sha256=spec_sha256(spec),
        identities=dict(identities),
        model_pack_sha256=model_pack_sha256,
        adapters=dict(adapters or {}),
        inputs=tuple(FileDigest(url=u, sha256=h) for u, h in (inputs or {}).items()),
        outputs=tuple(FileDigest(url=u, sha256=h) for u, h in (outputs or {}).items()),
        ray_submission_id=(job_metadata or {}).get("job_submission_id")
        or env.get("RAY_JOB_SUBMISSION_ID")
        or None,
        event=event,
        extra=dict(extra or {}),
    )


class AuditLog:
    """The audit log under ``<output_prefix>/audit/``."""

    def __init__(self, output_prefix: str) -> None:
        self.url = storage.join(output_prefix, AUDIT_DIR)

    def append(self, record: AuditRecord) -> str:
        """Write ``record`` as a new object and return its URL; never replaces one."""
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S.%fZ")
        url = storage.join(self.url, f"{stamp}-{uuid.uuid4().hex}.json")
        # Credentials passed by mistake in `extra` or URLs must not reach the log.
        body = json.dumps(redact(record.model_dump(mode="json")), sort_keys=True, indent=1).encode()
        _write_new(url, body)
        log.info("audit record for job %s written to %s", record.job_id, url)
        return url

    def urls(self) -> list[str]:
        """URLs of every record, oldest first."""
        return sorted(u for u in storage.listdir(self.url) if u.endswith(".json"))

    def records(self) -> list[AuditRecord]:
        """Every record, oldest first."""
        out = []
        for url in self.urls():
            try:
                out.append(
                    AuditRecord.model_validate_json(storage.read_bytes(url, max_bytes=WORK_RECORD_MAX_BYTES))
                )
            except ValueError as exc:
                raise StorageError(url, f"not a valid audit record: {exc}") from exc
        return out


def _write_new(url: str, data: bytes) -> None:
    """Create ``url`` with ``data``; StorageError if it already exists."""
    if storage.is_local(url):
        path = storage.local_path(url)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        tmp = f"{path}.tmp-{uuid.uuid4().hex[:12]}"
        with open(tmp, "wb") as fh:
            fh.write(data)
        try:
            # link() refuses an existing destination atomically; readers never see a partial record.
            os.link(tmp, path)
        except FileExistsError:
            raise StorageError(url, "audit record already exists; records are never rewritten") from None
        finally:
            os.remove(tmp)
        return
    # Object stores: names carry a fresh uuid, so a collision means a bug; check anyway.
    if storage.exists(url):
        raise StorageError(url, "audit record already exists; records are never rewritten")
    storage.write_bytes(url, data)
