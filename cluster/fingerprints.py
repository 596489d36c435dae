"""What identifies a shot's source and its published output, cheaply (stats and listings, no reads).

A video is one file: its size and stamp (mtime, ETag).  An image sequence is its
frame files: their numbers, sizes and stamps, from one listing of the folder.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from pipeline import storage
from pipeline.errors import StorageError
from pipeline.plates.sequence import is_sequence_url, list_frames, parse_sequence_url
from pipeline.probe import VideoInfo


def stat_fingerprint(url: str) -> dict[str, Any]:
    """Size plus modification time (local) or ETag/LastModified (object stores) of ``url``.

    Cheap (one stat / HEAD); changes whenever the object is rewritten.
    """
    try:
        fs, path = storage.filesystem(url)
        info = fs.info(path)
    except StorageError:
        raise
    except FileNotFoundError:
        raise StorageError(url, "not found") from None
    except PermissionError:
        raise StorageError(url, "permission denied") from None
    except Exception as exc:
        raise StorageError(url, f"{type(exc).__name__}: {exc}") from exc
    out: dict[str, Any] = {"size": int(info.get("size") or 0)}
    for key in ("ETag", "etag", "md5Hash", "generation", "mtime", "LastModified", "updated"):
        if info.get(key) is not None:
            out[key.lower()] = str(info[key])
    return out


def _listing_digest(rows: list[list[Any]]) -> str:
    return hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()


def input_fingerprint(url: str, info: VideoInfo) -> dict[str, Any]:
    """What identifies a shot's source: URL, size, mtime/ETag, and a digest of every frame's timestamp.

    For an image sequence: every frame's number, size and stamp from the probe's listing.
    """
    pts = np.asarray(info.pts, dtype=np.int64)
    if info.sequence is not None:
        seq = info.sequence
        stat: dict[str, Any] = {
            "files": _listing_digest([list(r) for r in zip(seq.numbers, seq.sizes, seq.stamps, strict=True)]),
            "colour": [seq.colour.config, seq.colour.plate_space, seq.colour.model_space],
        }
    else:
        stat = stat_fingerprint(url)
    return {
        "url": url,
        **stat,
        "frames": info.frame_count,
        "pts_sha256": hashlib.sha256(pts.tobytes()).hexdigest(),
        "codec": info.codec,
        "size_px": [info.width, info.height],
    }


def output_exists(url: str) -> bool:
    """Whether the output is there: the file, or any frame of the sequence."""
    if is_sequence_url(url):
        return bool(list_frames(parse_sequence_url(url)))
    return storage.exists(url)


def output_fingerprint(url: str) -> dict[str, Any]:
    """What identifies a published output now: the file's size and stamp, or every frame's (one
    listing), so a frame rewritten or removed since publishing is noticed."""
    if not is_sequence_url(url):
        return stat_fingerprint(url)
    frames = list_frames(parse_sequence_url(url))
    return {"frames": len(frames), "listing": _listing_digest([[f.number, f.size, f.stamp] for f in frames])}
