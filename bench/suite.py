"""One benchmark run: inputs, ceilings, the comparisons, then the optional scenarios.

The ceilings are measured before Ray starts, so nothing else of the benchmark
competes for the CPUs; the comparisons then run on a private Ray instance (or
the cluster at ``RAY_ADDRESS``), and the optional scenarios last, so that a
failing one costs none of the figures already measured.  Scenarios that bring
their own Ray cluster (``Scenario.in_ray`` False) run after that instance is shut down.  What is measured so far
is kept in ``bench.partial.json`` after every step.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
from dataclasses import dataclass
from typing import Any

from bench.analysis_pass.analysis import measure_analysis
from bench.ceiling import measure_ceiling, scrfd_cost
from bench.inputs import make_clip, production_pack, source_picture
from bench.report import derive
from bench.runs import compare
from bench.scenarios import SCENARIOS, Context, Scenario
from bench.settings import Settings
from jobs.cli import join_ray

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Case:
    """One comparison: a model set on one clip size, with or without the enhancer."""

    set_name: str
    pack: str
    size: str
    seconds: float
    chunk_seconds: float
    enhance: bool

    @property
    def label(self) -> str:
        return f"{self.set_name} {self.size}{' +enhance' if self.enhance else ''}"


def plan_cases(settings: Settings, production: str) -> list[Case]:
    """Every model set at every size, then the production set with the enhancer at the first size."""
    if not settings.compare:
        return []
    sets = [
        ("default", "builtin:default", settings.default_seconds, settings.default_chunk_seconds),
        ("production", production, settings.production_seconds, settings.production_chunk_seconds),
    ]
    cases = [
        Case(name, pack, size, seconds, chunk, False)
        for name, pack, seconds, chunk in sets
        for size in settings.sizes
    ]
    if settings.enhance_row:
        cases.append(
            Case(
                "production",
                production,
                settings.sizes[0],
                settings.production_seconds,
                settings.production_chunk_seconds,
                True,
            )
        )
    return cases


def qc_cost_case(cases: list[Case]) -> Case | None:
    """The case that also runs with QC off: the production set without the enhancer, first size."""
    return next((c for c in cases if c.set_name == "production" and not c.enhance), None)


def run_benchmark(settings: Settings) -> dict:
    """Everything the settings ask for; returns the ``bench.json`` content."""
    out = os.path.abspath(settings.out)
    os.makedirs(out, exist_ok=True)
    clips = os.path.join(out, "clips")
    cache_dir = os.path.join(out, "cache")
    source = source_picture(out)
    started = time.perf_counter()
    results: dict[str, Any] = {
        "machine": {
            "cores": settings.cores,
            "when": time.strftime("%Y-%m-%d %H:%M:%S"),
            "load_before": _load(),
        },
        "settings": settings.record(),
        "comparisons": [],
    }
    production = (
        production_pack(out, cache_dir, tiny=settings.tiny) if settings.compare or settings.scaling else None
    )
    packs = [("default", "builtin:default")] + ([("production", production)] if production else [])
    cases = plan_cases(settings, production) if production else []
    qc_case = qc_cost_case(cases)

    ceilings: dict[Case, dict] = {}
    for case in cases:
        logger.info("ceiling %s %s enhance=%s", case.set_name, case.size, case.enhance)
        clip = make_clip(clips, case.size, case.seconds, settings.fps)
        ceilings[case] = _ceiling(settings, case, clip, source, cache_dir)
    results["analysis"] = _analysis_rows(cases, clips, settings, cache_dir)
    if not settings.tiny and settings.compare:
        results["scrfd_cpu_seconds_per_frame"] = scrfd_cost(
            out, make_clip(clips, settings.sizes[0], settings.production_seconds, settings.fps)
        )

    local_ray = not os.environ.get("RAY_ADDRESS")
    ctx = Context(
        settings=settings, source=source, cache_dir=cache_dir, packs=tuple(packs), local_ray=local_ray
    )
    wanted = [s for s in SCENARIOS if s.enabled(settings)]
    in_ray = [s for s in wanted if s.in_ray]
    started_ray = bool(cases or in_ray) and _start_ray(settings, local_ray)
    try:
        for case in cases:
            comp = compare(
                settings,
                label=case.label,
                clip=make_clip(clips, case.size, case.seconds, settings.fps),
                pack=case.pack,
                source=source,
                enhance=case.enhance,
                chunk_seconds=case.chunk_seconds,
                cache_dir=cache_dir,
                local_ray=local_ray,
                direct_row=case.set_name == "production" and not case.enhance,
                qc_cost_row=case == qc_case,
            )
            comp["set"] = case.set_name
            comp["seconds"] = case.seconds
            comp["ceiling"] = dict(ceilings[case])
            results["comparisons"].append(comp)
            _checkpoint(results, out)
        for scenario in in_ray:
            _run_scenario(scenario, ctx, results)
    finally:
        if started_ray:
            import ray

            ray.shutdown()
    for scenario in wanted:
        if not scenario.in_ray:
            _run_scenario(scenario, ctx, results)
    results["machine"]["load_after"] = _load()
    results["wall_seconds"] = time.perf_counter() - started
    return derive(results)


def _run_scenario(scenario: Scenario, ctx: Context, results: dict[str, Any]) -> None:
    """Run one scenario into ``results``; a failure is recorded under its key, never raised."""
    try:
        results[scenario.key] = scenario.run(ctx)
    except Exception as exc:
        logger.exception("%s scenario failed", scenario.key)
        results[scenario.key] = {"error": f"{type(exc).__name__}: {exc}"}
    _checkpoint(results, ctx.out)


def _ceiling(settings: Settings, case: Case, clip: str, source: str, cache_dir: str) -> dict:
    """The case's ceiling; for the production set also with the naive loop's direct convolutions."""
    args = (clip, case.pack, source)
    kwargs: dict[str, Any] = {
        "frames": settings.ceiling_frames,
        "enhance": case.enhance,
        "cache_dir": cache_dir,
    }
    ceiling = measure_ceiling(*args, **kwargs)
    if case.set_name == "production":
        ceiling["direct"] = measure_ceiling(*args, **kwargs, winograd=False)
    return ceiling


def _analysis_rows(cases: list[Case], clips: str, settings: Settings, cache_dir: str) -> list[dict]:
    """The analysis pass against its parts (``analysis.py``), once per model set and clip size."""
    rows: list[dict] = []
    for case in cases:
        label = f"{case.set_name} {case.size}"
        if case.enhance or any(r["label"] == label for r in rows):
            continue
        clip = make_clip(clips, case.size, case.seconds, settings.fps)
        try:
            row = measure_analysis(clip, case.pack, cache_dir=cache_dir, frames=settings.analysis_frames)
        except Exception as exc:
            logger.exception("analysis figures for %s failed", label)
            row = {"error": f"{type(exc).__name__}: {exc}"}
        rows.append({"label": label, **row})
    return rows


def _start_ray(settings: Settings, local_ray: bool) -> bool:
    """Start Ray unless it is running; True when this call started it (and must shut it down)."""
    import ray

    if ray.is_initialized():
        return False
    if local_ray:
        # address="local": never join another Ray instance running on this machine.
        ray.init(
            address="local",
            num_cpus=settings.cores,
            include_dashboard=False,
            logging_level=logging.WARNING,
        )
    else:
        join_ray(
            ray, logging_level=logging.WARNING
        )  # RAY_ADDRESS: a token cluster's refusal says what to set
    return True


def _checkpoint(results: dict, out: str) -> None:
    """Write what is measured so far (``bench.partial.json``): a late failure keeps it."""
    with open(os.path.join(out, "bench.partial.json"), "w") as fh:
        json.dump(results, fh, indent=2, default=str)


def _load() -> str:
    try:
        return subprocess.run(
            ["uptime"], check=False, capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "-"
