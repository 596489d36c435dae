"""Probe an image sequence: one listing, every frame proven whole, one ``VideoInfo``.

A plate's frame numbers are its timestamps: ``pts`` are the frame numbers and
``time_base`` is one frame (``1/fps``), so every frame is a keyframe.  Any frame
that is missing, empty, unreadable, truncated or shaped unlike the first refuses
the whole shot, with every bad frame number named in one message.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from typing import Any

from pipeline.errors import MediaError
from pipeline.limits import InputLimits
from pipeline.plates.colour import resolve_colour
from pipeline.plates.imagefile import FrameHeader, Inspection, inspect_local, inspect_remote
from pipeline.plates.sequence import (
    FrameFile,
    frames_are,
    gaps_in,
    list_frames,
    parse_sequence_url,
    runs_are,
)
from pipeline.store import storage
from pipeline.video.probe import VideoInfo
from pipeline.video.sequence_types import ColourRequest, SequenceInfo, pixel_dtype

log = logging.getLogger(__name__)

_STANDARD_RATES = tuple(Fraction(n, 1001) for n in (24000, 30000, 48000, 60000))


def probe_sequence(
    url: str,
    *,
    fps: Fraction | None = None,
    colour: ColourRequest | None = None,
    threads: int = 16,
    limits: InputLimits | None = None,
) -> VideoInfo:
    """Describe the image sequence ``url`` (``.../sc010_plate.####.exr``) exactly.

    ``fps``: the shot's rate; it wins over the rate in the headers (a note is
    logged when they differ) and is required when the headers carry none.
    ``colour``: what the spec asks for (see :func:`resolve_colour`).
    ``threads``: frames checked at once (each is opened and its last chunk read).
    ``limits``: largest frame size (default :class:`InputLimits`); a larger frame is refused
    from its header, before any pixel is read.

    Raises MediaError naming ``url`` and the frame numbers, or SpecError for colour.
    """
    request = colour or ColourRequest()
    pattern = parse_sequence_url(url)
    frames = list_frames(pattern)
    if not frames:
        raise MediaError(
            url, f"no frames: nothing in {pattern.directory} is named like {url.rpartition('/')[2]}"
        )
    numbers = [f.number for f in frames]
    problems: list[str] = []
    missing = gaps_in(numbers)
    if missing:
        problems.append(runs_are(missing, "missing", noun="gaps"))
    empty = [f.number for f in frames if f.size == 0]
    if empty:
        problems.append(frames_are(empty, "empty (0 bytes)"))
    found = _inspect_all([f for f in frames if f.size > 0], threads, limits)
    problems.extend(_frame_problems(found))
    if problems:
        raise MediaError(url, "; ".join(problems))
    first = found[0].header
    assert first is not None
    _check_supported(url, first)
    spec = first.spec
    rate = _frame_rate(url, spec, fps)
    colour_info = resolve_colour(request, url, first.format, _stated_space(spec))
    channels = first.channels
    dtype = pixel_dtype(first.channel_types)
    assert dtype is not None
    types = sorted(set(first.channel_types))
    sequence = SequenceInfo(
        pattern=pattern,
        numbers=tuple(numbers),
        format=first.format,
        channels=channels,
        rgb=_rgb_indices(url, channels),
        pixel_type=types[0] if len(types) == 1 else "mixed",
        channel_types=first.channel_types,
        bits=first.bits,
        compression=spec.get_string_attribute("compression", "") or None,
        colour=colour_info,
        sizes=tuple(f.size for f in frames),
        stamps=tuple(f.stamp for f in frames),
    )
    n = len(numbers)
    return VideoInfo(
        url=url,
        codec=first.format,
        width=first.width,
        height=first.height,
        pix_fmt=f"{pattern.ext}:{sequence.pixel_type}",
        bit_depth=first.bits,
        time_base=1 / rate,
        frame_rate=rate,
        is_vfr=False,
        frame_count=n,
        pts=tuple(numbers),
        keyframes=tuple(range(n)),
        duration_seconds=float(n / rate),
        color_primaries=None,
        color_trc=None,
        colorspace=None,
        color_range=None,
        rotation=0,
        timecode=timecode_of(spec),
        audio=(),
        container_format="image2",
        declared_frames=n,
        sequence=sequence,
    )


def _inspect_all(frames: list[FrameFile], threads: int, limits: InputLimits | None) -> list[Inspection]:
    """Inspect every frame in ``threads`` parallel threads, in frame order."""
    if not frames:
        return []
    with contextlib.ExitStack() as stack:
        check: Callable[[FrameFile], Inspection]
        if storage.is_local(frames[0].url):

            def check(f: FrameFile) -> Inspection:
                return inspect_local(f.number, storage.local_path(f.url), f.url, limits)

        else:
            fs, _ = storage.filesystem(frames[0].url)
            scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="recast-plate-"))

            def check(f: FrameFile) -> Inspection:
                return inspect_remote(
                    f.number, fs, storage.filesystem(f.url)[1], f.url, f.size, scratch=scratch, limits=limits
                )

        with ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="plate-probe") as pool:
            return list(pool.map(check, frames))


def _frame_problems(found: list[Inspection]) -> list[str]:
    problems = []
    too_large = [i for i in found if i.problem == "too_large"]
    if too_large:
        # Size first: a frame this large is not read further, so its other problems are unknown.
        return [f"{frames_are([i.number for i in too_large], 'too large')}: {too_large[0].detail}"]
    for kind, what in (("unreadable", "unreadable"), ("truncated", "truncated or corrupt")):
        bad = [i for i in found if i.problem == kind]
        if bad:
            problems.append(f"{frames_are([i.number for i in bad], what)} ({bad[0].detail})")
    good = [i for i in found if i.problem is None and i.header is not None]
    if not good:
        return problems
    reference = good[0]
    assert reference.header is not None
    layouts: dict[str, list[int]] = {}
    for i in good[1:]:
        assert i.header is not None
        if (layout := i.header.layout()) != reference.header.layout():
            layouts.setdefault(layout, []).append(i.number)
    for layout, numbers in layouts.items():
        problems.append(
            f"{frames_are(numbers, layout)}, unlike frame {reference.number} ({reference.header.layout()})"
        )
    return problems


def _check_supported(url: str, header: FrameHeader) -> None:
    if header.subimages > 1:
        raise MediaError(url, f"multi-part EXR is not supported ({header.subimages} parts)")
    if header.deep:
        raise MediaError(url, "deep images are not supported")
    if pixel_dtype(header.channel_types) is None:
        raise MediaError(
            url, f"channel types {'/'.join(sorted(set(header.channel_types)))} are not supported"
        )


def _rgb_indices(url: str, channels: tuple[str, ...]) -> tuple[int, int, int]:
    upper = [c.upper() for c in channels]
    for names in (("R", "G", "B"), ("RED", "GREEN", "BLUE")):
        if all(n in upper for n in names):
            return (upper.index(names[0]), upper.index(names[1]), upper.index(names[2]))
    raise MediaError(url, f"no R, G, B channels (channels: {', '.join(channels)})")


def _snap_rate(value: float) -> Fraction:
    for rate in _STANDARD_RATES:
        if abs(value - float(rate)) < 1e-3:
            return rate
    return Fraction(value).limit_denominator(1000)


def header_rate(spec: Any) -> Fraction | None:
    """Frame rate stated by the header: EXR ``FramesPerSecond`` (rational), DPX ``dpx:FrameRate``."""
    for name in ("FramesPerSecond", "framesPerSecond"):
        value = spec.getattribute(name)
        if isinstance(value, tuple) and len(value) == 2 and value[0] > 0 and value[1] > 0:
            return Fraction(int(value[0]), int(value[1]))
    value = spec.getattribute("dpx:FrameRate")
    if isinstance(value, int | float) and value > 0:
        return _snap_rate(float(value))
    return None


def _frame_rate(url: str, spec: Any, fps: Fraction | None) -> Fraction:
    stated = header_rate(spec)
    if fps is not None:
        if stated is not None and stated != fps:
            log.warning("%s: header says %s fps, the shot says %s; using %s", url, stated, fps, fps)
        return Fraction(fps)
    if stated is None:
        raise MediaError(url, "the frames state no frame rate; add fps: to the shot")
    return stated


def timecode_of(spec: Any) -> str | None:
    """``HH:MM:SS:FF`` from ``smpte:TimeCode`` (EXR, DPX) or ``dpx:TimeCode``; None if absent."""
    value = spec.getattribute("smpte:TimeCode")
    if isinstance(value, tuple) and value:
        packed = int(value[0])
        if packed != 0xFFFFFFFF:
            fields = [
                (packed >> shift) & mask for shift, mask in ((24, 0x3F), (16, 0x7F), (8, 0x7F), (0, 0x3F))
            ]
            return ":".join(f"{(b >> 4) * 10 + (b & 0xF):02d}" for b in fields)
    text = spec.getattribute("dpx:TimeCode")
    return str(text) if isinstance(text, str) and text else None


def _stated_space(spec: Any) -> str | None:
    """The colour space the FILE names (EXR ``colorspace`` / ``colorInteropID``).

    OIIO's ``oiio:ColorSpace`` is not used: readers synthesize it (PNG reads as
    ``srgb_rec709_scene`` with nothing in the file).
    """
    for name in ("colorspace", "colorInteropID"):
        value = spec.getattribute(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None
