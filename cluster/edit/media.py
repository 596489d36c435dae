"""A clip's media: the URL Recast reads, and the clip's source range as the media's own frames.

* ``ImageSequenceReference``: the sequence in Recast's padded form (``prefix.####.exr``), its
  frames in the plate's own numbering (``start_frame`` at the reference's available start);
* ``ExternalReference`` to a movie: frames from 0 at the movie's own rate and length (the movie
  is probed: a 30 fps movie cut into a 24 fps timeline renders its own frames, whatever rate the
  reference states its available range in); the available range's start is the movie's first
  frame, and a movie without one starts at its own timecode;
* a clip named only by its reel (an EDL event) with ``edit.media``: the reel's plate or movie,
  the event's source timecode placed with the media's own timecode.

Media bundled in an ``.otioz`` (a relative URL into its ``media/``) is read from the bundle's
extraction (:mod:`cluster.edit.bundle`).  Offline media (a ``MissingReference``, a file or sequence
that is not there, a bundle path the zip does not hold) is an :class:`~cluster.edit.cut.Unusable`; a range outside the media is a SpecError naming the clip.
Every media URL is shown to ``allowed`` (the studio policy) before it is listed or opened.
"""

from __future__ import annotations

import math
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import opentimelineio as otio
from opentimelineio.opentime import RationalTime

from cluster.edit.bundle import Bundle
from cluster.edit.cut import CutClip, Unusable, timecode_at
from cluster.spec.edit import EditSpec
from cluster.spec.shot import VIDEO_EXTENSIONS, check_media_url
from pipeline.errors import InputRefused, MediaError, SpecError, StorageError
from pipeline.limits import InputLimits
from pipeline.plates.sequence import is_sequence_url, list_frames, parse_sequence_url
from pipeline.provenance.paths import render_url
from pipeline.store import storage, urls
from pipeline.store.redact import CREDENTIALS_IN_URL, find_url_credentials, redact_text
from pipeline.video.probe import VideoInfo, probe


@dataclass(frozen=True)
class MediaClock:
    """How a media's frames sit in its time: frame ``origin_frame`` at ``origin``, ``rate`` a second."""

    rate: float
    origin: RationalTime
    origin_frame: int
    available: tuple[int, int]
    """First and last frame the media has (a sequence's own numbers, a movie's from 0)."""

    def frame_at(self, time: RationalTime) -> int:
        """The frame shown at media time ``time`` (the nearest)."""
        return self.origin_frame + math.floor((time - self.origin).rescaled_to(self.rate).value + 0.5)

    def time_of(self, frame: int) -> RationalTime:
        """The media time of frame ``frame``."""
        return self.origin + RationalTime(frame - self.origin_frame, self.rate).rescaled_to(self.origin.rate)


@dataclass(frozen=True)
class ClipMedia:
    """A clip's media (a sequence or a movie) and the frames ``first``-``last`` its source range shows."""

    url: str
    sequence: bool
    clock: MediaClock
    first: int
    last: int

    @property
    def rate(self) -> float:
        return self.clock.rate

    @property
    def available(self) -> tuple[int, int]:
        return self.clock.available

    def time_of(self, frame: int) -> RationalTime:
        return self.clock.time_of(frame)

    @property
    def outside(self) -> bool:
        return self.first < self.available[0] or self.last > self.available[1]


class MediaResolver:
    """Resolves clips against one edit, each media listed, probed or read once.

    ``allowed(url)`` (the studio policy) sees every media URL before it is listed or opened;
    ``limits``: the job's, for the movies probed here."""

    def __init__(
        self,
        edit: EditSpec,
        *,
        allowed: Callable[[str], None] | None = None,
        limits: InputLimits | None = None,
        bundle: Bundle | None = None,
    ) -> None:
        self.edit = edit
        self.allowed = allowed
        self.limits = limits
        self.bundle = bundle
        self._frames: dict[str, tuple[int, ...]] = {}
        self._probes: dict[str, VideoInfo] = {}
        self._headers: dict[str, tuple[str | None, Fraction | None]] = {}
        self._reels: dict[str, tuple[str, MediaClock, str] | str] = {}

    def resolve(self, cut: CutClip) -> ClipMedia | Unusable:
        """The clip's media, or why it cannot be rendered; SpecError for a range outside its media."""
        ref = cut.clip.media_reference
        reel = (cut.clip.metadata.get("cmx_3600") or {}).get("reel")
        if ref is None or isinstance(ref, otio.schema.MissingReference):
            if reel and self.edit.media is not None:
                return self._reel(cut, str(reel))
            return Unusable(cut.where, "offline: no media (MissingReference)")
        if isinstance(ref, otio.schema.ImageSequenceReference):
            return self._sequence(cut, ref)
        if isinstance(ref, otio.schema.ExternalReference):
            return self._movie(cut, ref)
        return Unusable(cut.where, f"unsupported media reference {type(ref).__name__}")

    # -- the three kinds of reference
    def _sequence(self, cut: CutClip, ref: otio.schema.ImageSequenceReference) -> ClipMedia | Unusable:
        if ref.frame_step != 1:
            return Unusable(cut.where, f"unsupported: every {ref.frame_step}th frame of a sequence")
        pad = ref.frame_zero_padding
        base = ref.target_url_base or ""
        if base and not base.endswith("/"):
            base += "/"
        url = self._url(cut, base + ref.name_prefix + ("#" * pad if pad >= 2 else "@") + ref.name_suffix)
        if isinstance(url, Unusable):
            return url
        numbers = self._listing(cut, url)
        if not numbers:
            return Unusable(cut.where, f"offline: no frames of {url}")
        avail = ref.available_range
        origin = avail.start_time if avail is not None else RationalTime(0, ref.rate)
        clock = MediaClock(ref.rate, origin, ref.start_frame, (numbers[0], numbers[-1]))
        return _inside(cut, _placed(cut, url, clock))

    def _movie(self, cut: CutClip, ref: otio.schema.ExternalReference) -> ClipMedia | Unusable:
        url = self._url(cut, ref.target_url or "")
        if isinstance(url, Unusable):
            return url
        if not url.split("?", 1)[0].lower().endswith(VIDEO_EXTENSIONS):
            return Unusable(cut.where, f"unsupported media {url}: Recast renders movies and image sequences")
        if not self._exists(cut, url):
            return Unusable(cut.where, f"offline: {url} not found")
        # The movie says its own rate and length: a timeline may state its range at the cut's rate (AAF
        # always does; a 30 fps movie's range at 24 fps), which says when the movie starts, not how
        # many frames a second it has.
        info = self._probe(cut, url)
        rate = float(info.frame_rate)
        avail = ref.available_range
        if avail is not None:
            origin = avail.start_time
        elif info.timecode:
            origin = otio.opentime.from_timecode(info.timecode, rate)
        else:
            origin = RationalTime(0, rate)
        clock = MediaClock(rate, origin, 0, (0, info.frame_count - 1))
        return _inside(cut, _placed(cut, url, clock))

    def _reel(self, cut: CutClip, reel: str) -> ClipMedia | Unusable:
        """An EDL event's reel: its media from ``edit.media.pattern``, placed by the media's timecode."""
        if reel not in self._reels:
            self._reels[reel] = self._reel_media(cut, reel)
        found = self._reels[reel]
        if isinstance(found, str):
            return Unusable(cut.where, found)
        url, clock, timecode = found
        media = _placed(cut, url, clock)
        if media.outside:
            source = _source_range(cut)
            available = clock.available
            raise SpecError(
                "edit",
                f"{cut.where.label()}: source timecode {timecode_at(source.start_time)}-"
                f"{timecode_at(source.end_time_inclusive())} is outside reel {reel}'s media {url} "
                f"({timecode}-{timecode_at(clock.time_of(available[1]))}, frames {available[0]}-{available[1]})",
            )
        return media

    def _reel_media(self, cut: CutClip, reel: str) -> tuple[str, MediaClock, str] | str:
        """A reel's media URL, clock and timecode (once per reel: a cut of 10,000 events has a few
        hundred reels), or why it is offline."""
        assert self.edit.media is not None
        url = render_url(self.edit.media.pattern, {"reel": reel}, field="edit.media.pattern")
        self._check(url)
        if is_sequence_url(url):
            numbers = self._listing(cut, url)
            if not numbers:
                return f"offline: no frames of reel {reel} at {url}"
            timecode, stated = self._header(cut, parse_sequence_url(url).frame_url(numbers[0]))
            rate, origin_frame, available = (
                float(stated or self.edit.edl_rate()),
                numbers[0],
                (numbers[0], numbers[-1]),
            )
        else:
            if not self._exists(cut, url):
                return f"offline: reel {reel}: {url} not found"
            info = self._probe(cut, url)
            timecode, rate, origin_frame, available = (
                info.timecode,
                float(info.frame_rate),
                0,
                (0, info.frame_count - 1),
            )
        if timecode is None:
            raise SpecError(
                "edit.media.pattern",
                f"{cut.where.label()}: {url} states no timecode, so reel {reel}'s source timecode cannot be placed",
            )
        return (
            url,
            MediaClock(rate, otio.opentime.from_timecode(timecode, rate), origin_frame, available),
            timecode,
        )

    # -- helpers
    def _url(self, cut: CutClip, raw: str) -> str | Unusable:
        """``raw`` as a canonical URL (relative: against the timeline's folder), checked by the policy."""
        raw = raw.strip()
        if raw.lower().startswith("file:"):
            raw = urllib.parse.unquote(raw)
        if not raw:
            return Unusable(cut.where, "offline: the media reference names no file")
        if find_url_credentials(raw) is not None:  # never handed to a store, whose errors echo it
            return Unusable(
                cut.where,
                f"unusable media {redact_text(raw)!r}: {CREDENTIALS_IN_URL}",
            )
        inside = self.bundle.member_path(raw) if self.bundle is not None else None
        if inside is not None:  # read from the bundle (the policy saw edit.url), extracted here
            assert self.bundle is not None
            if not self.bundle.holds(inside):
                return Unusable(cut.where, f"offline: {inside} is not in the bundle {self.edit.url}")
            return self.bundle.local_url(inside)
        try:
            if urls.scheme(raw) is None and not raw.startswith("/"):
                folder = self.edit.url.rsplit("/", 1)[0] if "/" in self.edit.url else "."
                raw = raw if storage.is_local(folder) else storage.join(folder, raw)
                url = urls.canonical(raw, folder if storage.is_local(folder) else None)
            else:
                url = urls.canonical(raw)
            check_media_url(url)
            unshared = urls.unshared(url)
            if unshared is not None:  # memory://: no actor would see it
                raise ValueError(unshared)
        except (InputRefused, ValueError) as exc:
            return Unusable(cut.where, f"unusable media {raw!r}: {getattr(exc, 'reason', exc)}")
        self._check(url)
        return url

    def _check(self, url: str) -> None:
        if self.allowed is not None:
            self.allowed(url)

    def _listing(self, cut: CutClip, url: str) -> tuple[int, ...]:
        if url not in self._frames:
            try:
                self._frames[url] = tuple(f.number for f in list_frames(parse_sequence_url(url)))
            except (StorageError, MediaError) as exc:
                raise SpecError("edit", f"{cut.where.label()}: {exc}") from None
        return self._frames[url]

    def _exists(self, cut: CutClip, url: str) -> bool:
        try:
            return url in self._probes or storage.exists(url)
        except StorageError as exc:
            raise SpecError("edit", f"{cut.where.label()}: {exc}") from None

    def _probe(self, cut: CutClip, url: str) -> VideoInfo:
        if url not in self._probes:
            try:
                self._probes[url] = probe(url, limits=self.limits)
            except (MediaError, StorageError) as exc:
                raise SpecError("edit", f"{cut.where.label()}: {exc}") from None
        return self._probes[url]

    def _header(self, cut: CutClip, frame_url: str) -> tuple[str | None, Fraction | None]:
        """A plate frame's timecode and rate, from its header."""
        if frame_url not in self._headers:
            from pipeline.plates.imagefile import header_of, open_image
            from pipeline.plates.probe import header_rate, timecode_of

            suffix = "." + frame_url.rsplit(".", 1)[-1]
            try:
                with storage.fetched(frame_url, suffix) as path, open_image(path, frame_url) as image:
                    spec = header_of(image).spec
                    self._headers[frame_url] = (timecode_of(spec), header_rate(spec))
            except (MediaError, StorageError) as exc:
                raise SpecError("edit", f"{cut.where.label()}: {exc}") from None
        return self._headers[frame_url]


def _source_range(cut: CutClip) -> otio.opentime.TimeRange:
    try:
        return cut.clip.trimmed_range()
    except otio.exceptions.CannotComputeAvailableRangeError:
        raise SpecError("edit", f"{cut.where.label()}: no source range and no available range") from None


def _placed(cut: CutClip, url: str, clock: MediaClock) -> ClipMedia:
    """The clip's source range as frames of the media (not yet checked against what it has)."""
    source = _source_range(cut)
    first, last = clock.frame_at(source.start_time), clock.frame_at(source.end_time_exclusive()) - 1
    if last < first:
        raise SpecError("edit", f"{cut.where.label()}: its source range {source} holds no frame of {url}")
    return ClipMedia(url, is_sequence_url(url), clock, first, last)


def _inside(cut: CutClip, media: ClipMedia) -> ClipMedia:
    if media.outside:
        raise SpecError(
            "edit",
            f"{cut.where.label()}: frames {media.first}-{media.last} are outside {media.url}, which has "
            f"frames {media.available[0]}-{media.available[1]}",
        )
    return media
