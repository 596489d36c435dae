"""Merge a shot's segments, sign, checksum and publish atomically, off the driver's event loop.

The output is assembled in a local temporary folder and appears at its
destination only whole (an object-store PUT or a local rename); a failed
merge leaves the destination as it was.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cluster.fingerprints import output_fingerprint
from pipeline import storage
from pipeline.errors import RecastError
from pipeline.hashing import sha256_file
from pipeline.plates.sequence import frame_runs
from pipeline.probe import VideoInfo

if TYPE_CHECKING:
    from pipeline.merge import MergeStats
    from pipeline.provenance.config import SignerConfig
    from pipeline.provenance.credentials import ManifestInfo

logger = logging.getLogger(__name__)

Signing = tuple["ManifestInfo", "SignerConfig"]


@dataclass(frozen=True)
class Published:
    """A published output: merge figures, its sha256 and its fingerprint at the destination."""

    stats: MergeStats
    sha256: str
    fingerprint: dict[str, Any]
    frame_sha256: dict[str, str] | None = None
    """Image sequences: every frame's sha256 by frame number."""


Window = tuple[int, int]
MergeFn = Callable[[list[str], VideoInfo, str, str, "Signing | None", "Window | None"], Published]
"""(segment URLs, source probe, output URL, audio source URL, signing, delivered frames) -> Published."""


def merge_and_publish(
    segment_urls: list[str],
    info: VideoInfo,
    output_url: str,
    audio_url: str,
    signing: Signing | None = None,
    window: Window | None = None,
) -> Published:
    """Merge into a local file, sign it if asked, checksum it, then publish it atomically.

    ``signing`` = (ManifestInfo, SignerConfig): embed signed Content Credentials
    before publishing (the checksum is of the signed file).  ``window``: the source
    frames ``[a, b)`` the segments hold (None: all of them).
    """
    from pipeline.merge import merge_segments

    expected = info.frame_count if window is None else window[1] - window[0]
    with tempfile.TemporaryDirectory(prefix="recast-out-") as tmp:
        local = os.path.join(tmp, "out" + os.path.splitext(output_url)[1])
        if window is None:
            stats = merge_segments(segment_urls, info, local, audio_source_url=audio_url)
        else:
            stats = merge_segments(segment_urls, info, local, audio_source_url=audio_url, window=window)
        if stats.frames != expected:
            raise RecastError(f"{output_url}: merged {stats.frames} frames, expected {expected}")
        if signing is not None:
            from pipeline.provenance.credentials import sign_video

            signed = os.path.join(tmp, "signed" + os.path.splitext(output_url)[1])
            sign_video(local, signed, signing[0], signing[1])
            local = signed
        sha256 = sha256_file(local)
        storage.publish_file(local, output_url)
    return Published(stats, sha256, output_fingerprint(output_url))


def _remove_quietly(url: str) -> None:
    try:
        storage.remove(url, recursive=True)
    except RecastError as exc:
        logger.warning("could not remove %s: %s", url, exc)


def complete_sequence(info: VideoInfo, output_url: str, written: dict[int, tuple[str, int]]) -> Published:
    """Finish an image-sequence output whose rendered frames the actors wrote: copy every other
    source frame bit-exact, then check with one listing that every frame is there at its size.

    ``written``: frame number -> (sha256, bytes) of the frames the actors wrote.  The sha256 of
    the output is that of its frame list (``<number> <sha256>`` lines), recorded in the manifest
    with every frame's own.
    """
    from pipeline.merge import MergeStats
    from pipeline.plates.frames import copy_plate
    from pipeline.plates.sequence import list_frames, parse_sequence_url

    started = time.perf_counter()
    assert info.sequence is not None
    source, output = info.sequence.pattern, parse_sequence_url(output_url)
    frames = dict(written)
    copies = [n for n in info.sequence.numbers if n not in frames]
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="copy") as pool:
        for number, done in zip(
            copies,
            pool.map(lambda n: copy_plate(source.frame_url(n), output.frame_url(n)), copies),
            strict=True,
        ):
            frames[number] = done
    found = {f.number: f.size for f in list_frames(output)}
    bad = [n for n in info.sequence.numbers if found.get(n) != frames[n][1]]
    if bad:
        raise RecastError(f"{output_url}: frames {frame_runs(bad)} are missing or not the size written")
    listing = "".join(f"{n} {frames[n][0]}\n" for n in info.sequence.numbers)
    total = sum(frames[n][1] for n in info.sequence.numbers)
    stats = MergeStats(frames=len(info.sequence.numbers), bytes=total, seconds=time.perf_counter() - started)
    logger.info(
        "%s: %d frames (%d copied from the source) in %.2f s",
        output_url,
        stats.frames,
        len(copies),
        stats.seconds,
    )
    return Published(
        stats,
        hashlib.sha256(listing.encode()).hexdigest(),
        output_fingerprint(output_url),
        {str(n): frames[n][0] for n in info.sequence.numbers},
    )


class Publisher:
    """Runs merges on a small thread pool so the event loop keeps dispatching meanwhile."""

    def __init__(self, merge: MergeFn = merge_and_publish, *, threads: int = 2) -> None:
        self._merge = merge
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="merge")

    def submit(
        self,
        segment_urls: list[str],
        info: VideoInfo,
        output_url: str,
        audio_url: str,
        signing: Signing | None,
        window: Window | None = None,
    ) -> Future[Published]:
        return self._pool.submit(self._merge, segment_urls, info, output_url, audio_url, signing, window)

    def submit_sequence(
        self, info: VideoInfo, output_url: str, written: dict[int, tuple[str, int]]
    ) -> Future[Published]:
        """Complete an image-sequence output (:func:`complete_sequence`)."""
        return self._pool.submit(complete_sequence, info, output_url, written)

    def remove_later(self, url: str) -> None:
        """Delete ``url`` (recursively) on the publisher's threads; a failure is logged."""
        self._pool.submit(_remove_quietly, url)

    def close(self) -> None:
        """Wait for merges in flight, then stop the threads."""
        self._pool.shutdown(wait=True)
