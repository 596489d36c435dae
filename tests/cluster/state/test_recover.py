"""Chunks cut back out of a published output when their segments are gone (no Ray; real H.264 segments,
a real merge, a local work area and one on the loopback S3 server)."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import os
from pathlib import Path

import av
import pytest

from actors.results import ChunkPass, FrameFile, SequencePass, VideoPass
from cluster.state.fingerprints import output_fingerprint
from cluster.state.ledger import Ledger
from cluster.state.manifest import JobManifest, RenderRecord, SegmentHome
from cluster.state.recover import WantedChunk
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
    """A shot rendered in three chunks (each with its matte pass frames, chunk 0 with a review segment)
    and published to ``root``; its segments then removed as the publish does (the review segment and
    the pass frames kept where they are)."""
    work, output = storage.join(root, "work"), storage.join(root, "deliveries", "sh010.mp4")
    ledger = Ledger(JobManifest(work), resumed=True)
    home = SegmentHome(folder=storage.join(work, "segments", "sh010"), pass_urls={"matte": _matte_url(root)})
    urls: list[str] = []
    for index, (path, key) in enumerate(zip(segments, KEYS, strict=True)):
        url = storage.join(home.folder or "", f"{index:05d}-{key}.mp4")
        storage.publish_file(path, url)
        urls.append(url)
        size = os.path.getsize(path)
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        passes: dict[str, ChunkPass] = {"matte": SequencePass(_matte_url(root), _matte_frames(root, index))}
        if index == 0:
            review = storage.join(home.folder or "", f"{index:05d}-{key}.review.mp4")
            storage.write_bytes(review, b"review frames")
            passes["review"] = VideoPass(review, 13, hashlib.sha256(b"review frames").hexdigest())
        record = RenderRecord(index, key, url, digest, size, 25, faces_swapped=1, passes=passes)
        assert ledger.commit_segment("sh010", record) is None
    merge_segments(urls, info, output, audio_source_url=info.url)
    ledger.shot_published(
        "sh010",
        spec_key="spec",
        output_url=output,
        sha256=sha256_url(output),
        fingerprint=output_fingerprint(output),
        frames=75,
        render_keys=list(KEYS),
    )
    for url in urls:
        storage.remove(url)
    return ledger, home, output


def _matte_url(root: str) -> str:
    return storage.join(root, "deliveries", "sh010_matte.####.exr")


def _matte_frames(root: str, index: int) -> tuple[FrameFile, ...]:
    """Chunk ``index``'s matte frames, written (stand-in bytes: what is checked is that they are there)."""
    files = []
    for number in range(CUTS[index], CUTS[index + 1]):
        data = f"matte {number}".encode()
        storage.write_bytes(_matte_url(root).replace("####", f"{number:04d}"), data)
        files.append(FrameFile(number, hashlib.sha256(data).hexdigest(), len(data)))
    return tuple(files)


def _wanted(keys: list[str]) -> list[WantedChunk]:
    return [WantedChunk(i, key, CUTS[i], 25) for i, key in enumerate(keys)]


@pytest.mark.parametrize("store", ["local", "s3"])
def test_untouched_chunks_are_cut_back_out_byte_for_byte(store, encoded, tmp_path, request) -> None:
    info, segments = encoded
    root = str(tmp_path) if store == "local" else request.getfixturevalue("s3_bucket")
    ledger, home, output = _published_job(root, info, segments)
    first_output = sha256_url(output)
    # Chunk 1 is to be rendered under another key (a fix touches it): only 0 and 2 are cut out.
    recovered = ledger.recovered_segments(
        "sh010", _wanted(["key-a", "key-b2", "key-c"]), home=home, output_url=output
    )
    assert sorted(recovered) == [0, 2]
    for index in (0, 2):
        record = recovered[index]
        assert record.key == KEYS[index] and record.frames == 25 and record.faces_swapped == 1
        assert _packets(record.segment_url) == _packets(segments[index])
        # The pass frames are not cut: the record keeps them as written, where they were published.
        assert record.passes["matte"] == SequencePass(_matte_url(root), _matte_frames(root, index))
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
    # The review segment of chunk 0 is gone: chunk 0 is rendered again (its review movie needs it); a
    # matte frame of chunk 2 is gone: chunk 2 is rendered again (it writes its pass frames).
    storage.remove(storage.join(home.folder or "", "00000-key-a.review.mp4"))
    storage.remove(_matte_url(str(tmp_path)).replace("####", "0060"))
    assert sorted(ledger.recovered_segments("sh010", _wanted(KEYS), home=home, output_url=output)) == [1]
    # Another render of the chunk than the one published (its key is not the published one): not cut.
    other = [WantedChunk(0, "key-z", 0, 25)]
    assert ledger.recovered_segments("sh010", other, home=home, output_url=output) == {}
    # The published output replaced by someone else since: nothing is taken from it.
    storage.publish_file(segments[0], output)
    for url in storage.listdir(home.folder or ""):
        storage.remove(url)
    assert ledger.recovered_segments("sh010", _wanted(KEYS), home=home, output_url=output) == {}
    # A fresh (not resumed) job never reads records.
    assert (
        Ledger(ledger.manifest, resumed=False).recovered_segments(
            "sh010", _wanted(KEYS), home=home, output_url=output
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
    assert ledger.recovered_segments("sh010", _wanted(KEYS)[1:], home=home, output_url=output) == {}
    (warning,) = ledger.manifest.take_warnings()
    assert "could not be cut from the published output" in warning and "sha256" in warning


def test_a_chunk_with_a_pass_movie_is_rendered_again(encoded, tmp_path) -> None:
    """A record of an earlier Recast whose matte pass was a movie segment: that movie cannot be cut
    from the output, so the chunk is rendered again rather than recovered without its pass."""
    info, segments = encoded
    ledger, home, output = _published_job(str(tmp_path), info, segments)
    kept = ledger.manifest.render_record("sh010", 1, KEYS[1], home)
    assert kept is not None
    movie = storage.join(home.folder or "", "00001-key-b.matte.mp4")  # where pass segments were
    storage.publish_file(segments[1], movie)
    digest = sha256_url(movie)
    older = dataclasses.replace(
        kept, passes={"matte": VideoPass(movie, os.path.getsize(segments[1]), digest)}
    )
    ledger.manifest.write_render("sh010", older)  # as that run committed it (its segment gone since)
    assert sorted(ledger.recovered_segments("sh010", _wanted(KEYS), home=home, output_url=output)) == [0, 2]
