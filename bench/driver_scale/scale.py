"""The driver at feature-film scale: hundreds of shots, thousands of chunks, hundreds of actors.

Runs the real driver (planning keys, dispatch, tracking chain, face plans, the
ledger writing every manifest record, the observer rewriting the report,
publishing) against simulated actors (:mod:`bench.driver_scale.scale_actors`) that
sleep for a chunk's modelled time, so no model or video work is done.  The
shots are described by their probe (4K, 24 fps, one timestamp per frame), not
by files.  Measured in one run:

* driver CPU seconds per 1,000 chunks and the driver's busy share of the wall time;
* driver peak RSS;
* how long actors waited for the driver between two calls (p50 / p99), as a share
  of the modelled time of the call that followed: actors never wait on the driver
  when this stays at a few per cent;
* time to rewrite report.html / report.json, at its peak during the run and at the end;
* manifest records written;
* time to the first published shot (the job's summary);
* the time a resume takes to scan the manifest of the finished job: every chunk's
  analysis and tracking record read back and checked against its key, by as many fresh
  processes as the job has planner actors (they read a resumed job's records), each its shots.

Modelled times can be scaled by ``time_scale`` (0.5: a 20 s render takes 10 s) to
shorten a run; that makes the driver's job harder, not easier: completions arrive
twice as fast.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import resource
import shutil
import time
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType
from typing import Any

import numpy as np

TARGETS = MappingProxyType(
    {
        "driver_ms_per_chunk": 20.0,
        "dispatch_wait_share": 0.02,
        "driver_busy_share": 0.3,
        "report_cpu_seconds": 0.5,
        "report_seconds": 1.0,
        "resume_scan_seconds": 10.0,
        "driver_peak_rss_mb": 1024.0,
        "wall_over_ideal": 1.05,
    }
)
"""Issue 33's targets at 1,024 actors on 9,000 chunks, and in the crowd case."""


@dataclass(frozen=True)
class ScaleSettings:
    """The simulated job; defaults: 300 shots x 30 chunks of 20 s of 4K at 24 fps on 1,024 actors."""

    out: str
    shots: int = 300
    chunks_per_shot: int = 30
    chunk_seconds: float = 20.0
    fps: int = 24
    width: int = 3840
    height: int = 2160
    actors: int = 1024
    hosts: int = 16
    render_seconds: float = 20.0
    """Modelled seconds to render one chunk (480 frames of 4K at 24 fps per GPU)."""
    analysis_seconds: float = 10.0
    """Modelled seconds to decode, detect and embed one chunk (480 frames of 4K at 48 fps per GPU)."""
    time_scale: float = 1.0
    faces_per_frame: int = 1
    dispatch_order: str = "render_first"
    """``resources.dispatch_order`` of the job (``analysis_first``: the order before)."""


def _video_info(name: str, settings: ScaleSettings) -> Any:
    from pipeline.video.probe import VideoInfo

    frames = int(settings.chunks_per_shot * settings.chunk_seconds * settings.fps)
    return VideoInfo(
        url=name,
        codec="prores",
        width=settings.width,
        height=settings.height,
        pix_fmt="yuv422p10le",
        bit_depth=10,
        time_base=Fraction(1, settings.fps),
        frame_rate=Fraction(settings.fps),
        is_vfr=False,
        frame_count=frames,
        pts=tuple(range(frames)),
        keyframes=tuple(range(frames)),
        duration_seconds=frames / settings.fps,
        color_primaries=None,
        color_trc=None,
        colorspace=None,
        color_range=None,
        rotation=0,
        timecode=None,
        audio=(),
    )


def scale_spec(settings: ScaleSettings) -> Any:
    from cluster.spec.job import parse_spec

    return parse_spec(
        {
            "job_id": "scale",
            "shots": [{"name": f"sh{i:04d}", "url": f"/plates/sh{i:04d}.mov"} for i in range(settings.shots)],
            "identities": {"hero": {"images": ["/refs/hero.jpg"]}},
            "output": {
                "url": os.path.join(settings.out, "deliveries", "{shot}.mov"),
                "codec": "prores",
                "if_exists": "overwrite",
                "work_url": os.path.join(settings.out, "work"),
            },
            "chunking": {"seconds": settings.chunk_seconds},
            "resources": {
                "cpus_per_actor": 0.001,
                "max_actors": settings.actors,
                "dispatch_order": settings.dispatch_order,
            },
        }
    )


def prepare(settings: ScaleSettings, spec: Any, *, resumed: bool) -> Any:
    """The PreparedJob the checks would produce for these shots (probes stand in for files)."""
    from cluster.checks.prepare import PreparedJob, planned_shot, probed_shot
    from cluster.spec.shot_refs import expand_shots, work_url_for
    from cluster.state.keys import JobKeys
    from cluster.state.manifest import JobManifest

    refs = expand_shots(spec)
    work_url = work_url_for(spec, refs)
    keys = JobKeys(spec, "simulated-pack", "simulated-identities")
    planned = []
    for ref in refs:
        info = _video_info(ref.url, settings)
        fingerprint = {"url": ref.url, "size": info.frame_count, "frames": info.frame_count}
        planned.append(planned_shot(keys, probed_shot(spec, ref, info), fingerprint))
    return PreparedJob(
        spec=spec,
        work_url=work_url,
        manifest=JobManifest(work_url),
        planned=planned,
        skipped=[],
        reused=[],
        keys=keys,
        shot_keys={p.ref.name: p.spec_key for p in planned},
        resumed=resumed,
        consent_refs={},
    )


def simulated_merge(
    segment_urls: list[str],
    info: Any,
    output_url: str,
    audio_url: str,
    signing: Any,
    *,
    window: Any = None,
    segment_sha256: Any = None,
    overwrite: bool = True,
) -> Any:
    """Publishes a stand-in output atomically: what the driver does around a merge, without the merge."""
    from cluster.publish.merge import Published
    from cluster.state.fingerprints import stat_fingerprint
    from pipeline.store import storage
    from pipeline.video.merge import MergeStats

    data = f"simulated output of {len(segment_urls)} segments\n".encode()
    storage.write_bytes(output_url, data, overwrite=overwrite)
    return Published(MergeStats(info.frame_count, len(data), 0.0), "0" * 64, stat_fingerprint(output_url))


def actor_waits(
    calls: list[tuple[int, str, str, int, float, float]],
    queued: dict[tuple[str, str, int], float],
    settings: ScaleSettings,
) -> dict[str, float]:
    """How long each call's work waited for the driver once both it and its actor were free.

    For a call on an actor: its start minus the later of (the end of the
    actor's previous call, the moment the driver queued this work).  Waiting
    for work that does not exist yet (a shot's renders need its tracking) is
    not the driver's delay and is not counted.  Shares are of the modelled
    time of the call itself.
    """
    modelled = {
        "analyze": settings.analysis_seconds * settings.time_scale,
        "render": settings.render_seconds * settings.time_scale,
    }
    by_slot: dict[int, list[tuple[float, float, str, float]]] = {}
    for slot, kind, url, chunk, start, end in calls:
        by_slot.setdefault(slot, []).append((start, end, kind, queued[(kind, url, chunk)]))
    waits, shares = [], []
    for spans in by_slot.values():
        spans.sort()
        # From an actor's second call on: its first waited for the actor's own start-up.
        for (_, free_at, _, _), (start, _, kind, queued_at) in itertools.pairwise(spans):
            wait = max(0.0, start - max(free_at, queued_at))
            waits.append(wait)
            shares.append(wait / modelled[kind])
    if not waits:
        return {"calls_measured": 0}
    return {
        "calls_measured": len(waits),
        "wait_p50_ms": round(1000 * float(np.percentile(waits, 50)), 2),
        "wait_p99_ms": round(1000 * float(np.percentile(waits, 99)), 2),
        "wait_share_p50": round(float(np.percentile(shares, 50)), 5),
        "wait_share_p99": round(float(np.percentile(shares, 99)), 5),
    }


def dispatch_delays(delays: list[float], settings: ScaleSettings) -> dict[str, float]:
    """The driver's own delay in handing queued work to an idle actor (seen idle by the driver): p50
    and p99, in ms and as a share of the shorter call (an analysis)."""
    if not delays:
        return {}
    call = settings.analysis_seconds * settings.time_scale
    p50, p99 = (float(np.percentile(delays, q)) for q in (50, 99))
    return {
        "dispatch_delays": len(delays),
        "dispatch_p50_ms": round(1000 * p50, 2),
        "dispatch_p99_ms": round(1000 * p99, 2),
        "dispatch_share_p99": round(p99 / call, 5),
    }


def resume_scan_in_new_process(settings: ScaleSettings) -> dict[str, float]:
    """:func:`resume_scan` in fresh Python processes, as a resubmitted driver's planner actors read
    the manifest: one process per planner actor (``resources.planner_actors``), each reading the
    shots it is handed (every n-th), all at once; the scan's time is the slowest one's."""
    import json
    import subprocess
    import sys

    parts = max(1, min(settings.shots, scale_spec(settings).resources.planner_actors))
    code = (
        "import dataclasses, json, sys\n"
        "from bench.driver_scale.scale import ScaleSettings, prepare, resume_scan, scale_spec\n"
        "settings = ScaleSettings(**json.loads(sys.argv[1]))\n"
        "prepared = prepare(settings, scale_spec(settings), resumed=True)\n"
        "print(json.dumps(resume_scan(prepared, part=int(sys.argv[2]), parts=int(sys.argv[3]))))\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, json.dumps(dataclasses.asdict(settings)), str(part), str(parts)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for part in range(parts)
    ]
    results = []
    for proc in procs:
        out, _ = proc.communicate(timeout=1800)
        if proc.returncode != 0:
            raise RuntimeError(f"the resume scan failed ({proc.returncode})")
        results.append(json.loads(out.strip().splitlines()[-1]))
    total: dict[str, float] = {
        "resume_scan_seconds": max(r["resume_scan_seconds"] for r in results),
        "resume_scan_processes": parts,
    }
    for name in ("analysis", "tracking", "shots"):
        total[name] = sum(r[name] for r in results)
    return total


def resume_scan(prepared: Any, *, part: int = 0, parts: int = 1) -> dict[str, float]:
    """Read back every chunk's records of the finished job through the ledger, as a resume does
    (its planner actors do): of every ``parts``-th shot from ``part`` on."""
    from cluster.state.ledger import Ledger

    shots = prepared.planned[part::parts]
    ledger = Ledger(prepared.manifest, resumed=True)
    started = time.perf_counter()
    ledger.prefetch([shot.ref.name for shot in shots])
    found = {"analysis": 0, "tracking": 0, "shots": 0}
    for shot in shots:
        state_in = None
        for chunk, key in zip(shot.plan.chunks, shot.analysis_keys, strict=True):
            if ledger.analysis(shot.ref.name, chunk.index, key, chunk.frame_count) is not None:
                found["analysis"] += 1
            committed = ledger.tracking(
                shot.ref.name, chunk.index, prepared.keys.track(key, state_in), chunk.frame_count
            )
            if committed is not None:
                found["tracking"] += 1
                state_in = committed[1].to_dict()
        if ledger.published_output(shot.ref.name, shot.spec_key, shot.ref.output_url) is not None:
            found["shots"] += 1
    return {"resume_scan_seconds": round(time.perf_counter() - started, 3), **found}


def run_scale(settings: ScaleSettings) -> dict[str, Any]:
    """One simulated feature-film job through the real driver; the figures above."""
    import ray

    from bench.driver_scale.scale_actors import SimulatedActorClass, SimulatedHost, SimulatedWork
    from cluster.driver import DriverParts, JobRunner

    shutil.rmtree(settings.out, ignore_errors=True)
    os.makedirs(settings.out)
    work = SimulatedWork(
        analysis_seconds=settings.analysis_seconds * settings.time_scale,
        render_seconds=settings.render_seconds * settings.time_scale,
        faces_per_frame=settings.faces_per_frame,
    )
    hosts: list[Any] = [
        SimulatedHost.options(max_concurrency=10_000).remote(work) for _ in range(settings.hosts)
    ]
    ray.get([h.call_log.remote() for h in hosts])  # hosts up before the clock starts
    spec = scale_spec(settings)
    prepared = prepare(settings, spec, resumed=False)
    parts = DriverParts(actor_class=SimulatedActorClass(hosts), merge=simulated_merge, thumbnails=False)
    runner = JobRunner(spec, parts=parts, prepared=prepared)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    summary = runner.run()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    calls = [c for log in ray.get([h.call_log.remote() for h in hosts]) for c in log]
    # The driver's record of when it queued each piece of work, as wall-clock times like the hosts'.
    epoch = summary.started_at_epoch
    url_of = {p.ref.name: p.ref.url for p in prepared.planned}
    queued = {
        (e["kind"], url_of[e["shot"]], e["chunk"]): epoch + e["queued"] for e in runner.timeline if e["ok"]
    }
    for host in hosts:
        ray.kill(host)
    observer, ledger = runner.observer, runner.ledger
    assert observer is not None and ledger is not None
    chunks = prepared.chunk_count
    report_seconds = observer.report_seconds
    ideal = chunks * (work.analysis_seconds + work.render_seconds) / settings.actors
    figures: dict[str, Any] = {
        "settings": dataclasses.asdict(settings),
        "ok": summary.ok,
        "shots_published": sum(s.status == "published" for s in summary.shots),
        "chunks": chunks,
        "work_items": len(calls),
        "actors": summary.actors,
        "wall_seconds": round(wall, 2),
        "first_shot_seconds": summary.first_shot_seconds,
        "ideal_wall_seconds": round(ideal, 2),
        "wall_over_ideal": round(wall / ideal, 3),
        "driver_cpu_seconds": round(cpu, 2),
        "driver_cpu_seconds_per_1000_chunks": round(1000 * cpu / chunks, 2),
        "driver_ms_per_chunk": round(1000 * cpu / chunks, 2),
        "planner_cpu_seconds_per_1000_chunks": round(1000 * observer.planner_cpu_seconds / chunks, 2),
        "driver_busy_share": round(cpu / wall, 3),
        "driver_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "report_rewrites": len(report_seconds),
        "report_seconds_peak": round(max(report_seconds), 3) if report_seconds else None,
        "report_seconds_final": round(report_seconds[-1], 3) if report_seconds else None,
        "report_cpu_seconds_peak": round(max(observer.report_cpu_seconds), 3) if report_seconds else None,
        "manifest_records_written": ledger.records_written,
        **actor_waits(calls, queued, settings),
        **dispatch_delays(observer.dispatch_delays, settings),
        **resume_scan_in_new_process(settings),
    }
    return figures


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def scale_table(figures: dict[str, Any]) -> str:
    """The scale figures with issue 33's targets marked."""

    def mark(value: float | None, target: str, *, at_least: bool = False) -> str:
        if value is None:
            return ""
        ok = value >= TARGETS[target] if at_least else value <= TARGETS[target]
        return f"   target {'>=' if at_least else '<='} {TARGETS[target]:g}: {'met' if ok else 'MISSED'}"

    s = figures["settings"]
    lines = [
        (
            f"Driver at scale: {s['shots']} shots x {s['chunks_per_shot']} chunks of {s['chunk_seconds']:g} s "
            f"({figures['chunks']} chunks, {figures['work_items']} actor calls) of {s['width']}x{s['height']} "
            f"at {s['fps']} fps, {s.get('faces_per_frame', 1)} face(s) per frame, on {figures['actors']} "
            f"simulated actors; modelled times x{s['time_scale']:g}"
        ),
        (
            f"  job wall                       {figures['wall_seconds']:>10.1f} s  (ideal {figures['ideal_wall_seconds']:.1f} s,"
            f" x{figures['wall_over_ideal']:.3f}){mark(figures['wall_over_ideal'], 'wall_over_ideal')}"
        ),
        f"  time to first published shot   {_seconds(figures.get('first_shot_seconds')):>12}",
        (
            f"  driver CPU per chunk           {figures['driver_ms_per_chunk']:>10.2f} ms"
            f"{mark(figures['driver_ms_per_chunk'], 'driver_ms_per_chunk')}"
        ),
        (
            f"  driver busy share              {figures['driver_busy_share']:>10.3f}"
            f"{mark(figures['driver_busy_share'], 'driver_busy_share')}"
        ),
        (
            f"  driver peak RSS                {figures['driver_peak_rss_mb']:>10.1f} MB"
            f"{mark(figures['driver_peak_rss_mb'], 'driver_peak_rss_mb')}"
        ),
        (
            f"  planner actors' CPU per chunk  {figures.get('planner_cpu_seconds_per_1000_chunks', 0.0):>10.2f} ms"
            "   (tracking, planning, QC, their records: off the driver)"
        ),
    ]
    if figures.get("calls_measured"):
        lines += [
            f"  actor wait for driver p50/p99  {figures['wait_p50_ms']:>7.1f} / {figures['wait_p99_ms']:.1f} ms",
            (
                f"  ... as share of the call       {100 * figures['wait_share_p50']:>7.2f} / "
                f"{100 * figures['wait_share_p99']:.2f} %{mark(figures['wait_share_p99'], 'dispatch_wait_share')} (p99)"
            ),
        ]
    if figures.get("dispatch_delays"):
        lines.append(
            f"  driver's own dispatch delay    {figures['dispatch_p50_ms']:>7.1f} / {figures['dispatch_p99_ms']:.1f} ms"
            f" p50/p99 ({100 * figures['dispatch_share_p99']:.2f} % of an analysis call at p99;"
            " idle actor seen by the driver to work handed over)"
        )
    peak, final = figures["report_seconds_peak"], figures["report_seconds_final"]
    if peak is not None:
        cpu = figures["report_cpu_seconds_peak"]
        lines += [
            f"  report rewrite final           {final:>10.3f} s{mark(final, 'report_seconds')}",
            (
                f"  report rewrite while running   {cpu:>10.3f} s of CPU at peak ({peak:.3f} s wall, on its own"
                f" thread){mark(cpu, 'report_cpu_seconds')}"
            ),
        ]
    scan = figures["resume_scan_seconds"]
    lines += [
        f"  manifest records written       {figures['manifest_records_written']:>10d}",
        (
            f"  resume scan of the manifest    {scan:>10.2f} s{mark(scan, 'resume_scan_seconds')}"
            f"  ({figures['analysis']} analyses, {figures['tracking']} tracks, {figures['shots']} shots found)"
        ),
    ]
    return "\n".join(lines)
