"""Film plates: an actor's frame I/O, the colour round trip, and a whole job beside ProRes 4444.

Measured side by side in one run (figures, not pass/fail):

* I/O (:func:`io_case`): frames per second one process reads and writes with
  ``threads`` I/O threads (an actor's CPU count), through
  :func:`~pipeline.plates.frames.write_plate` and
  :func:`~pipeline.plates.frames.read_plates` (which also converts each frame to the
  model space, as an actor does), for EXR half PIZ, EXR half DWAA and DPX 10-bit log,
  at every size, from local disk (just written, so mostly the page cache) and from a
  loopback S3 store (moto's threaded server in this process, s3fs as in production);
* colour (:func:`colour_case`): per frame, ``PlateConverter.to_model`` of the whole
  frame, ``to_plate`` of a face-sized region and ``merge_back`` of a face-sized change;
* the job (:func:`job_runs`): ``run_job`` on a local Ray, one CPU actor, the built-in
  pack, on an EXR half PIZ sequence and on the same frames (in the model space) as a
  ProRes 4444 ``.mov``; their fps ratio.

Writes ``plates.json`` and ``plates.md`` into the benchmark's output folder.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import statistics
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.film_plates.plates import FORMATS, PlateFormat, PlateMaker, dims, face_box, frame_name, plate_frame
from jobs.cli import join_ray

logger = logging.getLogger(__name__)

S3_ENV = {
    "AWS_ACCESS_KEY_ID": "recast-bench",
    "AWS_SECRET_ACCESS_KEY": "recast-bench-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}
COLOUR_FORMATS = ("exr-half-piz", "dpx-10bit-log")
"""DWAA holds the same half-float ACEScg values as PIZ: the same colour cost."""
JOB_FORMAT = "exr-half-piz"


@dataclass(frozen=True)
class PlateSettings:
    """What the plates scenario measures; the defaults take a few minutes on 2 cores."""

    out: str
    """The benchmark's output folder: ``plates.json`` and ``plates.md`` go here, the frames under ``plates/``."""
    cores: int
    sizes: tuple[str, ...] = ("2K", "4K")
    frames: int | None = None
    """Frames per I/O case; None: 16 at 2K and below, 8 above."""
    job_frames: int = 24
    job_size: str = "4K"
    repeats: int = 3
    """Colour timings: the median of this many calls."""
    local_ray: bool = True
    formats: tuple[str, ...] = field(default=tuple(FORMATS))

    @property
    def work(self) -> str:
        return os.path.join(os.path.abspath(self.out), "plates")

    def frames_for(self, size: str) -> int:
        if self.frames is not None:
            return self.frames
        width, height = dims(size)
        return 16 if width * height <= 2048 * 1080 else 8


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def loopback_s3() -> Iterator[str]:
    """A fresh bucket (``s3://name``) on a loopback moto server; s3fs finds it via ``AWS_ENDPOINT_URL``."""
    import fsspec
    import s3fs
    from moto.server import ThreadedMotoServer

    # werkzeug logs every request at INFO: noise in the benchmark's log, and work in this process.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    saved = {k: os.environ.get(k) for k in [*S3_ENV, "AWS_ENDPOINT_URL"]}
    os.environ.update(S3_ENV, AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}")
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        name = f"recast-bench-{uuid.uuid4().hex[:8]}"
        fsspec.filesystem("s3", skip_instance_cache=True).mkdir(name)
        yield f"s3://{name}"
    finally:
        server.stop()
        s3fs.S3FileSystem.clear_instance_cache()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _rate(frames: int, seconds: float, total_bytes: int) -> dict[str, float]:
    return {
        "seconds": round(seconds, 4),
        "fps": round(frames / seconds, 3),
        "mb_per_s": round(total_bytes / 1e6 / seconds, 2),
    }


def measure_writes(folder: str, name: str, fmt: PlateFormat, frames: list, threads: int) -> dict[str, float]:
    """Write ``frames`` ((pixels, spec) each) as ``folder/name.NNNN.ext`` on ``threads`` threads."""
    from pipeline.plates.frames import write_plate

    def write(item: tuple[int, tuple[Any, Any]]) -> int:
        i, (pixels, spec) = item
        return write_plate(f"{folder}/{frame_name(name, 1001 + i, fmt)}", pixels, spec)[1]

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="bench-write") as pool:
        sizes = list(pool.map(write, enumerate(frames)))
    return _rate(len(frames), time.perf_counter() - started, sum(sizes))


def measure_reads(pattern: str, fmt: PlateFormat, threads: int) -> tuple[dict[str, float], Any, Any]:
    """Probe ``pattern`` (timed apart), then read every frame as an actor does; (figures, info, converter)."""
    from pipeline.plates.colour import PlateConverter
    from pipeline.plates.frames import read_plates
    from pipeline.plates.probe import probe_sequence
    from pipeline.video.sequence_types import ColourRequest

    started = time.perf_counter()
    info = probe_sequence(pattern, colour=ColourRequest(plate_space=fmt.space), threads=threads)
    probed = time.perf_counter() - started
    assert info.sequence is not None
    converter = PlateConverter(info.sequence.colour, info.sequence)
    started = time.perf_counter()
    count = sum(1 for _ in read_plates(info, 0, info.frame_count, converter, threads=threads))
    figures = _rate(count, time.perf_counter() - started, sum(info.sequence.sizes))
    figures["probe_seconds"] = round(probed, 4)
    return figures, info, converter


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def io_case(
    settings: PlateSettings, size: str, fmt_name: str, maker: PlateMaker, bucket: str | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """One size and format: local and S3 write and read rates; the colour row where it applies."""
    fmt = FORMATS[fmt_name]
    count = settings.frames_for(size)
    frames = [plate_frame(maker, i, fmt) for i in range(count)]
    threads = settings.cores
    folder = os.path.join(settings.work, "io", f"{size}-{fmt_name}")
    shutil.rmtree(folder, ignore_errors=True)
    name = "plate"
    row: dict[str, Any] = {"size": size, "format": fmt_name, "frames": count, "threads": threads}
    logger.info("plates I/O %s %s: %d frames, %d threads", size, fmt_name, count, threads)
    row["local"] = {"write": measure_writes(folder, name, fmt, frames, threads)}
    reads, info, converter = measure_reads(f"{folder}/{name}.####.{fmt.ext}", fmt, threads)
    row["local"]["read"] = reads
    row["mb_per_frame"] = round(sum(info.sequence.sizes) / count / 1e6, 3)
    colour = colour_case(settings, size, fmt_name, info, converter) if fmt_name in COLOUR_FORMATS else None
    if bucket is not None:
        remote = f"{bucket}/{size}-{fmt_name}"
        row["s3"] = {"write": measure_writes(remote, name, fmt, frames, threads)}
        row["s3"]["read"] = measure_reads(f"{remote}/{name}.####.{fmt.ext}", fmt, threads)[0]
        _remove_remote(remote)
        row["s3_over_local"] = {
            op: _ratio(row["s3"][op]["fps"], row["local"][op]["fps"]) for op in ("write", "read")
        }
    shutil.rmtree(folder, ignore_errors=True)
    return row, colour


def _remove_remote(url: str) -> None:
    from pipeline.store import storage

    fs, path = storage.filesystem(url)
    fs.rm(path, recursive=True)


def _median_ms(repeats: int, call: Callable[[], object]) -> float:
    times = []
    for _ in range(max(1, repeats)):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return round(1000 * statistics.median(times), 3)


def colour_case(
    settings: PlateSettings, size: str, fmt_name: str, info: Any, converter: Any
) -> dict[str, Any]:
    """Per-frame cost of plate -> model (whole frame) and back (a face-sized region and change)."""
    from pipeline.plates.frames import merge_back, read_frame

    assert info.sequence is not None
    frame = read_frame(info, 0, converter)
    x0, y0, side = face_box(0, (info.width, info.height))
    box = (slice(y0, y0 + side), slice(x0, x0 + side))
    plate_rgb = frame.pixels[..., list(info.sequence.rgb)]
    model_face = converter.to_model(plate_rgb[box])
    rendered = frame.rgb.copy()
    rendered[box] = 65535 - rendered[box]  # every pixel of the face changes
    to_model = _median_ms(settings.repeats, lambda: converter.to_model(plate_rgb))
    to_plate = _median_ms(settings.repeats, lambda: converter.to_plate(model_face))
    merge = _median_ms(settings.repeats, lambda: merge_back(frame, rendered, converter))
    return {
        "size": size,
        "format": fmt_name,
        "face_side_px": side,
        "to_model_frame_ms": to_model,
        "to_plate_face_ms": to_plate,
        "merge_back_face_ms": merge,
        "round_trip_ms": round(to_model + merge, 3),
    }


def job_spec(
    name: str, url: str, output: str, codec: str, settings: PlateSettings, *, source: str, cache: str
) -> dict:
    """One shot, one CPU actor with every core, the built-in pack."""
    work = os.path.join(settings.work, "job", name)
    return {
        "job_id": f"bench-plates-{name}",
        "shots": [{"name": "sc010", "url": url}],
        "identities": {"hero": {"images": [source], "face_index": 0}},
        "selection": {"mode": "all", "source": "hero"},
        "models": {"pack": "builtin:default"},  # a spec's cache_dir must lie under the cache root
        "output": {
            "url": os.path.join(work, output),
            "codec": codec,
            "if_exists": "overwrite",
            "work_url": os.path.join(work, "work"),
        },
        "resources": {"cpus_per_actor": settings.cores, "max_actors": 1},
    }


def job_runs(settings: PlateSettings, source: str, cache_dir: str) -> dict[str, Any]:
    """The same plate as an EXR sequence and as ProRes 4444, each through a whole job."""
    import ray

    from bench.film_plates.plates import write_prores, write_sequence
    from bench.runs import run_recast

    fmt, size, count = FORMATS[JOB_FORMAT], dims(settings.job_size), settings.job_frames
    inputs = os.path.join(settings.work, "job", "inputs")
    shutil.rmtree(inputs, ignore_errors=True)
    logger.info("plates job inputs: %d frames of %dx%d", count, *size)
    plates = {
        "sequence": (
            write_sequence(inputs, "sc010_plate", fmt, size, count),
            "sc010_recast.####.exr",
            "h264",
        ),
        "prores_4444": (
            write_prores(os.path.join(inputs, "sc010_plate.mov"), fmt, size, count),
            "sc010.mov",
            "prores_4444",
        ),
    }
    if settings.local_ray:
        ray.init(
            address="local", num_cpus=settings.cores, include_dashboard=False, logging_level=logging.WARNING
        )
    else:
        join_ray(ray, logging_level=logging.WARNING)
    runs: dict[str, Any] = {}
    try:
        for name, (url, output, codec) in plates.items():
            logger.info("plates job: %s", name)
            run = run_recast(
                job_spec(name, url, output, codec, settings, source=source, cache=cache_dir),
                local_ray=settings.local_ray,
            )
            keep = (
                "actors",
                "chunks",
                "frames",
                "faces_swapped",
                "fps",
                "seconds",
                "job_fps",
                "setup_seconds",
            )
            runs[name] = {k: run[k] for k in keep} | {
                "input_mb": round(_input_bytes(url) / 1e6, 2),
                "stage_seconds": {k: round(v, 3) for k, v in run["detail_stage_seconds"].items()},
            }
    finally:
        ray.shutdown()
    return {
        "size": settings.job_size,
        "format": JOB_FORMAT,
        "frames": count,
        "cpus_per_actor": settings.cores,
        "runs": runs,
        "sequence_over_prores_fps": _ratio(runs["sequence"]["fps"], runs["prores_4444"]["fps"]),
    }


def _input_bytes(url: str) -> int:
    if "####" not in url:
        return os.path.getsize(url)
    folder = os.path.dirname(url)
    return sum(os.path.getsize(os.path.join(folder, n)) for n in os.listdir(folder) if n.endswith(".exr"))


def machine() -> dict[str, Any]:
    """Cores, CPU model, memory and load of this machine."""
    model = "-"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        model = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), "-")
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return {"cores": os.cpu_count(), "cpu": model, "memory_gb": round(pages / 2**30, 1), "load": _load()}


def _load() -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        return subprocess.run(
            ["uptime"], check=False, capture_output=True, text=True, timeout=5
        ).stdout.strip()
    return "-"


def run_plates(settings: PlateSettings, *, source: str, cache_dir: str) -> dict[str, Any]:
    """Every figure above; also written as ``plates.json`` and ``plates.md`` into ``settings.out``."""
    from bench.film_plates.plate_table import plates_table

    out = os.path.abspath(settings.out)
    os.makedirs(out, exist_ok=True)
    started = time.perf_counter()
    figures: dict[str, Any] = {"settings": asdict(settings), "machine": machine(), "io": [], "colour": []}
    with loopback_s3() as bucket:
        for size in settings.sizes:
            makers: dict[str, PlateMaker] = {}
            for fmt_name in settings.formats:
                space = FORMATS[fmt_name].space
                maker = makers.setdefault(space, PlateMaker(dims(size), space))
                row, colour = io_case(settings, size, fmt_name, maker, bucket)
                figures["io"].append(row)
                if colour is not None:
                    figures["colour"].append(colour)
    _colour_ratios(figures["colour"])
    figures["job"] = job_runs(settings, source, cache_dir)
    figures["machine"]["load_after"] = _load()
    figures["wall_seconds"] = round(time.perf_counter() - started, 1)
    with open(os.path.join(out, "plates.json"), "w") as fh:
        json.dump(figures, fh, indent=2)
    with open(os.path.join(out, "plates.md"), "w") as fh:
        fh.write(plates_table(figures) + "\n")
    return figures


def _colour_ratios(rows: list[dict[str, Any]]) -> None:
    """Each row's round trip against the smallest size's of its format (4K / 2K)."""
    for row in rows:
        same = [r for r in rows if r["format"] == row["format"]]
        base = min(same, key=lambda r: dims(r["size"])[0] * dims(r["size"])[1])
        row["round_trip_over_smallest"] = _ratio(row["round_trip_ms"], base["round_trip_ms"])
