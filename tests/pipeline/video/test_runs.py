"""Timestamps, keyframes and frame numbers kept as runs read exactly like the tuples they were made of."""

from __future__ import annotations

import dataclasses
import pickle
import random
import sys

import numpy as np
import pytest

from pipeline.video.runs import IntRuns


def _cases() -> list[list[int]]:
    rng = random.Random(7)
    jitter = [0]
    for _ in range(999):  # variable frame rate: steps of 1001 +- a little
        jitter.append(jitter[-1] + 1001 + rng.choice((-2, -1, 0, 0, 0, 1, 2)))
    gaps = [n for n in range(1001, 1101) if n % 17 not in (3, 4)]  # a sequence with missing frames
    return [
        [],
        [5],
        [0, 512],
        list(range(0, 14_400 * 512, 512)),  # constant rate, 14,400 frames
        jitter,
        gaps,
        [0, 1, 2, 10, 11, 40, 41, 42, 43, 100],
        sorted(rng.sample(range(100_000), 300)),
    ]


@pytest.mark.parametrize("values", _cases(), ids=lambda v: f"{len(v)}")
def test_runs_read_as_the_tuple_they_were_made_of(values: list[int]) -> None:
    runs, plain = IntRuns.of(values), tuple(values)
    assert tuple(runs) == plain and len(runs) == len(plain) and runs == plain and runs == list(values)
    assert [runs[i] for i in range(len(plain))] == list(plain)
    assert [runs[-i] for i in range(1, len(plain) + 1)] == [plain[-i] for i in range(1, len(plain) + 1)]
    rng = random.Random(len(values))
    for _ in range(200):
        a, b = rng.randint(-5, len(plain) + 5), rng.randint(-5, len(plain) + 5)
        stride = rng.choice((1, 1, 2, 3, -1))
        assert runs[a:b:stride] == plain[a:b:stride]
        assert runs[a:] == plain[a:] and runs[:b] == plain[:b]
    with pytest.raises(IndexError):
        runs[len(plain)]
    probes = {*plain, *(v + 1 for v in plain), *(v - 1 for v in plain), -1, 10**9}
    index = {v: i for i, v in enumerate(plain)}
    assert {v: runs.position(v) for v in probes} == {v: index.get(v) for v in probes}
    assert all((v in runs) == (v in plain) for v in probes)
    assert np.array_equal(np.asarray(runs), np.asarray(plain, dtype=np.int64))
    assert np.asarray(runs, dtype=np.float64).dtype == np.float64
    again = pickle.loads(pickle.dumps(runs))
    assert again == runs and hash(again) == hash(runs) and IntRuns.of(plain).runs == runs.runs
    assert runs != (*plain, 10**12) and runs != [*plain[:-1], -7]


def test_a_constant_rate_shot_is_one_run_and_small() -> None:
    pts = tuple(range(0, 14_400 * 512, 512))
    runs = IntRuns.of(pts)
    assert len(runs.runs) == 1
    size = sys.getsizeof(runs.runs) + sum(sys.getsizeof(r) for r in runs.runs)
    assert size < 500 < sys.getsizeof(pts) // 100


@pytest.mark.parametrize("name", ["cfr_bframes", "vfr", "ten_bit_prores"])
def test_probed_timestamps_are_runs_equal_to_the_packets(clips, name: str) -> None:
    """A probed clip's timestamps and keyframes as runs: the demuxer's own packets, read again here."""
    import av

    from pipeline.video.probe import probe

    info = probe(clips.path(name))
    assert isinstance(info.pts, IntRuns) and isinstance(info.keyframes, IntRuns)
    with av.open(clips.path(name)) as container:
        packets = [p for p in container.demux(container.streams.video[0]) if p.pts is not None and p.size]
    pts = sorted(int(p.pts) for p in packets)
    keys = sorted(pts.index(int(p.pts)) for p in packets if p.is_keyframe)
    assert info.pts == tuple(pts) and info.keyframes == tuple(keys)
    if name != "vfr":
        assert len(info.pts.runs) == 1  # constant rate: one run
    swapped = dataclasses.replace(info, pts=pts, keyframes=tuple(keys))
    assert isinstance(swapped.pts, IntRuns) and swapped == info
