"""Cutting a chunk's frames back out of a merged movie: the packets the merge copied, byte for byte."""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path

import pytest

from pipeline.errors import MediaError
from pipeline.video.chunking import Chunk, ChunkPlan
from pipeline.video.cut import Cut, cut_segments
from pipeline.video.encode import EncodeSettings, choose_encoder
from pipeline.video.merge import merge_segments
from pipeline.video.probe import VideoInfo, open_container, probe
from tests.clips import render_identity


def _plan(info: VideoInfo, cuts: list[int]) -> ChunkPlan:
    ends = [*info.pts, info.end_pts()]
    chunks = tuple(Chunk(n, a, b, info.pts[a], ends[b]) for n, (a, b) in enumerate(itertools.pairwise(cuts)))
    return ChunkPlan(frame_count=cuts[-1] - cuts[0], chunks=chunks)


def _packets(path: str) -> list[tuple[bytes, int | None, int | None, bool]]:
    with open_container(path) as container:
        stream = container.streams.video[0]
        return [(bytes(p), p.pts, p.dts, p.is_keyframe) for p in container.demux(stream) if p.size]


def _sha(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("ext", "cuts", "window"),
    [
        (".mp4", [0, 20, 41, 75], None),
        (".mov", [0, 33, 75], None),
        (".mp4", [13, 25, 38, 47], (13, 47)),  # a shot's frames: the output starts at frame 13
    ],
)
def test_cut_chunks_merge_back_to_the_same_file(ext, cuts, window, clips, tmp_path) -> None:
    src = probe(clips.path("cfr_bframes"))
    assert src.frame_count == 75 and src.audio
    choice = choose_encoder(EncodeSettings(preset="ultrafast", hardware=False), src)
    segments = render_identity(src, choice, _plan(src, cuts), str(tmp_path / "segments"))
    out = str(tmp_path / f"out{ext}")
    merge_segments(segments, src, out, audio_source_url=src.url, window=window)

    first = cuts[0]
    recut = [
        Cut(a - first, b - a, str(tmp_path / f"cut{n}{Path(s).suffix}"))
        for n, ((a, b), s) in enumerate(zip(itertools.pairwise(cuts), segments, strict=True))
    ]
    assert cut_segments(out, recut, url=out) == [b - a for a, b in itertools.pairwise(cuts)]
    for segment, cut in zip(segments, recut, strict=True):
        # The encoder's packets with the encoder's timestamps (from 0), in their order.
        assert _packets(cut.path) == _packets(segment)

    again = str(tmp_path / f"again{ext}")
    merge_segments([c.path for c in recut], src, again, audio_source_url=src.url, window=window)
    assert _sha(again) == _sha(out)


def test_a_cut_not_at_a_chunk_start_is_refused(clips, tmp_path) -> None:
    src = probe(clips.path("cfr_bframes"))
    choice = choose_encoder(EncodeSettings(preset="ultrafast", hardware=False), src)
    segments = render_identity(src, choice, _plan(src, [0, 40, 75]), str(tmp_path / "segments"))
    out = str(tmp_path / "out.mp4")
    merge_segments(segments, src, out, audio_source_url=src.url)
    inside = Cut(5, 10, str(tmp_path / "inside.mp4"))  # starts inside the first chunk's GOP
    with pytest.raises(MediaError, match=r"frames 5-14 are not one run of packets from a keyframe"):
        cut_segments(out, [inside], url="s3://deliveries/out.mp4")
    assert not Path(inside.path).exists()  # nothing is written when a cut is refused
    with pytest.raises(MediaError, match=r"out\.mp4: frames 70-79 are outside its 75 frames"):
        cut_segments(out, [Cut(70, 10, str(tmp_path / "late.mp4"))], url="s3://deliveries/out.mp4")
