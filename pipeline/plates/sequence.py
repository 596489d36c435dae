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
from dataclasses import dataclass

import fileseq

from pipeline import storage
from pipeline.errors import MediaError, StorageError

_PADDING = re.compile(r"#+|@+|%0?\d*d")


def _split_name(url: str) -> tuple[str, str]:
    """(folder URL, file name) of ``url``."""
    folder, sep, name = url.rpartition("/")
    return (folder if sep else "."), name


def is_sequence_url(url: str) -> bool:
    """True when the file name carries frame padding (``####``, ``#``, ``@@@@``, ``%04d``)."""
    return bool(_PADDING.search(_split_name(url)[1]))


@dataclass(frozen=True)
class SequencePattern:
    """A parsed sequence URL: ``directory/head<number>tail``, numbers zero-padded to ``padding``."""

    url: str
    directory: str
    head: str
    tail: str
    padding: int

    @property
    def ext(self) -> str:
        """File extension, lower case, without the dot (``exr``)."""
        return self.tail.rpartition(".")[2].lower()

    def frame_name(self, number: int) -> str:
        return f"{self.head}{number:0{self.padding}d}{self.tail}"

    def frame_url(self, number: int) -> str:
        return f"{self.directory}/{self.frame_name(number)}"


def _padding(pad: str) -> int:
    if pad.startswith("#") and len(pad) > 1:
        return int(fileseq.getPaddingNum(pad, pad_style=fileseq.PAD_STYLE_HASH1))
    return int(fileseq.getPaddingNum(pad))


def parse_sequence_url(url: str) -> SequencePattern:
    """Parse ``url`` (local path or any fsspec URL); MediaError naming it when it is no pattern."""
    directory, name = _split_name(url)
    if not _PADDING.search(name):
        raise MediaError(url, "not a frame sequence pattern (expected padding such as ####, @@@@ or %04d)")
    try:
        seq = fileseq.FileSequence(name)
    except fileseq.ParseException as exc:
        raise MediaError(url, f"not a frame sequence pattern ({exc})") from exc
    if seq.frameSet() is not None:
        raise MediaError(url, "a frame range in the pattern is not supported; name the sequence as ####")
    pad = seq.padding()
    if not pad or seq.dirname():
        raise MediaError(url, "not a frame sequence pattern (expected padding such as ####, @@@@ or %04d)")
    return SequencePattern(
        url=url,
        directory=directory,
        head=seq.basename(),
        tail=seq.extension(),
        padding=_padding(pad),
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


def frame_runs(numbers: list[int] | tuple[int, ...]) -> str:
    """``frames 1010-1012, 1030`` / ``frame 1030``: sorted numbers with runs compressed."""
    ordered = sorted(set(numbers))
    parts = []
    for _, group in itertools.groupby(enumerate(ordered), key=lambda p: p[1] - p[0]):
        run = [n for _, n in group]
        parts.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return f"{'frame' if len(ordered) == 1 else 'frames'} {', '.join(parts)}"


def frames_are(numbers: list[int] | tuple[int, ...], what: str) -> str:
    """``frames 1010-1012, 1030 are <what>`` or ``frame 1030 is <what>``."""
    return f"{frame_runs(numbers)} {'is' if len(set(numbers)) == 1 else 'are'} {what}"
