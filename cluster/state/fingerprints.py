"""What identifies a shot's source and its published output, cheaply.

A video is one file: its size and stamp (mtime; on object stores ETag and
VersionId, which change whenever the object is rewritten).  An image sequence is
its frame files: their numbers, sizes and stamps, from one listing of the folder.

A local file's mtime survives ``cp -p``, so a local source also carries a digest
of its content (``resume.fingerprint``): ``sampled`` (the default) hashes a
bounded sample, ``full`` every byte (see :func:`content_sha256`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import numpy as np

from pipeline.errors import StorageError
from pipeline.plates.sequence import is_sequence_url, list_frames, parse_sequence_url
from pipeline.store import storage
from pipeline.store.hashing import sha256_url
from pipeline.video.probe import VideoInfo

FingerprintMode = Literal["sampled", "full"]
SAMPLE_BLOCK_BYTES = 1 << 20
SAMPLE_MAX_BLOCKS = 16
"""A sampled video hash reads at most this many 1 MiB blocks (16 MiB), whatever the file's size."""
FRAME_SAMPLE_BYTES = 64 << 10
"""A sampled frame hash reads the first and the last 64 KiB of each frame (the whole frame if smaller)."""


def stat_fingerprint(url: str) -> dict[str, Any]:
    """Size plus modification time (local) or ETag/LastModified (object stores) of ``url``.

    Cheap (one stat / HEAD); changes whenever the object is rewritten.
    """
    try:
        fs, path = storage.filesystem(url)
        if not storage.is_local(url):
            fs.invalidate_cache(path)  # a listing cached earlier in this process would give old stamps
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
    for key in ("ETag", "etag", "VersionId", "md5Hash", "generation", "mtime", "LastModified", "updated"):
        if info.get(key) is not None:
            out[key.lower()] = str(info[key])
    return out


def _listing_digest(rows: list[list[Any]]) -> str:
    return hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()


def input_fingerprint(url: str, info: VideoInfo, mode: FingerprintMode = "sampled") -> dict[str, Any]:
    """What identifies a shot's source: URL, size, mtime/ETag/VersionId, a digest of every frame's
    timestamp, and for local files (or with ``mode="full"``) a digest of the content.

    For an image sequence: every frame's number, size and stamp from the probe's listing, and
    for local frames a digest of each frame's content.
    """
    pts = np.asarray(info.pts, dtype=np.int64)
    if info.sequence is not None:
        seq = info.sequence
        stat: dict[str, Any] = {
            "files": _listing_digest([list(r) for r in zip(seq.numbers, seq.sizes, seq.stamps, strict=True)]),
            "colour": [seq.colour.config, seq.colour.plate_space, seq.colour.model_space],
        }
        if storage.is_local(url) or mode == "full":
            stat["content"] = frames_sha256([seq.pattern.frame_url(n) for n in seq.numbers], mode)
    else:
        stat = stat_fingerprint(url)
        if storage.is_local(url) or mode == "full":
            stat["content"] = content_sha256(url, mode)
    return {
        "url": url,
        **stat,
        "frames": info.frame_count,
        "pts_sha256": hashlib.sha256(pts.tobytes()).hexdigest(),
        "codec": info.codec,
        "size_px": [info.width, info.height],
    }


def content_sha256(url: str, mode: FingerprintMode) -> str:
    """A digest of a file's content: ``full``, every byte; ``sampled`` (local files), the size and
    1 MiB blocks: the first, the last and every Nth, N = ceil(blocks / 15), so at most 16 MiB are
    read (a file of 16 MiB or less is read whole)."""
    if mode == "full" or not storage.is_local(url):
        return "full:" + sha256_url(url)
    try:
        with open(storage.local_path(url), "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            blocks = math.ceil(size / SAMPLE_BLOCK_BYTES)
            picked: list[int] | range = range(blocks)
            if blocks > SAMPLE_MAX_BLOCKS:
                picked = sorted({*range(0, blocks, math.ceil(blocks / (SAMPLE_MAX_BLOCKS - 1))), blocks - 1})
            digest = hashlib.sha256(f"{size}".encode())
            for index in picked:
                digest.update(f"\n{index}\n".encode())
                digest.update(os.pread(fh.fileno(), SAMPLE_BLOCK_BYTES, index * SAMPLE_BLOCK_BYTES))
    except OSError as exc:
        raise StorageError(url, f"cannot read ({exc.strerror or exc})") from exc
    return "sampled:" + digest.hexdigest()


def frames_sha256(urls: list[str], mode: FingerprintMode) -> str:
    """A digest of an image sequence's frames: ``sampled``, each frame's first and last 64 KiB; ``full``,
    every byte of every frame (read on 8 threads)."""
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="fingerprint") as pool:
        digests = list(pool.map(lambda u: _frame_sha256(u, mode), urls))
    return f"{mode}:" + hashlib.sha256("\n".join(digests).encode()).hexdigest()


def _frame_sha256(url: str, mode: FingerprintMode) -> str:
    if mode == "full" or not storage.is_local(url):
        return sha256_url(url)
    try:
        with open(storage.local_path(url), "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            head = os.pread(fh.fileno(), FRAME_SAMPLE_BYTES, 0)
            tail_at = max(len(head), size - FRAME_SAMPLE_BYTES)
            tail = os.pread(fh.fileno(), FRAME_SAMPLE_BYTES, tail_at) if tail_at < size else b""
    except OSError as exc:
        raise StorageError(url, f"cannot read ({exc.strerror or exc})") from exc
    return hashlib.sha256(f"{size}\n".encode() + head + tail).hexdigest()


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
