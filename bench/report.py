"""The benchmark's report: figures derived from the measured ones, the targets, and the text table.

Pure functions of the ``bench.json`` content, so ``python -m jobs.benchmark
--report bench.json`` re-renders a table without running anything.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType
from typing import Any

from bench.quality import qc_cost

STAGE_COLUMNS = ("decode", "detect+recog", "align", "swap", "enhance", "paste", "encode", "upload", "merge")
TARGETS = MappingProxyType(
    {
        "speedup_2_actors": 1.5,
        "efficiency": 0.85,
        "model_busy_share": 0.85,
        "memory_flat": 0.10,
        "four_chunk_ratio": 0.65,
        "qc_render_ratio": 1.05,
    }
)
"""Production-set speed-up, efficiency and busy share at one actor per core; memory growth;
the 4-chunk scaling ratio; QC's cost (render-stage seconds with QC over without)."""


def derive(results: dict) -> dict:
    """Fill in the figures computed from measured ones: efficiencies, bounds, targets."""
    cores = results["machine"]["cores"]
    for comp in results["comparisons"]:
        on, off = f"recast_{cores}", f"recast_{cores}_noqc"
        comp["qc_cost"] = qc_cost(comp["runs"], on, off) if off in comp["runs"] else None
        ceiling = comp.get("ceiling")
        if not ceiling:
            continue
        limit = ceiling["limit_fps"]
        achieved = comp["runs"][f"recast_{cores}"]["fps"]
        naive_fps = comp["runs"]["naive"]["fps"]
        ceiling["achieved_fps"] = achieved
        ceiling["efficiency"] = achieved / limit if limit else None
        # The naive loop runs the models with direct convolutions: its own ceiling when measured.
        direct = ceiling.get("direct")
        naive_limit = direct["limit_fps"] if direct else limit
        ceiling["naive_efficiency"] = naive_fps / naive_limit if naive_limit else None
        # No runner can beat the machine limit, so the speed-up over the naive loop is
        # bounded by how far the naive loop is from Recast's limit.
        ceiling["max_speedup_over_naive"] = limit / naive_fps if naive_fps else None
        direct_run = comp["runs"].get(f"recast_{cores}_direct")
        if direct and direct_run:
            direct["achieved_fps"] = direct_run["fps"]
            direct["efficiency"] = direct_run["fps"] / direct["limit_fps"] if direct["limit_fps"] else None
    results["targets"] = targets(results, cores)
    return results


def _verdict(value: float | None, target: float, *, at_most: bool = False) -> str:
    """PASS / MISS against ``target``; n/a when not measured."""
    if value is None:
        return "n/a"
    ok = value <= target if at_most else value >= target
    return "PASS" if ok else "MISS"


def targets(results: dict, cores: int) -> list[dict]:
    """Each target beside its measured value: production-set speed-up, efficiency, model busy
    share and QC's cost, the 4-chunk scaling ratio, memory flatness."""
    rows = []
    for comp in results["comparisons"]:
        many = comp["runs"][f"recast_{cores}"]
        ceiling = comp.get("ceiling", {})
        if comp["set"] == "production" and not comp["enhance"]:
            rows.append(
                {
                    "what": f"{comp['label']}: speed-up, {cores} actors vs naive",
                    "target": ">= 1.5",
                    "value": many["speedup"],
                    "verdict": _verdict(many["speedup"], TARGETS["speedup_2_actors"]),
                }
            )
            direct = comp["runs"].get(f"recast_{cores}_direct")
            if direct:
                rows.append(
                    {
                        "what": f"{comp['label']}: (ablation) speed-up without the Winograd rewrite",
                        "target": "-",
                        "value": direct["speedup"],
                        "verdict": "info",
                    }
                )
            rows.append(
                {
                    "what": f"{comp['label']}: efficiency (fps / machine limit)",
                    "target": ">= 0.85",
                    "value": ceiling.get("efficiency"),
                    "verdict": _verdict(ceiling.get("efficiency"), TARGETS["efficiency"]),
                }
            )
            rows.append(
                {
                    "what": f"{comp['label']}: model busy share, {cores} actors",
                    "target": ">= 0.85",
                    "value": many["model_busy_share"],
                    "verdict": _verdict(many["model_busy_share"], TARGETS["model_busy_share"]),
                }
            )
        cost = comp.get("qc_cost")
        if cost:
            rows.append(
                {
                    "what": f"{comp['label']}: QC cost, render seconds QC on / off",
                    "target": "<= 1.05",
                    "value": cost["render_ratio"],
                    "verdict": _verdict(cost["render_ratio"], TARGETS["qc_render_ratio"], at_most=True),
                }
            )
    scaling = results.get("scaling")
    if scaling and "error" not in scaling:
        for set_name, case in scaling["sets"].items():
            rows.append(
                {
                    "what": f"4-chunk shot ({set_name} set), time {cores} actors / 1 actor, 1 CPU each",
                    "target": "<= 0.65",
                    "value": case["time_ratio"],
                    "verdict": _verdict(case["time_ratio"], TARGETS["four_chunk_ratio"], at_most=True),
                }
            )
    memory = results.get("memory")
    if memory and "error" not in memory:
        rows.append(
            {
                "what": "peak actor memory, 5-min vs 60 s shot",
                "target": "growth <= 10 %",
                "value": memory["growth"],
                "verdict": _verdict(memory["growth"], TARGETS["memory_flat"], at_most=True),
            }
        )
    return rows


def _f(value: Any, fmt: str = "{:.2f}") -> str:
    return "-" if value is None else fmt.format(value)


def table(results: dict) -> str:
    """The human-readable report."""
    cores = results["machine"]["cores"]
    lines = _header(results, cores)
    lines += _runs_table(results, cores)
    lines += _quality_section(results, cores)
    lines += _stage_table(results, cores)
    lines += _marking_section(results)
    lines += _ceiling_section(results, cores)
    lines += _scenario_sections(results, cores)
    lines += _targets_section(results, cores)
    return "\n".join(lines)


def _header(results: dict, cores: int) -> list[str]:
    """Machine, clip lengths, what fps means, and the runs table's column heads."""
    machine, cfg = results["machine"], results["settings"]
    return [
        (
            f"Recast benchmark  {machine['when']}  cores={cores}  load before/after: "
            f"{machine['load_before']} / {machine.get('load_after', '-')}"
        ),
        (
            f"clips: astronaut pan/zoom, {cfg['fps']} fps; default set {cfg['default_seconds']:g} s, "
            f"production set {cfg['production_seconds']:g} s (production-cost swapper ~1.5 CPU-s per face, 0.7 with Winograd; "
            "--seconds / --production-seconds override). Encoder libx264 veryfast crf 18 for every runner."
        ),
        (
            "fps = frames / seconds of the frame work (naive: its loop; Recast: first dispatch to published"
            " output, warm actors); job_fps includes actor start-up and model loading."
        ),
        "",
        (
            f"{'case':<26} {'runner':<16} {'act':>3} {'chunks':>6} {'frames':>6} {'fps':>7} {'x naive':>7} "
            f"{'busy':>5} {'job_fps':>7} {'peak MB/actor':>15} {'merge MB/s':>10}"
        ),
    ]


def _runs_table(results: dict, cores: int) -> list[str]:
    """One row per case and runner: fps, speed-up, busy share, memory, merge rate."""
    lines: list[str] = []
    for comp in results["comparisons"]:
        for name, run in comp["runs"].items():
            peaks = ",".join(f"{p:.0f}" for p in run.get("peak_rss_mb") or []) or "-"
            lines.append(
                f"{comp['label']:<26} {name:<16} {run['actors']:>3} {run.get('chunks', 1):>6} {run['frames']:>6} "
                f"{run['fps']:>7.2f} {_f(run.get('speedup')):>7} {run['model_busy_share']:>5.2f} "
                f"{_f(run.get('job_fps')):>7} {peaks:>15} {_f(run.get('merge_mb_per_s'), '{:.0f}'):>10}"
            )
    return lines


def _quality_section(results: dict, cores: int) -> list[str]:
    """Per case, the QC of its Recast run at one actor per core; then QC's own cost."""
    comps = [c for c in results["comparisons"] if c.get("quality")]
    lines: list[str] = []
    if comps:
        every = comps[0].get("qc_identity_every", "-")
        lines += [
            "",
            (
                f"quality (QC of each case's recast_{cores} run, from its own job summary; identity measured on"
                f" one frame in {every} of each track here, production default 12):"
            ),
            (
                f"{'case':<26} {'frames':>6} {'id frames':>9} {'sim mean':>8} {'sim p5':>7} {'unreplaced':>10} "
                f"{'flicker':>7} {'seam':>6}  flags"
            ),
        ]
    for comp in comps:
        q = comp["quality"]
        flags = ", ".join(f"{k}={v}" for k, v in q["flags"].items() if v) or "none"
        lines.append(
            f"{comp['label']:<26} {q['frames']:>6} {q['identity_frames']:>9} {_f(q['similarity_mean'], '{:.3f}'):>8} "
            f"{_f(q['similarity_p5'], '{:.3f}'):>7} {q['unreplaced_frames']:>10} {_f(q['flicker_mean']):>7} "
            f"{_f(q['seam_mean']):>6}  {flags}"
        )
    for comp in results["comparisons"]:
        cost = comp.get("qc_cost")
        if cost:
            lines.append(
                f"QC cost ({comp['label']}, {cost['on']} vs {cost['off']}, same clip and actors): render stage "
                f"{cost['render_seconds_on']:.2f} s on / {cost['render_seconds_off']:.2f} s off = "
                f"{_f(cost['render_ratio'], '{:.3f}')}; job fps {cost['job_fps_on']:.2f} on / "
                f"{cost['job_fps_off']:.2f} off = {_f(cost['job_fps_ratio'], '{:.3f}')}"
            )
            lines.append(
                f"  within one run: render seconds outside align/swap/enhance/paste (QC's measures and identity"
                f" embeds) {_f(cost.get('measures_share_on'), '{:.1%}')} with QC, "
                f"{_f(cost.get('measures_share_off'), '{:.1%}')} without (a shared machine moves the"
                " side-by-side ratio by more than 5 %)"
            )
    return lines


def _stage_table(results: dict, cores: int) -> list[str]:
    """Seconds per stage for every run."""
    lines: list[str] = []
    lines += ["", "seconds per stage (Recast: actor-seconds summed over chunks; decode counts both passes)"]
    lines.append(f"{'case':<26} {'runner':<16} " + " ".join(f"{c:>12}" for c in STAGE_COLUMNS))
    for comp in results["comparisons"]:
        for name, run in comp["runs"].items():
            st = run["stage_seconds"]
            lines.append(
                f"{comp['label']:<26} {name:<16} "
                + " ".join(f"{st[c]:>12.2f}" if c in st else f"{'-':>12}" for c in STAGE_COLUMNS)
            )
    return lines


def _marking_section(results: dict) -> list[str]:
    """What marking every output as AI-made cost each Recast run: the watermark's share of the actors'
    stage seconds, signing's share of the job's wall time."""
    lines = ["", "marking every output (watermark in the actors' render calls; C2PA signing on the driver)"]
    lines.append(f"{'case':<26} {'runner':<16} {'mark s':>8} {'of actor s':>10} {'sign s':>7} {'of wall':>8}")
    for comp in results["comparisons"]:
        for name, run in comp["runs"].items():
            m = run.get("marking")
            if not m:
                continue
            lines.append(
                f"{comp['label']:<26} {name:<16} {m['mark_seconds']:>8.2f} {m['mark_share']:>10.2%} "
                f"{m['sign_seconds']:>7.2f} {m['sign_share_of_wall']:>8.2%}"
            )
    return lines if len(lines) > 2 else []


def _ceiling_section(results: dict, cores: int) -> list[str]:
    """The machine limit of each case, efficiencies against it, the SCRFD-sized cost."""
    lines: list[str] = []
    lines += [
        "",
        "ceiling: CPU-seconds per frame, models on 1 intra-op thread; limit = cores / total",
        (
            "(Recast's CPU sessions run large 3x3 convolutions as Winograd F(4x4,3x3); 'direct' = ONNX Runtime's"
            " own convolutions, as the naive loop runs them)"
        ),
    ]
    for comp in results["comparisons"]:
        c = comp.get("ceiling")
        if not c:
            continue
        per = " ".join(f"{k}={v:.3f}" for k, v in c["cpu_seconds_per_frame"].items())
        lines.append(
            f"{comp['label']:<26} {per}  total={c['total_cpu_seconds_per_frame']:.3f}  limit={c['limit_fps']:.2f} fps  "
            f"achieved={c['achieved_fps']:.2f} ({cores} actors)  efficiency={_f(c.get('efficiency'))}  "
            f"naive efficiency={_f(c.get('naive_efficiency'))}  "
            f"speed-up bound (limit / naive fps)={_f(c.get('max_speedup_over_naive'))}"
        )
        d = c.get("direct")
        if d:
            per = " ".join(f"{k}={v:.3f}" for k, v in d["cpu_seconds_per_frame"].items())
            lines.append(
                f"{'  direct':<26} {per}  total={d['total_cpu_seconds_per_frame']:.3f}  "
                f"limit={d['limit_fps']:.2f} fps  achieved={_f(d.get('achieved_fps'))} ({cores} actors, direct)  "
                f"efficiency={_f(d.get('efficiency'))}"
            )
    if results.get("scrfd_cpu_seconds_per_frame") is not None:
        lines.append(
            f"(SCRFD-sized stand-in detector, not used for detection: {results['scrfd_cpu_seconds_per_frame']:.3f} CPU-s/frame)"
        )
    return lines


def _scenario_sections(results: dict, cores: int) -> list[str]:
    """The optional scenarios: failures first, then each scenario's section."""
    lines: list[str] = []
    for key, value in results.items():
        if isinstance(value, dict) and value.get("error"):
            lines += ["", f"{key} scenario FAILED: {value['error']}"]
    for section in SCENARIO_SECTIONS:
        lines += section(results, cores)
    return lines


def _scaling_section(results: dict, cores: int) -> list[str]:
    """The 4-chunk shot on 1 and N actors, then each case's 1-actor vs N-actor time ratio."""
    lines: list[str] = []
    if results.get("scaling") and "error" not in results["scaling"]:
        sc = results["scaling"]
        lines += ["", f"4-chunk shot ({sc['size']}), every actor 1 CPU:"]
        for set_name, case in sc["sets"].items():
            runs = "  ".join(
                f"{k} actor(s) {r['seconds']:.2f} s ({r['frames']} frames, {r['fps']:.2f} fps, busy {r['model_busy_share']:.2f})"
                for k, r in case["runs"].items()
            )
            lines.append(f"  {set_name:<10} {case['fps']} fps, {case['chunk_seconds']:g} s chunks: {runs}")
            lines.append(f"  {'':<10} time ratio {_f(case['time_ratio'], '{:.3f}')}")
    for comp in results["comparisons"]:
        if comp.get("actors_time_ratio") is not None:
            lines.append(
                f"  (for comparison, {comp['label']}: {cores} actors x 1 CPU / 1 actor x {cores} CPUs "
                f"= {comp['actors_time_ratio']:.3f})"
            )
    return lines


def _memory_section(results: dict, cores: int) -> list[str]:
    """Peak actor memory for the 60 s and 5-minute shots."""
    lines: list[str] = []
    if results.get("memory") and "error" not in results["memory"]:
        m = results["memory"]
        lines += ["", f"memory flatness ({m['size']}, {m['fps']} fps, default pack, 1 actor):"]
        for key, shot in m["shots"].items():
            lines.append(
                f"  {key:>5}: {shot['frames']} frames, {shot['chunks']} chunks, peak RSS {shot['peak_rss_mb']} MB"
            )
        lines.append(f"  growth {_f(m['growth'], '{:+.1%}')}")
    return lines


def _demo_section(results: dict, cores: int) -> list[str]:
    """The demo job with 1 and N actors."""
    lines: list[str] = []
    if results.get("demo") and "error" not in results["demo"]:
        d = results["demo"]
        lines += ["", f"demo job (640x360, {d['seconds']:g} s, default pack):"]
        for key, run in d["runs"].items():
            lines.append(
                f"  {key} actor(s): {run['frames']} frames, {run['chunks']} chunks, {run['fps']:.2f} fps "
                f"(job {run['job_fps']:.2f} fps incl. start-up), first chunk done {_f(run['first_chunk_seconds'])} s after submit"
            )
    return lines


def _scale_section(results: dict, cores: int) -> list[str]:
    """The driver at feature-film scale, its targets marked."""
    scale = results.get("scale")
    if not scale:
        return []
    if "error" in scale:
        return ["", f"driver at scale: failed: {scale['error']}"]
    from bench.driver_scale.scale import scale_table

    lines = ["", scale_table(scale)]
    if "crowd" in scale:
        lines += ["", scale_table(scale["crowd"])]
    return lines


def _plates_section(results: dict, cores: int) -> list[str]:
    """Film plates: I/O rates, colour costs, the job against ProRes 4444."""
    plates = results.get("plates")
    if not plates or "error" in plates:
        return []
    from bench.film_plates.plate_table import plates_table

    return ["", plates_table(plates)]


def _steady_section(results: dict, cores: int) -> list[str]:
    """The paste's steadiness, letterboxed and refined."""
    steady = results.get("steady")
    if not steady or "error" in steady:
        return []
    from bench.steady import steady_table

    return ["", steady_table(steady)]


SCENARIO_SECTIONS: tuple[Callable[[dict, int], list[str]], ...] = (
    _scaling_section,
    _memory_section,
    _demo_section,
    _scale_section,
    _plates_section,
    _steady_section,
)
"""The optional scenarios' table sections, in order."""


def _targets_section(results: dict, cores: int) -> list[str]:
    """Each target with its verdict."""
    lines: list[str] = []
    lines += [
        "",
        "targets (production set on this machine, QC's cost included; the 4-chunk scaling figure; memory flatness):",
    ]
    for row in results["targets"]:
        lines.append(
            f"  {row['verdict']:<5} {row['what']:<62} target {row['target']:<14} measured {_f(row['value'], '{:.3f}')}"
        )
    if results["settings"]["tiny"]:
        lines.append("  (--tiny: test scale with tiny stand-ins; these figures mean nothing)")
    return lines
