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
from collections.abc import Callable, Iterator
from typing import Any, cast

import numpy as np

from pipeline.chunking import Chunk
from pipeline.decode import Frame
from pipeline.encode import EncoderChoice
from pipeline.errors import RecastError
from pipeline.probe import VideoInfo
from pipeline.stages import OrderedPool, StageTimes, run_stages

FrameFile = tuple[int, str, int]
"""(frame number, sha256, bytes) of one frame written."""


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

    def converter(self, info: VideoInfo) -> Any:
        """The shot's plate <-> model colour converter (OCIO processors)."""
        from pipeline.plates.colour import PlateConverter

        assert info.sequence is not None
        seq = info.sequence
        key = (seq.colour, seq.format, seq.pixel_type, seq.bits)
        if key not in self._converters:
            self._converters[key] = PlateConverter(seq.colour, seq)
        return self._converters[key]

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
        render_rgb: Callable[[list[Frame]], list[np.ndarray] | None],
        output_url: str,
        compression: str | None,
        *,
        batch_size: int,
        queue_batches: int,
    ) -> tuple[tuple[str, int, int], dict[str, float], StageTimes, list[FrameFile]]:
        """Render ``frames`` and write each one; ((sha256 of the list, bytes, frames), stage seconds,
        stage times, the frames written)."""
        import time

        from pipeline.plates.frames import PlateFrame, frame_compression, merge_back, write_plate
        from pipeline.plates.sequence import parse_sequence_url

        converter = self.converter(info)
        output = parse_sequence_url(output_url)

        def render(batch: list[Frame]) -> list[tuple[PlateFrame, np.ndarray | None]]:
            outs = render_rgb(batch)
            plates = cast(list[PlateFrame], batch)
            return list(zip(plates, outs if outs is not None else [None] * len(plates), strict=True))

        def write(item: tuple[PlateFrame, np.ndarray | None]) -> FrameFile:
            frame, out = item
            pixels = frame.pixels if out is None or out is frame.rgb else merge_back(frame, out, converter)
            own = frame_compression(frame.spec.getattribute("compression"), compression)
            sha, size = write_plate(output.frame_url(frame.pts), pixels, frame.spec, compression=own)
            return frame.pts, sha, size

        with OrderedPool[FrameFile](self.threads) as writer:
            times = run_stages(
                frames,
                render,
                lambda item: writer.submit(write, item),
                batch_size=batch_size,
                queue_batches=queue_batches,
            )
            tail_started = time.perf_counter()
            files = writer.results()
            tail = time.perf_counter() - tail_started
        if len(files) != chunk.frame_count:
            raise RecastError(
                f"{info.url}: chunk {chunk.index} wrote {len(files)} frames, expected {chunk.frame_count}"
            )
        listing = "".join(f"{n} {h}\n" for n, h, _ in files)
        written = (hashlib.sha256(listing.encode()).hexdigest(), sum(b for _, _, b in files), len(files))
        stages = {
            "read": times.read_seconds,
            "render": times.process_seconds,
            "write": times.write_seconds + tail,
        }
        return written, stages, times, files
