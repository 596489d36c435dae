"""Video I/O figures on a generated 1080p clip: probe, decode, encode per encoder, merge.

Run (about 2-3 minutes on 2 cores)::

    .venv/bin/python -m jobs.bench_video --seconds 20 --encode-frames 60

Then the same source on a loopback S3 endpoint (moto, started here): probe,
decode, and a merge whose segments and output live on S3.  Prints a table and
then one JSON object.  Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
import tempfile
import time
from fractions import Fraction
from typing import Any

import av
import numpy as np

from pipeline import storage
from pipeline.chunking import plan_chunks
from pipeline.decode import decode_range
from pipeline.encode import EncodeSettings, SegmentWriter, can_open, choose_encoder
from pipeline.merge import merge_segments
from pipeline.probe import VideoInfo, probe

log = logging.getLogger("bench_video")

ENCODERS: list[tuple[str, EncodeSettings]] = [
    ("h264_nvenc", EncodeSettings(codec="h264", hardware=True)),
    ("hevc_nvenc", EncodeSettings(codec="hevc", hardware=True)),
    ("libx264 veryfast", EncodeSettings(codec="h264", preset="veryfast", hardware=False)),
    ("libx264 medium", EncodeSettings(codec="h264", preset="medium", hardware=False)),
    ("libx265 ultrafast", EncodeSettings(codec="hevc", preset="ultrafast", hardware=False)),
    ("prores_ks HQ", EncodeSettings(codec="prores")),
]


def make_source(
    path: str, seconds: float, fps: int = 25, width: int = 1920, height: int = 1080, grain: int = 8
) -> None:
    """A 1080p H.264 clip with moving blocky texture (so decode/encode do real work) and AAC audio.

    ``grain`` is the texture's block size in pixels: 8 gives a heavy ~60 Mbit/s
    mezzanine-like stream, 64 a light ~5 Mbit/s one.
    """
    rng = np.random.default_rng(7)
    coarse = rng.integers(0, 256, size=(height // grain + 2, width // grain + 2, 3), dtype=np.uint8)
    texture = np.repeat(np.repeat(coarse, grain, axis=0), grain, axis=1)
    frames = round(seconds * fps)
    with av.open(path, "w") as out:
        vs = out.add_stream("libx264", rate=fps)
        vs.width, vs.height, vs.pix_fmt = width, height, "yuv420p"
        vs.codec_context.options = {"preset": "ultrafast", "crf": "20", "x264-params": f"keyint={2 * fps}"}
        vs.codec_context.color_primaries = vs.codec_context.color_trc = vs.codec_context.colorspace = 1
        vs.codec_context.color_range = 1
        vs.metadata["timecode"] = "10:00:00:00"
        aus = out.add_stream("aac", rate=48000)
        aus.layout = "stereo"
        for i in range(frames):
            rgb = np.ascontiguousarray(
                texture[(i * 3) % 16 : (i * 3) % 16 + height, (i * 5) % 16 : (i * 5) % 16 + width]
            )
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(
                format="yuv420p",
                src_colorspace="ITU709",
                dst_colorspace="ITU709",
                src_color_range="JPEG",
                dst_color_range="MPEG",
            )
            frame.pts = i
            out.mux(vs.encode(frame))
        out.mux(vs.encode(None))
        total = round(frames / fps * 48000)
        tone = (0.2 * np.sin(2 * np.pi * 440 * np.arange(total) / 48000)).astype(np.float32)
        for start in range(0, total, 1024):
            block = np.ascontiguousarray(np.stack([tone[start : start + 1024]] * 2))
            aframe = av.AudioFrame.from_ndarray(block, format="fltp", layout="stereo")
            aframe.sample_rate, aframe.pts, aframe.time_base = 48000, start, Fraction(1, 48000)
            out.mux(aus.encode(aframe))
        out.mux(aus.encode(None))


def make_long(src: str, dst: str, repeats: int) -> None:
    """``src`` repeated ``repeats`` times by stream copy (a long file without encoding one)."""
    with av.open(src) as inp, av.open(dst, "w") as out:
        streams = {
            s.index: out.add_stream_from_template(s) for s in (inp.streams.video[0], inp.streams.audio[0])
        }
        packets = [p for p in inp.demux(*[inp.streams[i] for i in streams]) if p.dts is not None]
        span = {
            i: max(p.pts + p.duration for p in packets if p.stream.index == i)
            - min(p.dts for p in packets if p.stream.index == i)
            for i in streams
        }
        tbs = {i: inp.streams[i].time_base for i in streams}
        for r in range(repeats):
            for p in packets:
                i = p.stream.index
                copy = av.Packet(bytes(p))
                shift = r * span[i]
                copy.pts, copy.dts, copy.duration = p.pts + shift, p.dts + shift, p.duration
                copy.time_base = tbs[i]
                copy.is_keyframe = p.is_keyframe
                copy.stream = streams[i]
                out.mux(copy)


def timed(fn: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


def decode_fps(url: str, info: VideoInfo, frames: int | None = None) -> float:
    end = info.frame_count if frames is None else min(frames, info.frame_count)
    count, seconds = timed(lambda: sum(1 for _ in decode_range(url, info, 0, end)))
    return count / seconds


def encode_fps(
    info: VideoInfo, settings: EncodeSettings, frames: list[Any], workdir: str
) -> tuple[str, float]:
    choice = choose_encoder(settings, info)
    plan = plan_chunks(info, 20.0, min_seconds=0.01, max_seconds=1e9)
    chunk = plan.chunks[0]
    chunk = type(chunk)(0, 0, len(frames), info.pts[0], info.pts[len(frames)])
    path = os.path.join(workdir, f"enc.{choice.container}")

    def run() -> None:
        with SegmentWriter(path, info, choice, chunk) as writer:
            for frame in frames:
                writer.write(frame)

    _, seconds = timed(run)
    return choice.name, len(frames) / seconds


def render_segments(url: str, info: VideoInfo, workdir: str) -> list[str]:
    choice = choose_encoder(EncodeSettings(preset="ultrafast", hardware=False), info)
    plan = plan_chunks(info, max(info.duration_seconds / 3, 0.5), min_seconds=0.1)
    paths = []
    for chunk in plan.chunks:
        path = os.path.join(workdir, f"seg-{chunk.index:03d}.{choice.container}")
        with SegmentWriter(path, info, choice, chunk) as writer:
            for frame in decode_range(url, info, chunk.start_frame, chunk.end_frame):
                writer.write(frame)
        paths.append(path)
    return paths


def start_s3() -> Any:
    from moto.server import ThreadedMotoServer

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
    )
    return server


class _Rows(list[tuple[str, str]]):
    """Table rows, echoed to stderr as they are measured (the run takes minutes)."""

    def append(self, row: tuple[str, str]) -> None:
        print(f"  {row[0]}: {row[1]}", file=sys.stderr, flush=True)
        super().append(row)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--encode-frames", type=int, default=60)
    parser.add_argument(
        "--prores-frames", type=int, default=10, help="prores_ks is ~0.4 fps on this noisy 1080p on 2 cores"
    )
    parser.add_argument("--long-minutes", type=float, default=10.0, help="length of the long-probe file")
    parser.add_argument("--no-s3", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's request log
    # Other work on the machine skews every figure; record how busy it was.
    results: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "seconds": args.seconds,
        "load_avg_1m_start": os.getloadavg()[0],
    }
    rows = _Rows()
    with tempfile.TemporaryDirectory(prefix="recast-bench-") as tmp:
        src = os.path.join(tmp, "src.mp4")
        _, gen = timed(lambda: make_source(src, args.seconds))
        size_mb = os.path.getsize(src) / 1e6
        info, probe_s = timed(lambda: probe(src))
        results.update(frames=info.frame_count, source_mb=round(size_mb, 1), generate_s=round(gen, 1))
        results["probe_ms"] = round(probe_s * 1000, 1)
        rows.append(("probe (local)", f"{probe_s * 1000:.1f} ms for {info.frame_count} frames"))
        light = os.path.join(tmp, "light.mp4")
        make_source(light, 20.0, grain=64)
        long_path = os.path.join(tmp, "long.mp4")
        make_long(light, long_path, max(1, round(args.long_minutes * 3)))
        os.remove(light)
        long_info, long_s = timed(lambda: probe(long_path))
        long_mb = os.path.getsize(long_path) / 1e6
        os.remove(long_path)
        results.update(long_probe_ms=round(long_s * 1000, 1), long_frames=long_info.frame_count)
        results["long_mb"] = round(long_mb, 1)
        rows.append(
            (
                f"probe {args.long_minutes:g}-min 1080p (local)",
                f"{long_s * 1000:.1f} ms, {long_info.frame_count} frames, {long_mb:.0f} MB",
            )
        )
        fps = decode_fps(src, info)
        results["decode_fps"] = round(fps, 1)
        rows.append(("decode to RGB (local)", f"{fps:.1f} fps"))

        frames = list(decode_range(src, info, 0, min(args.encode_frames, info.frame_count - 1)))
        results["encode_fps"] = {}
        for label, settings in ENCODERS:
            if label.endswith("nvenc") and not can_open(label, "yuv420p"):
                rows.append((f"encode {label}", "not available (does not open)"))
                results["encode_fps"][label] = None
                continue
            subset = frames[: args.prores_frames] if settings.codec == "prores" else frames
            name, efps = encode_fps(info, settings, subset, tmp)
            results["encode_fps"][label] = round(efps, 1)
            rows.append((f"encode {label} ({name})", f"{efps:.1f} fps"))
        del frames

        seg_dir = os.path.join(tmp, "segs")
        os.makedirs(seg_dir)
        segments = render_segments(src, info, seg_dir)
        seg_mb = sum(os.path.getsize(p) for p in segments) / 1e6
        stats = merge_segments(segments, info, os.path.join(tmp, "out.mp4"), audio_source_url=src)
        results["merge_mb_s"] = round(stats.bytes / 1e6 / stats.seconds, 1)
        rate = stats.bytes / 1e6 / stats.seconds
        detail = f"{rate:.1f} MB/s ({stats.bytes / 1e6:.1f} MB in {stats.seconds:.2f} s)"
        rows.append(("merge (local, stream copy)", detail))

        if not args.no_s3:
            server = start_s3()
            try:
                import fsspec

                fs = fsspec.filesystem("s3", skip_instance_cache=True)
                fs.mkdir("bench")
                s3_src = "s3://bench/src.mp4"
                storage.publish_file(src, s3_src)
                s3_info, s3_probe = timed(lambda: probe(s3_src))
                results["s3_probe_ms"] = round(s3_probe * 1000, 1)
                rows.append(("probe (loopback S3)", f"{s3_probe * 1000:.1f} ms"))
                s3_fps = decode_fps(s3_src, s3_info)
                results["s3_decode_fps"] = round(s3_fps, 1)
                rows.append(("decode to RGB (loopback S3)", f"{s3_fps:.1f} fps"))
                seg_urls = []
                for path in segments:
                    url = f"s3://bench/segs/{os.path.basename(path)}"
                    storage.publish_file(path, url)
                    seg_urls.append(url)
                s3_stats = merge_segments(seg_urls, s3_info, "s3://bench/out.mp4", audio_source_url=s3_src)
                results["s3_merge_mb_s"] = round(s3_stats.bytes / 1e6 / s3_stats.seconds, 1)
                s3_rate = s3_stats.bytes / 1e6 / s3_stats.seconds
                rows.append(
                    ("merge (segments+source+output on S3)", f"{s3_rate:.1f} MB/s ({s3_stats.seconds:.2f} s)")
                )
            finally:
                server.stop()
        results["segments_mb"] = round(seg_mb, 1)

    results["load_avg_1m_end"] = os.getloadavg()[0]
    width = max(len(r[0]) for r in rows)
    print(f"1080p clip: {results['frames']} frames, {results['source_mb']} MB, {results['cpus']} CPUs")
    for name, value in rows:
        print(f"  {name.ljust(width)}  {value}")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
