"""Chunks cut back out of a published output when their segments are gone (no Ray; real H.264 segments,
a real merge, a local work area and one on the loopback S3 server)."""

from __future__ import annotations

import hashlib
import itertools
import os
from pathlib import Path

import av
import pytest

from actors.results import VideoPass
from cluster.state.fingerprints import output_fingerprint
from cluster.state.ledger import Ledger
from cluster.state.manifest import JobManifest, RenderRecord, SegmentHome
from cluster.state.recover import PublishedMovies, WantedChunk
from pipeline.store import storage
from pipeline.store.hashing import sha256_url
from pipeline.video.chunking import Chunk, ChunkPlan
from pipeline.video.encode import EncodeSettings, choose_encoder
from pipeline.video.merge import merge_segments
from pipeline.video.probe import VideoInfo, probe
from tests.clips import ClipCache, render_identity

CUTS = [0, 25, 50, 75]
KEYS = ["key-a", "key-b", "key-c"]


@pytest.fixture(scope="module")
def encoded(tmp_path_factory) -> tuple[VideoInfo, list[str]]:
    """A real 75-frame clip with audio and its three H.264 segments (chunks of 25 frames)."""
    root = tmp_path_factory.mktemp("recover")
    (root / "clips").mkdir()
    info = probe(ClipCache(str(root / "clips")).path("cfr_bframes"))
    ends = [*info.pts, info.end_pts()]
    chunks = tuple(Chunk(n, a, b, info.pts[a], ends[b]) for n, (a, b) in enumerate(itertools.pairwise(CUTS)))
    choice = choose_encoder(EncodeSettings(preset="ultrafast", hardware=False), info)
    return info, render_identity(info, choice, ChunkPlan(75, chunks), str(root / "segments"))


def _packets(url: str) -> list[tuple[bytes, int | None, int | None]]:
    with storage.fetched(url, suffix=".mp4") as path, av.open(path) as container:
        return [(bytes(p), p.pts, p.dts) for p in container.demux(video=0) if p.size]


def _published_job(root: str, info: VideoInfo, segments: list[str]) -> tuple[Ledger, SegmentHome, str]:
    """A shot rendered in three chunks (chunk 0 with a review segment) and published to ``root``; its
    segments then removed as the publish does (the review segment kept)."""
    work, output = storage.join(root, "work"), storage.join(root, "deliveries", "sh010.mp4")
    ledger = Ledger(JobManifest(work), resumed=True)
    home = SegmentHome(folder=storage.join(work, "segments", "sh010"))
    urls: list[str] = []
    mattes: list[str] = []
    for index, (path, key) in enumerate(zip(segments, KEYS, strict=True)):
        url = storage.join(home.folder or "", f"{index:05d}-{key}.mp4")
        storage.publish_file(path, url)
        urls.append(url)
        size = os.path.getsize(path)
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        # A compositing pass's segment (here the same picture) is merged into its own movie.
        matte = storage.join(home.folder or "", f"{index:05d}-{key}.matte.mp4")
        storage.publish_file(path, matte)
        passes = {"matte": VideoPass(matte, size, digest)}
        mattes.append(matte)
        if index == 0:
            review = storage.join(home.folder or "", f"{index:05d}-{key}.review.mp4")
            storage.write_bytes(review, b"review frames")
            passes["review"] = VideoPass(review, 13, hashlib.sha256(b"review frames").hexdigest())
        record = RenderRecord(index, key, url, digest, size, 25, faces_swapped=1, passes=passes)
        assert ledger.commit_segment("sh010", record) is None
    merge_segments(urls, info, output, audio_source_url=info.url)
    matte_url = _matte_url(root)
    merge_segments(mattes, info, matte_url, audio_source_url=None)
    ledger.shot_published(
        "sh010",
        spec_key="spec",
        output_url=output,
        sha256=sha256_url(output),
        fingerprint=output_fingerprint(output),
        frames=75,
        render_keys=list(KEYS),
        passes={"matte": sha256_url(matte_url)},
    )
    for url in urls + mattes:
        storage.remove(url)
    return ledger, home, output


def _matte_url(root: str) -> str:
    return storage.join(root, "deliveries", "sh010_matte.mp4")


def _wanted(keys: list[str]) -> list[WantedChunk]:
    return [WantedChunk(i, key, CUTS[i], 25) for i, key in enumerate(keys)]


@pytest.mark.parametrize("store", ["local", "s3"])
def test_untouched_chunks_are_cut_back_out_byte_for_byte(store, encoded, tmp_path, request) -> None:
    info, segments = encoded
    root = str(tmp_path) if store == "local" else request.getfixturevalue("s3_bucket")
    ledger, home, output = _published_job(root, info, segments)
    first_output = sha256_url(output)
    movies = PublishedMovies(output, {"matte": _matte_url(root)})
    # Chunk 1 is to be rendered under another key (a fix touches it): only 0 and 2 are cut out.
    recovered = ledger.recovered_segments(
        "sh010", _wanted(["key-a", "key-b2", "key-c"]), home=home, movies=movies
    )
    assert sorted(recovered) == [0, 2]
    for index in (0, 2):
        record = recovered[index]
        assert record.key == KEYS[index] and record.frames == 25 and record.faces_swapped == 1
        assert _packets(record.segment_url) == _packets(segments[index])
        matte = record.passes["matte"]
        assert matte.url.endswith(".matte.mp4") and _packets(matte.url) == _packets(segments[index])
        # Committed again: a later run finds the segment where it is, with its new sha256.
        assert Ledger(ledger.manifest, resumed=True).segment("sh010", index, KEYS[index], home) == record
    assert recovered[0].passes["review"].url.endswith(".review.mp4")  # kept as it was
    # Merged with chunk 1 as it was first rendered, the output is the first one to the byte.
    again = storage.join(root, "again.mp4")
    middle = storage.join(home.folder or "", "00001-key-b.mp4")
    storage.publish_file(segments[1], middle)
    merge_segments(
        [recovered[0].segment_url, middle, recovered[2].segment_url], info, again, audio_source_url=info.url
    )
    assert sha256_url(again) == first_output
    assert ledger.manifest.take_warnings() == []


def test_nothing_is_cut_out_unless_the_output_is_the_one_recorded(encoded, tmp_path) -> None:
    info, segments = encoded
    ledger, home, output = _published_job(str(tmp_path), info, segments)
    movies = PublishedMovies(output, {"matte": _matte_url(str(tmp_path))})
    # The review segment of chunk 0 is gone: chunk 0 is rendered again (its review movie needs it).
    storage.remove(storage.join(home.folder or "", "00000-key-a.review.mp4"))
    assert sorted(ledger.recovered_segments("sh010", _wanted(KEYS), home=home, movies=movies)) == [1, 2]
    # Another render of the chunk than the one published (its key is not the published one): not cut.
    other = [WantedChunk(0, "key-z", 0, 25)]
    assert ledger.recovered_segments("sh010", other, home=home, movies=movies) == {}
    # The published output replaced by someone else since: nothing is taken from it.
    storage.publish_file(segments[0], output)
    for url in storage.listdir(home.folder or ""):
        storage.remove(url)
    assert ledger.recovered_segments("sh010", _wanted(KEYS), home=home, movies=movies) == {}
    # A fresh (not resumed) job never reads records.
    assert (
        Ledger(ledger.manifest, resumed=False).recovered_segments(
            "sh010", _wanted(KEYS), home=home, movies=movies
        )
        == {}
    )


def test_an_output_whose_bytes_changed_under_the_same_size_is_caught(encoded, tmp_path) -> None:
    info, segments = encoded
    ledger, home, output = _published_job(str(tmp_path), info, segments)
    path = Path(output)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size and (restored) mtime: the fingerprint alone cannot tell
    stat = path.stat()
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    movies = PublishedMovies(output, {"matte": _matte_url(str(tmp_path))})
    assert ledger.recovered_segments("sh010", _wanted(KEYS)[1:], home=home, movies=movies) == {}
    (warning,) = ledger.manifest.take_warnings()
    assert "could not be cut from the published output" in warning and "sha256" in warning
