"""Signed manifest records: an HMAC-SHA256 per record when the driver has ``RECAST_MANIFEST_KEY``.

Whoever can write the work area can otherwise write records that a resumed job
trusts (a segment's URL and sha256, a published output).  With the key set in
the driver's environment, every record the driver writes carries ``mac``: the
HMAC-SHA256, keyed with it, of the record's name in the manifest (``<shot>/render-00003.json``,
so a record cannot be moved to another chunk) and its canonical content (sorted-key
compact JSON, ``mac`` left out).  On reading, a record without a valid ``mac`` is
not trusted: it is treated as absent and its work redone.  Only the driver writes
records, so the key never leaves the driver; it is never written, logged or reported.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from typing import Any

from pipeline.errors import SpecError

MANIFEST_KEY_ENV = "RECAST_MANIFEST_KEY"
MIN_KEY_BYTES = 16
MAC_FIELD = "mac"


def manifest_key(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The key of ``RECAST_MANIFEST_KEY`` (None when unset); too short a key is refused, never used."""
    value = (os.environ if environ is None else environ).get(MANIFEST_KEY_ENV)
    if value is None:
        return None
    key = value.encode()
    if len(key) < MIN_KEY_BYTES:
        raise SpecError(
            MANIFEST_KEY_ENV,
            f"is set but {len(key)} bytes long; use at least {MIN_KEY_BYTES} random bytes (or unset it)",
        )
    return key


def _message(name: str, record: Mapping[str, Any]) -> bytes:
    body = {k: v for k, v in record.items() if k != MAC_FIELD}
    return name.encode() + b"\n" + json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def sign(key: bytes, name: str, record: Mapping[str, Any]) -> str:
    """The ``mac`` of ``record`` stored as ``name`` (a JSON-ready record: as it will read back)."""
    return hmac.new(key, _message(name, record), hashlib.sha256).hexdigest()


def signed_by(key: bytes, name: str, record: Mapping[str, Any]) -> bool:
    """True when ``record`` (as read back) carries the ``mac`` of ``key`` for ``name``."""
    mac = record.get(MAC_FIELD)
    return isinstance(mac, str) and hmac.compare_digest(mac, sign(key, name, record))
