"""Frame-exact range decoding on NVIDIA's hardware decoder (NVDEC, through ``PyNvVideoCodec``).

:func:`nvdec_range` keeps :func:`~pipeline.video.decode.decode_range`'s contract: frames
``[start, end)`` by index into ``VideoInfo.pts``, the same seek (keyframe at or
before ``start``; one keyframe earlier while a seek lands after the target), the
same checks and :class:`~pipeline.video.decode.Frame` objects.  What differs is where the
bitstream is decoded:

* PyAV demuxes (the one demuxer both paths share, so packets and pts are the same);
  H.264/HEVC packets from MP4/MOV/MKV pass through FFmpeg's ``*_mp4toannexb``
  bitstream filter, which NVDEC's parser needs;
* NVDEC decodes into device memory (NV12, or P016 for 10-bit: the value in the
  high bits of 16), on torch's current CUDA stream;
* :func:`planes_from_surface` splits the surface into Y, U and V planes on the
  device (10-bit shifted down to its 10-bit value) and downloads them: 1.5 samples
  per pixel, half of what the RGB frame weighs;
* the planes become the ``yuv420p``/``yuv420p10le`` frame libavcodec would have
  produced (:func:`yuv_frame`), with the tags libavcodec sets on it (chroma siting
  among them: swscale reads it; one frame per range is decoded on the CPU to learn
  them), and go through the same swscale call as ``decode_range``'s.

H.264, HEVC, AV1, VP9 and MPEG-2 decoding is bit-exact by the standards, so the
frames should equal PyAV's; the CPU tests prove it for every step after the
hardware decoder (packets decodable without the container's extradata, surface
-> planes -> RGB), the GPU tests for NVDEC itself.  The colour conversion stays
swscale's on purpose: measured against it, a float BT.709 conversion with nearest
chroma is off by up to 3 levels at 8 bits and far more at 10 (swscale filters the
chroma there), and outputs must stay byte-identical.

Imports torch; ``PyNvVideoCodec`` only when decoding, so the helpers run (and are
tested) on any machine.  The frames are handed over on the host, as ``decode_range``'s:
the device renderer uploads them again (a device-resident hand-over is not built).
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import av
import numpy as np
import torch

from pipeline.errors import MediaError
from pipeline.video.decode import DecodeConversion, Frame, check_decoded
from pipeline.video.probe import VideoInfo, open_container, video_stream

log = logging.getLogger(__name__)

_NV_CODECS = {"h264": "H264", "hevc": "HEVC", "av1": "AV1", "vp9": "VP9", "mpeg2video": "MPEG2"}
_ANNEXB = {"h264": "h264_mp4toannexb", "hevc": "hevc_mp4toannexb"}


def planes_from_surface(
    surface: torch.Tensor, height: int, width: int, bit_depth: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Y, U, V planes (host arrays) of an NV12 (8-bit) or P016 (deeper) surface.

    ``surface``: ``(rows, width)`` with the luma rows first and the interleaved
    chroma rows from row ``height``; uint8 for NV12, 16-bit samples for P016 (as
    int16/uint16, or as uint8 pairs, little-endian) whose value sits in the high
    bits.  Returns uint8 planes, or uint16 holding the ``bit_depth``-bit value.
    """
    if surface.ndim == 3 and surface.shape[-1] == 1:
        surface = surface[..., 0]
    deep = bit_depth > 8
    if deep and surface.dtype == torch.uint8:
        surface = surface.contiguous().view(torch.int16)  # pairs of bytes -> one 16-bit sample
    if surface.ndim != 2 or surface.shape[0] < height + height // 2 or surface.shape[1] < width:
        raise ValueError(
            f"decoded surface {tuple(surface.shape)} does not hold a {width}x{height} 4:2:0 frame"
        )
    if deep:
        # 16-bit samples as int32, so the shift is logical whatever torch's 16-bit dtype
        surface = (surface.to(torch.int32) & 0xFFFF) >> (16 - bit_depth)
    chroma = surface[height : height + height // 2, :width].reshape(height // 2, width // 2, 2)
    parts = (surface[:height, :width], chroma[..., 0], chroma[..., 1])
    dtype = torch.int16 if deep else torch.uint8  # 10-bit values fit int16; read back as uint16
    flat = torch.cat([p.to(dtype).reshape(-1) for p in parts]).cpu().numpy()
    if deep:
        flat = flat.view(np.uint16)
    y_size, c_size = height * width, (height // 2) * (width // 2)
    return (
        flat[:y_size].reshape(height, width),
        flat[y_size : y_size + c_size].reshape(height // 2, width // 2),
        flat[y_size + c_size :].reshape(height // 2, width // 2),
    )


FRAME_TAGS = ("color_primaries", "color_trc", "colorspace", "color_range", "chroma_location")
"""What libavcodec sets on a decoded frame besides its pixels; swscale reads them (the chroma
siting moves every chroma sample, so a frame without it converts differently)."""


def frame_tags(frame: av.VideoFrame) -> dict[str, int]:
    """A decoded frame's :data:`FRAME_TAGS`, to give NVDEC's frames."""
    return {name: int(getattr(frame, name)) for name in FRAME_TAGS}


def yuv_frame(planes: Sequence[np.ndarray], pix_fmt: str, pts: int, tags: dict[str, int]) -> av.VideoFrame:
    """The PyAV frame libavcodec would have decoded: ``planes`` (Y, U, V) in ``pix_fmt``, ``pts``, ``tags``."""
    height, width = planes[0].shape
    frame = av.VideoFrame(width, height, pix_fmt)
    for plane, data in zip(frame.planes, planes, strict=True):
        rows = np.frombuffer(memoryview(plane), dtype=data.dtype).reshape(data.shape[0], -1)
        rows[:, : data.shape[1]] = data
    frame.pts = pts
    for name, value in tags.items():
        setattr(frame, name, value)
    return frame


class RgbConverter:
    """YUV planes of a source's frame -> its RGB pixels and the frame they came from, by the very
    conversion of :func:`~pipeline.video.decode.decode_range` (:class:`~pipeline.video.decode.DecodeConversion`)."""

    def __init__(self, info: VideoInfo, tags: dict[str, int]) -> None:
        self.pix_fmt = info.pix_fmt
        self.tags = tags
        self.conversion = DecodeConversion(info)

    def __call__(self, planes: Sequence[np.ndarray], pts: int) -> tuple[np.ndarray, av.VideoFrame]:
        frame = yuv_frame(planes, self.pix_fmt, pts, self.tags)
        return self.conversion.to_rgb(frame), frame


def nvdec_range(url: str, info: VideoInfo, start: int, end: int, *, device_id: int = 0) -> Iterator[Frame]:
    """Yield exactly frames ``[start, end)`` of a local or fsspec source, decoded by NVDEC.

    Same contract and errors as :func:`~pipeline.video.decode.decode_range`; the caller
    has checked the source with :func:`pipeline.video.decoders.nvdec_source_problem`.
    """
    if not (0 <= start < end <= info.frame_count):
        raise MediaError(url, f"frame range [{start}, {end}) outside 0-{info.frame_count}")
    want = info.pts[start:end]
    stop_pts = info.pts[end] if end < info.frame_count else None
    k = bisect.bisect_right(info.keyframes, start) - 1
    with open_container(url) as container:
        stream = video_stream(url, container)
        for other in container.streams:
            if other.index != stream.index:
                other.discard = av.stream.Discard.all
        to_rgb = RgbConverter(
            info, _first_frame_tags(url, container, stream, info.pts[info.keyframes[max(k, 0)]])
        )
        while True:
            seek_pts = info.pts[info.keyframes[k]] if k >= 0 else None
            decoded = _decode_from(url, container, stream, seek_pts, info, device_id)
            first = next(decoded, None)
            if first is None:
                raise MediaError(url, f"truncated or corrupt: no frame decodable after frame {start}")
            if first[0] > want[0]:
                if k < 0:
                    raise MediaError(url, f"frame {start} (pts {want[0]}) cannot be decoded")
                log.debug("%s: NVDEC seek landed at pts %s after %s; seeking earlier", url, first[0], want[0])
                k -= 1
                continue
            break
        produced = 0
        for pts, planes in _chain(first, decoded):
            if pts < want[0]:
                continue
            if stop_pts is not None and pts >= stop_pts:
                break
            if produced >= len(want) or pts != want[produced]:
                expected = want[produced] if produced < len(want) else "none"
                raise MediaError(url, f"frame {start + produced}: NVDEC pts {pts}, index says {expected}")
            rgb, yuv = to_rgb(planes, pts)
            yield Frame(index=start + produced, pts=pts, rgb=rgb, yuv=yuv)
            produced += 1
            if produced == len(want):
                break
        check_decoded(url, info, start, produced=produced, wanted=len(want))


def _first_frame_tags(
    url: str, container: av.container.InputContainer, stream: av.VideoStream, seek_pts: int
) -> dict[str, int]:
    """The tags libavcodec gives this stream's frames: one frame decoded on the CPU per range."""
    container.seek(seek_pts, stream=stream, backward=True)
    try:
        for packet in container.demux(stream):
            for frame in packet.decode():
                return frame_tags(frame)
    except (av.error.FFmpegError, OSError) as exc:
        raise MediaError(url, f"truncated or corrupt: {exc}") from exc
    finally:
        stream.codec_context.flush_buffers()
    raise MediaError(url, "truncated or corrupt: no frame decodable")


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


def device_surfaces(url: str, info: VideoInfo, *, device_id: int = 0) -> Iterator[tuple[int, torch.Tensor]]:
    """(pts, surface) of every frame of the source in order, as NVDEC leaves it in device memory.

    A surface is NV12 (uint8) or P016 (16-bit samples), ``(height * 3 / 2, width)``
    or wider; it is valid until the next item is asked for.  What the benchmark
    times as NVDEC's own rate (no download, no colour conversion)."""
    with open_container(url) as container:
        yield from _surfaces(url, container, video_stream(url, container), None, info, device_id)


def _decode_from(
    url: str,
    container: av.container.InputContainer,
    stream: av.VideoStream,
    seek_pts: int | None,
    info: VideoInfo,
    device_id: int,
) -> Iterator[tuple[int, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """(pts, host planes) of every frame NVDEC decodes from the keyframe at or before ``seek_pts``."""
    for pts, surface in _surfaces(url, container, stream, seek_pts, info, device_id):
        yield pts, planes_from_surface(surface, info.height, info.width, info.bit_depth)


def _surfaces(
    url: str,
    container: av.container.InputContainer,
    stream: av.VideoStream,
    seek_pts: int | None,
    info: VideoInfo,
    device_id: int,
) -> Iterator[tuple[int, torch.Tensor]]:
    """(pts, device surface) of every frame from the keyframe at or before ``seek_pts`` (None: the start).

    A new decoder (and bitstream filter) per seek: nothing of an earlier position
    is carried over.  NVDEC works on torch's current stream of the device, so what
    torch does with a surface is ordered after its decoding."""
    import PyNvVideoCodec as nvc

    cuda_stream = torch.cuda.current_stream(torch.device("cuda", device_id))
    decoder = nvc.CreateDecoder(
        gpuid=device_id,
        codec=getattr(nvc.cudaVideoCodec, _NV_CODECS[info.codec]),
        cudacontext=0,
        cudastream=cuda_stream.cuda_stream,
        usedevicememory=True,
    )
    try:
        for packet in annexb_packets(container, stream, seek_pts, info.codec):
            for surface in decoder.Decode(_packet_data(nvc, packet)):
                yield _signed(surface.getPTS()), torch.from_dlpack(surface)
        for surface in decoder.Decode(nvc.PacketData()):  # an empty packet: end of stream, the rest comes out
            yield _signed(surface.getPTS()), torch.from_dlpack(surface)
    except (av.error.FFmpegError, OSError) as exc:
        log.warning("%s: NVDEC decode stopped: %s", url, exc)
        return


def annexb_packets(
    container: av.container.InputContainer, stream: av.VideoStream, seek_pts: int | None, codec: str
) -> Iterator[av.Packet]:
    """The stream's packets from the keyframe at or before ``seek_pts`` (None: the start), as NVDEC's
    parser reads them: H.264/HEVC stored length-prefixed (avcC/hvcC: MP4, MOV, MKV) are rewritten
    to start codes with the parameter sets in front of keyframes (``*_mp4toannexb``); the rest as stored.
    """
    extradata = stream.codec_context.extradata or b""
    name = _ANNEXB.get(codec) if extradata[:1] == b"\x01" else None
    bsf = av.BitStreamFilterContext(name, stream) if name is not None else None
    # h264_mp4toannexb puts SPS/PPS before IDR frames only: an open-GOP seek point (an I-frame
    # with a recovery point) would reach the decoder without them, so the first packet gets them.
    lead = _avcc_parameter_sets(extradata) if name == "h264_mp4toannexb" else b""
    container.seek(seek_pts if seek_pts is not None else 0, stream=stream, backward=True)
    for packet in container.demux(stream):
        # demux ends with an empty packet: the filter's flush
        for one in [packet] if bsf is None else bsf.filter(packet if packet.size else None):
            if not one.size:
                continue
            if lead:
                one, lead = _prefixed(lead, one), b""
            yield one


def _avcc_parameter_sets(extradata: bytes) -> bytes:
    """The SPS and PPS of an avcC record, each behind a start code."""
    out, pos = [], 5
    for count_mask in (0x1F, 0xFF):  # SPS count (low 5 bits), then PPS count
        if pos >= len(extradata):
            break
        count, pos = extradata[pos] & count_mask, pos + 1
        for _ in range(count):
            size = int.from_bytes(extradata[pos : pos + 2], "big")
            out.append(b"\0\0\0\1" + extradata[pos + 2 : pos + 2 + size])
            pos += 2 + size
    return b"".join(out)


def _prefixed(lead: bytes, packet: av.Packet) -> av.Packet:
    joined = av.Packet(lead + bytes(packet))
    joined.pts, joined.dts, joined.time_base = packet.pts, packet.dts, packet.time_base
    return joined


def _signed(timestamp: int) -> int:
    """NVDEC carries timestamps as unsigned 64-bit: a negative pts (MP4 B-frame delay) comes back wrapped."""
    return (int(timestamp) + 2**63) % 2**64 - 2**63


def _packet_data(nvc: Any, packet: av.Packet) -> Any:
    data = nvc.PacketData()
    data.bsl_data = packet.buffer_ptr
    data.bsl = packet.buffer_size
    data.pts = packet.pts if packet.pts is not None else 0
    return data
