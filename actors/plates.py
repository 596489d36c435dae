"""Image-sequence plates in a render actor: frames read in parallel, rendered, written whole.

Frames are read and converted to the models' colour space on reader threads
(:func:`pipeline.plates.frames.read_plates`); each rendered frame goes back to the
plate's own values where the faces changed it and keeps the source's exact pixels
elsewhere (:func:`pipeline.plates.frames.merge_back`), and is written whole under its
own frame number on writer threads (a temporary name, then a rename or one PUT).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from actors.batches import Rendered
from actors.results import FrameFile
from actors.review import ReviewSegment
from pipeline.errors import RecastError
from pipeline.stages import OrderedPool, StageTimes, run_stages
from pipeline.video.chunking import Chunk
from pipeline.video.decode import Frame
from pipeline.video.encode import EncoderChoice
from pipeline.video.probe import VideoInfo


@dataclass(frozen=True)
class WrittenFrames:
    """What :meth:`PlateFrames.render` wrote of one chunk, and how long each stage took."""

    frames: tuple[FrameFile, ...]
    """The output's frames, in order."""
    passes: dict[str, tuple[FrameFile, ...]]
    """The matte and face passes' frames, by pass."""
    stages: dict[str, float]
    """``read``, ``render`` and ``write`` seconds."""
    times: StageTimes

    @property
    def listing_sha256(self) -> str:
        """sha256 of the output's frame listing (``"<number> <sha256>\\n"`` per frame)."""
        return hashlib.sha256("".join(f"{n} {h}\n" for n, h, _ in self.frames).encode()).hexdigest()

    @property
    def bytes(self) -> int:
        return sum(f.bytes for f in self.frames)


def frames_writer(info: VideoInfo) -> EncoderChoice:
    """What writes an image sequence's frames: OpenImageIO, in the source's format (keys and reports)."""
    assert info.sequence is not None
    return EncoderChoice(
        name=f"oiio-{info.sequence.format}",
        pix_fmt=info.pix_fmt,
        options={},
        hardware=False,
        container=info.sequence.format,
    )


class PlateFrames:
    """An actor's plate I/O: colour converters (built once per colour setting) and I/O threads."""

    def __init__(self, codec_threads: int = 0) -> None:
        self.threads = max(2, codec_threads or os.cpu_count() or 2)
        self._converters: dict[Any, Any] = {}
        self._headers: dict[Any, Any] = {}

    def converter(self, info: VideoInfo) -> Any:
        """The shot's plate <-> model colour converter (OCIO processors)."""
        from pipeline.plates.colour import PlateConverter

        assert info.sequence is not None
        seq = info.sequence
        key = (seq.colour, seq.format, seq.pixel_type, seq.bits)
        if key not in self._converters:
            self._converters[key] = PlateConverter(seq.colour, seq)
        return self._converters[key]

    def pass_header(self, info: VideoInfo) -> Any:
        """The shot's :class:`~pipeline.passes.layers.PassHeader`, made once per colour setting and rate
        (its OCIO config read once, as the converter's, not once per chunk)."""
        from pipeline.passes.layers import pass_header

        assert info.sequence is not None
        key = (info.sequence.colour, info.frame_rate)
        if key not in self._headers:
            self._headers[key] = pass_header(info)
        return self._headers[key]

    def decode(self, info: VideoInfo, chunk: Chunk) -> Iterator[Frame]:
        """Frames of ``chunk`` (:class:`~pipeline.plates.frames.PlateFrame`), in order."""
        from pipeline.plates.frames import read_plates

        return read_plates(
            info, chunk.start_frame, chunk.end_frame, self.converter(info), threads=self.threads
        )

    def render(
        self,
        info: VideoInfo,
        chunk: Chunk,
        frames: Iterator[Frame],
        batches: Callable[[list[Frame]], list[Rendered]],
        *,
        output_url: str,
        compression: str | None,
        pass_urls: Mapping[str, str],
        batch_size: int,
        queue_batches: int,
        review: ReviewSegment | None = None,
        ai_label: str | None = None,
    ) -> WrittenFrames:
        """Render ``frames`` and write each one to ``output_url``'s frame name, and its matte and face
        pass frames when asked (``pass_urls``: pass -> frame pattern); ``review``: each frame also
        to the chunk's review segment, in order; ``ai_label``: the job id stated in the AI-modified
        header attribute of every frame whose faces were replaced (None: no attribute)."""
        import time

        from pipeline.plates.frames import PlateFrame, frame_compression, merge_back, write_plate
        from pipeline.plates.sequence import parse_sequence_url
        from pipeline.provenance.sidecar import AI_ATTRIBUTES, ai_header_attributes

        converter = self.converter(info)
        output = parse_sequence_url(output_url)
        layers = {
            name: parse_sequence_url(url) for name, url in pass_urls.items() if name in ("matte", "face")
        }
        header = self.pass_header(info) if layers else None
        # Cineon has no header field to say it: its frames are covered by the sidecar alone.
        marked = (
            ai_header_attributes(output.ext, job_id=ai_label)
            if ai_label is not None and output.ext in AI_ATTRIBUTES
            else None
        )

        def write(item: Rendered) -> tuple[FrameFile, dict[str, FrameFile]]:
            frame = cast(PlateFrame, item.frame)
            pixels = frame.pixels if item.out is None else merge_back(frame, item.out, converter)
            own = frame_compression(frame.spec.getattribute("compression"), compression)
            attributes = marked if item.out is not None else None  # only frames whose faces were replaced
            sha, size = write_plate(
                output.frame_url(frame.pts), pixels, frame.spec, compression=own, attributes=attributes
            )
            written = FrameFile(frame.pts, sha, size)
            if not layers:
                return written, {}
            passes = write_layers(
                frame.pixels,
                pixels,
                item.matte,
                number=frame.pts,
                patterns=layers,
                header_spec=frame.spec,
                to_pass=converter.to_pass,
                pass_header=header,
                rgb=converter.rgb,
            )
            return written, passes

        def put(item: Rendered) -> None:  # on the write stage's thread: frames in order
            if review is not None:
                review.write(item)
            writer.submit(write, item)

        with OrderedPool[tuple[FrameFile, dict[str, FrameFile]]](self.threads) as writer:
            times = run_stages(
                frames,
                batches,
                put,
                batch_size=batch_size,
                queue_batches=queue_batches,
            )
            tail_started = time.perf_counter()
            results = writer.results()
            tail = time.perf_counter() - tail_started
        passes: dict[str, list[FrameFile]] = {}
        for _, layer_files in results:
            for name, file in layer_files.items():
                passes.setdefault(name, []).append(file)
        main = tuple(file for file, _ in results)
        if len(main) != chunk.frame_count:
            raise RecastError(
                f"{info.url}: chunk {chunk.index} wrote {len(main)} frames, expected {chunk.frame_count}"
            )
        stages = {
            "read": times.read_seconds,
            "render": times.process_seconds,
            "write": times.write_seconds + tail,
        }
        return WrittenFrames(
            frames=main, passes={k: tuple(v) for k, v in passes.items()}, stages=stages, times=times
        )


def write_layers(
    plate: np.ndarray,
    out: np.ndarray,
    matte: np.ndarray | None,
    *,
    number: int,
    patterns: Mapping[str, Any],
    header_spec: Any,
    to_pass: Callable[[np.ndarray], np.ndarray],
    pass_header: Any,
    rgb: tuple[int, int, int] = (0, 1, 2),
) -> dict[str, FrameFile]:
    """The matte and face pass frames of one frame (``plate`` rendered as ``out``), each written whole
    as frame ``number`` of its pattern (``patterns``: pass -> :class:`SequencePattern`); an image
    sequence's and a video's alike.  ``header_spec``: the frame's header (an ``oiio.ImageSpec``: size,
    timing); ``to_pass``: RGB to the face pass's scene-linear space; ``pass_header``: the shot's
    :class:`~pipeline.passes.layers.PassHeader`; ``rgb``: the plate's RGB channels."""
    from pipeline.passes.layers import pass_dtype, sequence_pass_pixels, sequence_pass_spec
    from pipeline.plates.frames import write_plate

    height, width = out.shape[:2]
    a = np.zeros((height, width), np.float32) if matte is None else matte
    values = sequence_pass_pixels(plate, out, a, rgb, to_pass)
    written = {}
    for name, pattern in patterns.items():
        spec = sequence_pass_spec(header_spec, name, plate.dtype, pass_header)
        sha, size = write_plate(
            pattern.frame_url(number), values[name].astype(pass_dtype(name, plate.dtype)), spec
        )
        written[name] = FrameFile(number, sha, size)
    return written
