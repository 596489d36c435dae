"""Frame-sequence patterns (``shot.####.exr``) and the one listing that finds their frames.

Padding: a lone ``#`` is four digits (fileseq's default ``PAD_STYLE_HASH4``); a run
of hashes is one digit per hash as in Nuke (fileseq's ``PAD_STYLE_HASH1``), so
``####`` is 4, not fileseq-default 16; ``@`` is one digit each (``@@@@`` is 4);
``%04d`` is 4 and ``%d`` is 1.  A frame number wider than the padding (10000 with
padding 4) is written in full; negative numbers keep their sign (``-001``).
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import fileseq

from pipeline.errors import MediaError, StorageError
from pipeline.store import storage
from pipeline.video.sequence_types import SequencePattern

_PADDING = re.compile(r"#+|@+|%0?\d*d")


def _split_name(url: str) -> tuple[str, str]:
    """(folder URL, file name) of ``url``."""
    folder, sep, name = url.rpartition("/")
    return (folder if sep else "."), name


def is_sequence_url(url: str) -> bool:
    """True when the file name carries frame padding (``####``, ``#``, ``@@@@``, ``%04d``)."""
    return bool(_PADDING.search(_split_name(url)[1]))


def _padding(pad: str) -> int:
    if pad.startswith("#") and len(pad) > 1:
        return int(fileseq.getPaddingNum(pad, pad_style=fileseq.PAD_STYLE_HASH1))
    return int(fileseq.getPaddingNum(pad))


def parse_sequence_url(url: str) -> SequencePattern:
    """Parse ``url`` (local path or any fsspec URL); MediaError naming it when it is no pattern."""
    directory, name = _split_name(url)
    paddings = _PADDING.findall(name)
    if not paddings:
        raise MediaError(url, "not a frame sequence pattern (expected padding such as ####, @@@@ or %04d)")
    if len(paddings) > 1:
        raise MediaError(
            url,
            f"{len(paddings)} frame paddings in one name ({', '.join(paddings)}); a pattern has exactly one",
        )
    try:
        seq = fileseq.FileSequence(name)
        frame_set, pad = seq.frameSet(), seq.padding()
        padding = _padding(pad) if pad else 0
    except (fileseq.ParseException, ValueError) as exc:  # fileseq raises ValueError for odd padding
        raise MediaError(url, f"not a frame sequence pattern ({exc})") from None
    if frame_set is not None:
        raise MediaError(url, "a frame range in the pattern is not supported; name the sequence as ####")
    if not padding or seq.dirname():
        raise MediaError(url, "not a frame sequence pattern (expected padding such as ####, @@@@ or %04d)")
    return SequencePattern(
        url=url, directory=directory, head=seq.basename(), tail=seq.extension(), padding=padding
    )


@dataclass(frozen=True)
class FrameFile:
    """One listed frame: its number, URL, size in bytes and a change stamp (mtime, ETag...)."""

    number: int
    url: str
    size: int
    stamp: str


def _matcher(pattern: SequencePattern) -> re.Pattern[str]:
    return re.compile(rf"{re.escape(pattern.head)}(-?\d+){re.escape(pattern.tail)}")


def _number(pattern: SequencePattern, regex: re.Pattern[str], name: str) -> int | None:
    match = regex.fullmatch(name)
    if match is None:
        return None
    number = int(match.group(1))
    # Only the canonical spelling: with padding 4, "01001" is not frame 1001.
    return number if pattern.frame_name(number) == name else None


def list_frames(pattern: SequencePattern) -> list[FrameFile]:
    """Every frame of ``pattern``, sorted by number, from ONE listing of its folder.

    A missing folder lists as no frames.  StorageError names the folder when it
    cannot be listed.
    """
    regex = _matcher(pattern)
    frames: list[FrameFile] = []
    url = pattern.directory
    if storage.is_local(url):
        path = storage.local_path(url)
        if not os.path.isdir(path):
            return []
        with os.scandir(path) as entries:
            for entry in entries:
                number = _number(pattern, regex, entry.name)
                if number is not None and entry.is_file():
                    st = entry.stat()
                    frames.append(
                        FrameFile(number, pattern.frame_url(number), st.st_size, str(st.st_mtime_ns))
                    )
    else:
        fs, path = storage.filesystem(url)
        try:
            fs.invalidate_cache(path)
            entries = fs.ls(path, detail=True)
        except FileNotFoundError:
            return []
        except Exception as exc:
            raise StorageError(url, f"cannot list ({type(exc).__name__}: {exc})") from exc
        for entry in entries:
            if entry.get("type") == "directory":
                continue
            number = _number(pattern, regex, str(entry["name"]).rstrip("/").rpartition("/")[2])
            if number is not None:
                stamp = entry.get("ETag") or entry.get("LastModified") or entry.get("mtime") or ""
                frames.append(FrameFile(number, pattern.frame_url(number), int(entry["size"]), str(stamp)))
    return sorted(frames, key=lambda f: f.number)


RUNS_SHOWN = 5
"""Runs of frame numbers a message names; the rest are counted (``and 12 more gaps, 3,000 frames in all``)."""


def runs_of(numbers: Iterable[int]) -> list[tuple[int, int]]:
    """(first, last) of each run of consecutive numbers in ``numbers``, in order."""
    runs: list[tuple[int, int]] = []
    for n in sorted(set(numbers)):
        if runs and runs[-1][1] == n - 1:
            runs[-1] = (runs[-1][0], n)
        else:
            runs.append((n, n))
    return runs


def gaps_in(numbers: Sequence[int]) -> list[tuple[int, int]]:
    """(first, last) of each run of numbers missing between the sorted ``numbers``.

    Computed from neighbouring numbers only, so frames 1 and 99999999 cost one gap,
    not a set of every number between them."""
    return [(a + 1, b - 1) for a, b in itertools.pairwise(numbers) if b - a > 1]


def describe_runs(runs: Sequence[tuple[int, int]], *, noun: str = "runs") -> str:
    """``frames 1010-1012, 1030``: at most :data:`RUNS_SHOWN` runs, then ``and N more <noun>, M frames in all``."""
    count = sum(b - a + 1 for a, b in runs)
    parts = [str(a) if a == b else f"{a}-{b}" for a, b in runs[:RUNS_SHOWN]]
    text = f"{'frame' if count == 1 else 'frames'} {', '.join(parts)}"
    if len(runs) > RUNS_SHOWN:
        text += f" and {len(runs) - RUNS_SHOWN:,} more {noun}, {count:,} frames in all"
    return text


def runs_are(runs: Sequence[tuple[int, int]], what: str, *, noun: str = "runs") -> str:
    """``frames 1010-1012, 1030 are <what>`` or ``frame 1030 is <what>`` (see :func:`describe_runs`)."""
    single = sum(b - a + 1 for a, b in runs) == 1
    return f"{describe_runs(runs, noun=noun)} {'is' if single else 'are'} {what}"


def frames_are(numbers: Iterable[int], what: str) -> str:
    """``frames 1010-1012, 1030 are <what>`` or ``frame 1030 is <what>``."""
    return runs_are(runs_of(numbers), what)
