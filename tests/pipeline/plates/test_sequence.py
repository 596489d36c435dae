"""Sequence patterns: every padding style, and one listing that finds the frames."""

from __future__ import annotations

import os

import pytest

from pipeline.errors import MediaError
from pipeline.plates.sequence import frames_are, is_sequence_url, list_frames, parse_sequence_url
from pipeline.store import storage
from tests.pipeline.plates.fs_calls import counting


@pytest.mark.parametrize(
    ("url", "directory", "head", "tail", "padding"),
    [
        (
            "s3://plates/ep101/sc010/sc010_plate.####.exr",
            "s3://plates/ep101/sc010",
            "sc010_plate.",
            ".exr",
            4,
        ),
        ("/p/sc010.%04d.dpx", "/p", "sc010.", ".dpx", 4),
        ("/p/x.@@@@.tif", "/p", "x.", ".tif", 4),
        ("/p/x.#.exr", "/p", "x.", ".exr", 4),  # a lone # is 4 digits (fileseq's default)
        ("/p/x_##.exr", "/p", "x_", ".exr", 2),
        ("/p/x.%d.exr", "/p", "x.", ".exr", 1),
        ("file:///p/a.#####.beauty.exr", "file:///p", "a.", ".beauty.exr", 5),
    ],
)
def test_parse_every_padding_style(url, directory, head, tail, padding):
    assert is_sequence_url(url)
    pattern = parse_sequence_url(url)
    assert (pattern.directory, pattern.head, pattern.tail, pattern.padding) == (
        directory,
        head,
        tail,
        padding,
    )
    assert pattern.ext == tail.rpartition(".")[2]
    assert pattern.frame_url(7) == f"{directory}/{head}{7:0{padding}d}{tail}"


@pytest.mark.parametrize("url", ["/p/movie.mov", "s3://b/x.exr", "/p/x.1001.exr"])
def test_plain_files_are_not_sequences(url):
    assert not is_sequence_url(url)
    with pytest.raises(MediaError, match="not a frame sequence pattern"):
        parse_sequence_url(url)


def test_frame_range_in_pattern_is_refused():
    with pytest.raises(MediaError, match=r"x\.1001-1010#\.exr: a frame range"):
        parse_sequence_url("/p/x.1001-1010#.exr")


def test_frames_are_compresses_runs():
    assert frames_are([1012, 1010, 1011, 1030], "missing") == "frames 1010-1012, 1030 are missing"
    assert frames_are([1030], "missing") == "frame 1030 is missing"


def _touch(folder, names):
    for name in names:
        (folder / name).write_bytes(name.encode())


def test_local_listing_matches_exact_names_and_wide_numbers(tmp_path):
    _touch(
        tmp_path,
        [
            "sh.0999.exr",
            "sh.1000.exr",
            "sh.10000.exr",
            "sh.01001.exr",
            "sh.1001.exr.tmp",
            "shx.1002.exr",
            "sh.-001.exr",
        ],
    )
    (tmp_path / "sh.1003.exr").mkdir()
    frames = list_frames(parse_sequence_url(f"{tmp_path}/sh.####.exr"))
    assert [f.number for f in frames] == [-1, 999, 1000, 10000]
    assert frames[-1].url == f"{tmp_path}/sh.10000.exr" and frames[-1].size == len("sh.10000.exr")
    assert frames[0].stamp == str(os.stat(tmp_path / "sh.-001.exr").st_mtime_ns)
    assert list_frames(parse_sequence_url(f"{tmp_path}/missing/sh.####.exr")) == []


def test_s3_listing_is_one_request(s3_bucket, monkeypatch):
    for n in (1001, 1002, 10000):
        storage.write_bytes(f"{s3_bucket}/sc/p.{n:04d}.exr", b"x" * n)
    storage.write_bytes(f"{s3_bucket}/sc/other.1001.exr", b"x")
    calls = counting(monkeypatch)
    frames = list_frames(parse_sequence_url(f"{s3_bucket}/sc/p.####.exr"))
    assert [(f.number, f.size) for f in frames] == [(1001, 1001), (1002, 1002), (10000, 10000)]
    assert frames[0].url == f"{s3_bucket}/sc/p.1001.exr" and frames[0].stamp
    assert [c for c in calls if c != "invalidate_cache"] == ["ls"]
