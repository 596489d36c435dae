"""Which decoder reads a video source: PyAV (FFmpeg on the CPU) or NVDEC (NVIDIA's hardware decoder).

``decode.backend`` (:class:`DecodeConfig`; the job spec's ``decode`` block, handed to
every actor in :class:`~actors.render.RenderConfig` beside ``codec_threads``):

* ``auto`` (default): NVDEC where it can serve, PyAV otherwise.  NVDEC serves when
  the ``PyNvVideoCodec`` package imports and a CUDA device exists on the actor
  (:func:`nvdec_runtime_problem`) and the source is one NVDEC decodes
  (:func:`nvdec_source_problem`: H.264, HEVC, AV1, VP9 or MPEG-2 video at 8 or 10
  bits, 4:2:0).  Each fallback is a warning in the job summary:
  ``NVDEC unavailable: <reason>; decoding with PyAV``.
* ``pyav``: always PyAV (what every job did before NVDEC; no warning).
* ``nvdec``: NVDEC or nothing: a video source NVDEC cannot decode, CPU-only actors, or
  an actor without the package or a CUDA device is a :class:`SpecError` naming
  ``decode.backend`` and the reason, raised before any chunk is decoded.

Image sequences are read by OpenImageIO whatever the backend: no warning, no error.

Both decoders yield the same :class:`~pipeline.video.decode.Frame` objects for a range:
same count, same pts, and the same RGB (NVDEC's YUV goes through the very swscale
conversion PyAV's does; :mod:`pipeline.video.nvdec`).  This module imports neither torch
nor the NVIDIA package unless asked to check for them.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from collections.abc import Iterator, Sequence
from typing import Literal

from pipeline.configbase import Frozen
from pipeline.errors import SpecError
from pipeline.video.decode import Frame, decode_range
from pipeline.video.probe import VideoInfo

log = logging.getLogger(__name__)

DecodeBackend = Literal["auto", "pyav", "nvdec"]
NVDEC_PACKAGE = "PyNvVideoCodec"
NVDEC_CODECS: tuple[str, ...] = ("h264", "hevc", "av1", "vp9", "mpeg2video")
"""FFmpeg codec names NVDEC decodes on every GPU generation this project targets (A100 and later)."""
NVDEC_PIX_FMTS: dict[str, str] = {"yuv420p": "8-bit", "yuvj420p": "8-bit", "yuv420p10le": "10-bit"}
"""Source pixel formats the NVDEC path handles: 4:2:0 at 8 or 10 bits."""
_MAX_SIDE = {"h264": 4096, "mpeg2video": 4080}  # NVDEC's largest frame side per codec; others 8192
_MAX_SIDE_DEFAULT = 8192


class DecodeConfig(Frozen):
    """``decode``: how video sources are decoded (see the module docstring)."""

    backend: DecodeBackend = "auto"
    """``auto``: NVDEC where available, else PyAV with a warning; ``pyav``: always PyAV;
    ``nvdec``: NVDEC or an error before rendering."""


def fallback_warning(reason: str) -> str:
    """The summary's line for an ``auto`` fallback."""
    return f"NVDEC unavailable: {reason}; decoding with PyAV"


def nvdec_source_problem(info: VideoInfo) -> str | None:
    """Why NVDEC cannot decode this source (None: it can)."""
    if info.sequence is not None:
        return "image sequences are read with OpenImageIO, not a video decoder"
    if info.codec not in NVDEC_CODECS:
        return f"NVDEC does not decode {info.codec} (it decodes {', '.join(NVDEC_CODECS)})"
    if info.pix_fmt not in NVDEC_PIX_FMTS:
        return f"pixel format {info.pix_fmt}: the NVDEC path handles 8/10-bit 4:2:0 ({', '.join(NVDEC_PIX_FMTS)})"
    if info.codec == "h264" and info.bit_depth > 8:
        return "NVDEC decodes 8-bit H.264 only"
    if info.width % 2 or info.height % 2:
        return f"odd frame size {info.width}x{info.height} (4:2:0 NVDEC output needs even sides)"
    side = _MAX_SIDE.get(info.codec, _MAX_SIDE_DEFAULT)
    if max(info.width, info.height) > side:
        return f"{info.width}x{info.height} exceeds NVDEC's {side} px limit for {info.codec}"
    return None


def nvdec_runtime_problem(device_id: int = 0) -> str | None:
    """Why NVDEC cannot run in this process (None: it can): package, CUDA device, package load."""
    if importlib.util.find_spec(NVDEC_PACKAGE) is None:
        return f"the {NVDEC_PACKAGE} package is not installed (pip install 'recast[gpu]')"
    try:
        import torch
    except ImportError:
        return "torch is not installed (the NVDEC path hands frames over through torch)"
    if not torch.cuda.is_available():
        return "no CUDA device (torch.cuda.is_available() is False)"
    count = torch.cuda.device_count()
    if device_id >= count:
        return f"CUDA device {device_id} does not exist ({count} device(s); models.execution.device_id)"
    try:
        importlib.import_module(NVDEC_PACKAGE)
    except (ImportError, RuntimeError, OSError) as exc:  # a missing driver library: RuntimeError
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"{NVDEC_PACKAGE} failed to load: {first}"
    return None


def check_decode_spec(
    config: DecodeConfig, gpus_per_actor: float | None, shots: Sequence[tuple[str, VideoInfo]]
) -> None:
    """The checks of ``decode.backend: nvdec`` that need no Ray: GPU actors, and sources NVDEC decodes.

    Raises SpecError naming ``decode.backend``; nothing for ``auto`` and ``pyav``.  Image
    sequences pass: OpenImageIO reads them whatever the video decoder."""
    if config.backend != "nvdec":
        return
    if gpus_per_actor == 0:
        raise SpecError("decode.backend", "nvdec needs GPU actors, but resources.gpus_per_actor is 0")
    for name, info in shots:
        problem = nvdec_source_problem(info) if info.sequence is None else None
        if problem is not None:
            raise SpecError("decode.backend", f"nvdec cannot decode shot {name}: {problem}; use auto or pyav")


def source_warnings(
    config: DecodeConfig, nvdec_ready: bool, shots: Sequence[tuple[str, VideoInfo]]
) -> list[str]:
    """``auto``'s per-shot fallbacks where the actors have NVDEC but a video source is not for it.

    (When the actors have no NVDEC at all, their own set-up warning says so once; image
    sequences are never a video decoder's, so they get no line.)"""
    if config.backend != "auto" or not nvdec_ready:
        return []
    out = []
    for name, info in shots:
        problem = nvdec_source_problem(info) if info.sequence is None else None
        if problem is not None:
            out.append(fallback_warning(f"shot {name}: {problem}"))
    return out


class VideoDecoder:
    """An actor's decoder choice, made once at set-up; :meth:`frames` decodes with it per source.

    Raises SpecError (field ``decode.backend``) when ``nvdec`` is asked for and
    cannot run here.  ``warnings``: the ``auto`` fallback line, for the summary.
    """

    def __init__(self, config: DecodeConfig, device_id: int = 0) -> None:
        self.config = config
        self.device_id = device_id
        self.runtime_problem = nvdec_runtime_problem(device_id) if config.backend != "pyav" else None
        self.warnings: list[str] = []
        if config.backend == "nvdec" and self.runtime_problem is not None:
            raise SpecError("decode.backend", f"nvdec requested but unavailable: {self.runtime_problem}")
        if config.backend == "auto" and self.runtime_problem is not None:
            self.warnings.append(fallback_warning(self.runtime_problem))
            log.warning("%s", self.warnings[-1])

    @property
    def nvdec_ready(self) -> bool:
        """Whether NVDEC serves sources it decodes."""
        return self.config.backend != "pyav" and self.runtime_problem is None

    def backend_for(self, info: VideoInfo) -> Literal["pyav", "nvdec"]:
        """The decoder this source is read with."""
        if not self.nvdec_ready:
            return "pyav"
        problem = nvdec_source_problem(info)
        if problem is None:
            return "nvdec"
        if self.config.backend == "nvdec":  # the driver's checks refuse this before Ray; kept for direct use
            raise SpecError("decode.backend", f"nvdec cannot decode {info.url}: {problem}")
        return "pyav"

    def frames(self, url: str, info: VideoInfo, start: int, end: int, *, threads: int = 0) -> Iterator[Frame]:
        """Frames ``[start, end)`` of ``url`` (:func:`~pipeline.video.decode.decode_range`'s contract)."""
        if self.backend_for(info) == "nvdec":
            from pipeline.video.nvdec import nvdec_range

            return nvdec_range(url, info, start, end, device_id=self.device_id)
        return decode_range(url, info, start, end, threads=threads)
