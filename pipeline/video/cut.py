"""Cut a chunk's frames back out of a merged movie by stream copy: the inverse of the merge.

A merge (:mod:`pipeline.video.merge`) copies every segment's packets into the
output unchanged, each segment starting at a keyframe.  So a chunk that an
earlier run rendered can be taken back out of the published output instead of
being rendered again: the packets of its frames, byte for byte, in a segment
file of their own, timed from 0 as the encoder wrote it.  A resubmission with
changed fixes uses this for the chunks no fix touches once their segments are
gone (:mod:`cluster.state.recover`).

Only what the merge wrote can be cut: the frames must be one run of packets in
decode order starting at a keyframe.  Anything else raises MediaError, and the
chunk is rendered again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

import av

from pipeline.colour import mux_options
from pipeline.errors import MediaError
from pipeline.video.merge import output_format, segment_colour
from pipeline.video.probe import open_container, video_stream


@dataclass(frozen=True)
class Cut:
    """Output frames ``[first, first + count)`` (presentation order) of a merged movie, and the local
    file to write them to (its extension picks the container)."""

    first: int
    count: int
    path: str

    @property
    def label(self) -> str:
        return f"frames {self.first}-{self.first + self.count - 1}"


def cut_segments(path: str, cuts: Sequence[Cut], *, url: str) -> list[int]:
    """Write each cut with the video packets of its frames of the local movie ``path`` (``url``: its
    name in errors), in two passes over the movie whatever the number of cuts; returns the frames
    each cut holds.

    The packets are copied unchanged, their timestamps moved so the cut's first frame is at 0; the
    codec headers, colour tags and ProRes fourcc are the movie's.  Raises MediaError when a cut's
    frames are outside the movie or are not one run of packets from a keyframe (not a chunk the merge
    wrote); nothing is written then.
    """
    with open_container(path) as container:
        stream = video_stream(url, container)
        # First pass: every packet's pts and whether it is a keyframe, in decode order.
        timing = [(int(p.pts or 0), p.is_keyframe) for p in container.demux(stream) if _usable(p)]
    order = sorted(pts for pts, _ in timing)
    owner: dict[int, int] = {}  # packet (decode order) -> cut
    for n, cut in enumerate(cuts):
        if cut.first < 0 or cut.count < 1 or cut.first + cut.count > len(order):
            raise MediaError(url, f"{cut.label} are outside its {len(order)} frames")
        wanted = set(order[cut.first : cut.first + cut.count])
        picked = [i for i, (pts, _) in enumerate(timing) if pts in wanted]
        if picked != list(range(picked[0], picked[0] + len(picked))) or not timing[picked[0]][1]:
            raise MediaError(
                url, f"{cut.label} are not one run of packets from a keyframe; they cannot be cut out"
            )
        owner.update(dict.fromkeys(picked, n))
    written = [0] * len(cuts)
    with open_container(path) as container, contextlib.ExitStack() as stack:
        stream = video_stream(url, container)
        colour = segment_colour(path, stream)
        outs: list[tuple[av.container.OutputContainer, av.VideoStream, int]] = []
        for cut in cuts:
            fmt = output_format(cut.path)
            out = stack.enter_context(
                av.open(cut.path, mode="w", format=fmt, options=mux_options(fmt, colour))
            )
            out_stream = out.add_stream_from_template(stream)
            ctx = out_stream.codec_context
            ctx.color_primaries, ctx.color_trc, ctx.colorspace, ctx.color_range = colour.codes()
            out_stream.time_base = stream.time_base
            if stream.codec_context.name == "prores":
                ctx.codec_tag = stream.codec_context.codec_tag
            if stream.average_rate:
                ctx.framerate = stream.average_rate
            outs.append((out, out_stream, order[cut.first]))
        index = 0
        for packet in container.demux(stream):
            if not _usable(packet):
                continue
            which = owner.get(index)
            index += 1
            if which is None:
                continue
            target, target_stream, origin = outs[which]
            packet.pts = int(packet.pts or 0) - origin
            packet.dts = int(packet.dts or 0) - origin
            packet.stream = target_stream
            target.mux(packet)
            written[which] += 1
    return written


def _usable(packet: av.Packet) -> bool:
    return bool(packet.size) and packet.pts is not None and packet.dts is not None
