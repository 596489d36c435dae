"""Merge a shot's segments, sign, checksum and publish atomically, off the driver's event loop.

The output is assembled in a local temporary folder and appears at its
destination only whole (an object-store PUT or a local rename); a failed
merge leaves the destination as it was.  Frames the actors wrote whole (an image
sequence's, a video's pass frames) are checked here: :func:`complete_frames`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from cluster.state.fingerprints import output_fingerprint
from pipeline.errors import RecastError, StorageError
from pipeline.plates.sequence import frames_are, list_frames, parse_sequence_url
from pipeline.store import storage
from pipeline.store.hashing import sha256_file
from pipeline.video.probe import VideoInfo

if TYPE_CHECKING:
    from pipeline.provenance.config import SignerConfig
    from pipeline.provenance.credentials import ManifestInfo
    from pipeline.video.merge import MergeStats

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
    passes: dict[str, Published] = field(default_factory=dict)
    """Compositing passes published with the output."""
    content_sha256: str | None = None
    """A video's sha256 before its Content Credentials were embedded (the same on every run of the
    job; ``sha256`` is the published file's, whose signature differs run to run)."""
    credentials_url: str | None = None
    """The signed sidecar manifest published beside an output that cannot embed one (MKV, sequences)."""
    sign_seconds: float = 0.0
    """Time spent signing (embedding the C2PA manifest, or building the sidecar)."""


Window = tuple[int, int]
Written = dict[int, tuple[str, int]]
"""Frame number -> (sha256, bytes) of each frame written."""
Digests = Mapping[str, str]
"""Segment URL -> its recorded sha256."""


@dataclass(frozen=True)
class OutputMerge:
    """A shot's merge as :meth:`Publisher.submit` takes it: the output's segments and destination, the
    audio source and signing, the delivered frames, each pass's (segment URLs, URL), the recorded sha256s."""

    segment_urls: list[str]
    info: VideoInfo
    output_url: str
    audio_url: str
    signing: Signing | None
    window: Window | None
    passes: dict[str, tuple[str, Written]]
    sha256: Digests | None


class MergeFn(Protocol):
    """(segment URLs, source probe, output URL, audio source URL, signing; delivered frames,
    segment sha256s) -> Published.

    ``overwrite=False``: publish only if the output is absent (never replace it).
    """

    def __call__(
        self,
        segment_urls: list[str],
        info: VideoInfo,
        output_url: str,
        audio_url: str,
        signing: Signing | None,
        *,
        window: Window | None = None,
        segment_sha256: Digests | None = None,
        overwrite: bool = True,
    ) -> Published: ...


def merge_and_publish(
    segment_urls: list[str],
    info: VideoInfo,
    output_url: str,
    audio_url: str,
    signing: Signing | None = None,
    *,
    window: Window | None = None,
    segment_sha256: Digests | None = None,
    overwrite: bool = True,
) -> Published:
    """Merge into a local file, sign it if asked, checksum it, then publish it atomically.

    ``signing`` = (ManifestInfo, SignerConfig): embed signed Content Credentials
    before publishing (the checksum is of the signed file).  ``window``: the source
    frames ``[a, b)`` the segments hold (None: all of them).  ``segment_sha256``: every
    segment's recorded sha256; each is hashed as it is fetched for the merge, and
    one that differs raises ChecksumError naming it (nothing is published).
    ``overwrite=False``: an output that exists by now is left as it is (StorageError),
    never replaced.
    """
    from pipeline.video.merge import merge_segments

    expected = info.frame_count if window is None else window[1] - window[0]
    with tempfile.TemporaryDirectory(prefix="recast-out-") as tmp:
        local = os.path.join(tmp, "out" + os.path.splitext(output_url)[1])
        digests = None if segment_sha256 is None else [segment_sha256[u] for u in segment_urls]
        if window is None:
            stats = merge_segments(
                segment_urls, info, local, audio_source_url=audio_url, segment_sha256=digests
            )
        else:
            stats = merge_segments(
                segment_urls, info, local, audio_source_url=audio_url, window=window, segment_sha256=digests
            )
        if stats.frames != expected:
            raise RecastError(f"{output_url}: merged {stats.frames} frames, expected {expected}")
        content = sha256_file(local)
        sidecar: tuple[str, bytes] | None = None
        started = time.perf_counter()
        if signing is not None:
            from pipeline.provenance.config import EMBEDDED_SUFFIXES
            from pipeline.provenance.credentials import sign_video

            info_signed = signing[0].model_copy(update={"content_sha256": content})
            if output_url.lower().endswith(EMBEDDED_SUFFIXES):
                signed = os.path.join(tmp, "signed" + os.path.splitext(output_url)[1])
                sign_video(local, signed, info_signed, signing[1])
                local = signed
            else:  # MKV: a signed sidecar manifest bound to the file's sha256
                sidecar = file_sidecar(output_url, content, info_signed, signing[1])
        sign_seconds = time.perf_counter() - started if signing is not None else 0.0
        sha256 = content if sidecar is not None or signing is None else sha256_file(local)
        storage.publish_file(local, output_url, overwrite=overwrite)
        if sidecar is not None:
            storage.write_bytes(sidecar[0], sidecar[1], overwrite=overwrite)
    return Published(
        stats,
        sha256,
        output_fingerprint(output_url),
        content_sha256=content,
        credentials_url=None if sidecar is None else sidecar[0],
        sign_seconds=sign_seconds,
    )


def file_sidecar(output_url: str, sha256: str, info: ManifestInfo, signer: SignerConfig) -> tuple[str, bytes]:
    """(URL, bytes) of the signed sidecar manifest of a single-file output that cannot embed one."""
    from pipeline.provenance.sidecar import build_sidecar, sidecar_url

    name = output_url.rstrip("/").rsplit("/", 1)[-1]
    data = build_sidecar(info, files={name: sha256}, modified=[name], signer=signer, content="file")
    return sidecar_url(output_url), data


def sequence_sidecar(
    output_url: str, published: Published, replaced: Sequence[tuple[int, int]], signing: Signing
) -> Published:
    """Sign a completed image sequence: a sidecar manifest bound to every frame's sha256, the frames
    whose faces were replaced (``replaced``: runs of frame numbers) marked AI-modified; published
    beside the frames.  Returns ``published`` with its URL and the time it took."""
    from pipeline.provenance.sidecar import build_sidecar, sidecar_url

    assert published.frame_sha256 is not None
    started = time.perf_counter()
    pattern = parse_sequence_url(output_url)
    changed = {n for first, last in replaced for n in range(first, last + 1)}
    files, modified = {}, []
    for number, digest in published.frame_sha256.items():
        name = pattern.frame_url(int(number)).rsplit("/", 1)[-1]
        files[name] = digest
        if int(number) in changed:
            modified.append(name)
    info = signing[0].model_copy(update={"content_sha256": published.sha256})
    url = sidecar_url(output_url)
    storage.write_bytes(
        url, build_sidecar(info, files=files, modified=modified, signer=signing[1], content="sequence")
    )
    return replace(published, credentials_url=url, sign_seconds=time.perf_counter() - started)


def complete_frames(
    url: str, written: Written, numbers: Sequence[int], fill: Callable[[int], tuple[str, int]] | None = None
) -> Published:
    """A sequence at ``url`` complete: every one of ``numbers`` written (``fill`` writes those the actors
    did not; None: none may be missing) and there at the size written (RecastError naming the frames
    otherwise).  Its sha256 is its frame listing's (``<number> <sha256>`` lines)."""
    from pipeline.video.merge import MergeStats

    started = time.perf_counter()
    frames = dict(written)
    missing = [n for n in numbers if n not in frames]
    if missing and fill is None:
        raise RecastError(f"{url}: {frames_are(missing, 'not written')}")
    if missing and fill is not None:
        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="fill") as pool:
            frames.update(zip(missing, pool.map(fill, missing), strict=True))
    found = {f.number: f.size for f in list_frames(parse_sequence_url(url))}
    bad = [n for n in numbers if found.get(n) != frames[n][1]]
    if bad:
        raise RecastError(f"{url}: {frames_are(bad, 'missing or not the size written')}")
    listing = "".join(f"{n} {frames[n][0]}\n" for n in numbers)
    stats = MergeStats(
        frames=len(numbers), bytes=sum(frames[n][1] for n in numbers), seconds=time.perf_counter() - started
    )
    logger.info("%s: %d frames (%d filled in) in %.2f s", url, stats.frames, len(missing), stats.seconds)
    return Published(
        stats,
        hashlib.sha256(listing.encode()).hexdigest(),
        output_fingerprint(url),
        {str(n): frames[n][0] for n in numbers},
    )


def _withdraw(passes: Mapping[str, tuple[str, Written]]) -> None:
    """Remove the pass frames this job wrote (the checks found none there before it, or it was told
    to overwrite them) when their output may not be published."""
    for url, frames in passes.values():
        pattern = parse_sequence_url(url)
        for number in frames:
            _remove_quietly(pattern.frame_url(number))


def _remove_quietly(url: str) -> None:
    try:
        storage.remove(url, recursive=True)
    except RecastError as exc:
        logger.warning("could not remove %s: %s", url, exc)


class Publisher:
    """Runs merges on a small thread pool so the event loop keeps dispatching meanwhile."""

    def __init__(
        self,
        merge: MergeFn = merge_and_publish,
        *,
        threads: int = 2,
        if_exists: str = "overwrite",
        guard: Callable[[], None] | None = None,
    ) -> None:
        self._merge = merge
        self._if_exists = if_exists
        """``output.if_exists``: anything but ``overwrite`` publishes only where nothing is yet."""
        self._guard = guard
        """Called on the thread before each publish or removal: raises when this driver may no longer write."""
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="merge")

    def submit(
        self,
        segment_urls: list[str],
        info: VideoInfo,
        output_url: str,
        audio_url: str,
        signing: Signing | None,
        *,
        window: Window | None = None,
        passes: dict[str, tuple[str, Written]] | None = None,
        sha256: Digests | None = None,
    ) -> Future[Published]:
        """Check each pass's frames the actors wrote (pass -> (its frame pattern, the frames written)),
        then merge and publish the output; ``sha256``: every segment's recorded sha256 (checked as
        each is fetched)."""
        merge = OutputMerge(segment_urls, info, output_url, audio_url, signing, window, passes or {}, sha256)
        return self._pool.submit(self._merge_all, merge)

    def _merge_all(self, m: OutputMerge) -> Published:
        if self._guard is not None:
            self._guard()
        overwrite = self._if_exists == "overwrite"
        first, end = m.window if m.window is not None else (0, m.info.frame_count)
        numbers = m.info.frame_numbers(first, end)
        # Checked first: an output is never published without its passes.
        done = {name: complete_frames(url, frames, numbers) for name, (url, frames) in m.passes.items()}
        try:
            published = self._merge(
                m.segment_urls,
                m.info,
                m.output_url,
                m.audio_url,
                m.signing,
                window=m.window,
                segment_sha256=m.sha256,
                overwrite=overwrite,
            )
        except StorageError as exc:
            if exc.reason != storage.ALREADY_EXISTS:
                raise
            _withdraw(m.passes)  # no pass frames left behind without their output
            raise StorageError(
                exc.url,
                f"appeared after the job's checks; with output.if_exists: {self._if_exists} "
                "it is left untouched, not overwritten",
            ) from exc
        return replace(published, passes=done)

    def submit_call[T](self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
        """Run another publishing step (e.g. :func:`cluster.publish.sequences.complete_sequence`, or
        :func:`cluster.publish.review.publish_review`) on these threads."""
        return self._pool.submit(self._guarded, fn, *args, **kwargs)

    def remove_later(self, url: str) -> None:
        """Delete ``url`` (recursively) on the publisher's threads; a failure is logged."""
        self._pool.submit(self._guarded, _remove_quietly, url)

    def _guarded[T](self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._guard is not None:
            self._guard()
        return fn(*args, **kwargs)

    def close(self) -> None:
        """Wait for merges in flight, then stop the threads."""
        self._pool.shutdown(wait=True)
