"""The data of the job report (``report.json``): per-shot warnings, stage totals, the timeline.

Built from ``JobSummary.to_dict()`` and the driver's record of which actor ran
which chunk when.  Every pass over the timeline is linear in its length, so an
interim report of a feature-length job (tens of thousands of entries) is
rewritten in well under a second.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict

from pipeline.thumbnails import Thumb

REPORT_SCHEMA = 1
CPU_PROVIDER = "CPUExecutionProvider"
REVIEW_ROWS = 100
"""At most this many flags per shot in the report's review list (the worst; all stay in ``qc``)."""


class TimelineEntry(TypedDict, total=False):
    """One piece of work an actor did; ``start``/``end`` in seconds from the job's start."""

    actor: str
    shot: str
    chunk: int
    kind: Literal["analyze", "render"]
    start: float
    end: float
    ok: bool
    """False when the attempt failed (lost actor, error); default True."""
    attempt: int


def report_data(
    summary: Mapping[str, Any],
    *,
    thumbs: Mapping[str, Sequence[Thumb]] | None = None,
    timeline: Sequence[Mapping[str, Any]] = (),
    stage_seconds: Mapping[str, float] | None = None,
    retries: Mapping[str, int] | None = None,
    running: bool = False,
    generated_at: dt.datetime | None = None,
) -> dict[str, Any]:
    """The data of a job's report (``report.json``).

    ``summary`` is ``JobSummary.to_dict()``; ``thumbs`` maps shot name to its
    thumbnails; ``timeline`` holds :class:`TimelineEntry` dicts; ``stage_seconds``
    overrides the job-wide stage totals (by default the shots' top-level stages
    summed); ``retries`` counts retried work items per shot; ``running`` marks an
    interim report (the page then reloads itself).
    """
    given = set(retries or {})
    retries = dict(retries or {})
    when = (generated_at or dt.datetime.now(dt.UTC)).isoformat(timespec="seconds")
    entries = [_entry(e) for e in timeline]
    failed: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        if not e["ok"]:
            failed.setdefault(e["shot"], []).append(e)
            # Without counts from the dispatcher, each failed attempt in the timeline was retried.
            if e["shot"] not in given:
                retries[e["shot"]] = retries.get(e["shot"], 0) + 1
    shots = [dict(s) for s in summary.get("shots", [])]
    job_warnings = [str(w) for w in summary.get("warnings", [])]
    cpu_fallback = any(_is_cpu_fallback(w) for w in job_warnings)
    for shot in shots:
        name = str(shot.get("name", ""))
        shot["retries"] = int(retries.get(name, 0))
        shot["warnings"] = _shot_warnings(shot, failed.get(name, []), cpu_fallback)
        shot["thumbnails"] = [t.frame for t in (thumbs or {}).get(name, ())]
        shot["review"] = review_rows(shot.get("qc"), shot["thumbnails"])
    stages = dict(stage_seconds) if stage_seconds is not None else _total_stages(shots)
    report = {
        "schema": REPORT_SCHEMA,
        "generated_at": when,
        "running": running,
        "job": {k: v for k, v in summary.items() if k != "shots"},
        "stage_seconds": {k: round(float(v), 4) for k, v in sorted(stages.items())},
        "retries": sum(int(s["retries"]) for s in shots),
        "shots": shots,
        "timeline": entries,
    }
    return report


def review_rows(qc: Mapping[str, Any] | None, thumbnails: Sequence[int]) -> list[dict[str, Any]]:
    """The worst flags of a shot's QC (``ShotQC.to_dict()``), each with the thumbnail to show.

    Flags carry frame numbers, thumbnails source positions: frame ``numbers[i]`` is position
    ``first + i``.  ``thumbnail`` is the thumbnail's position inside the flag's frames nearest
    its worst frame, or None.
    """
    if not qc:
        return []
    numbers = list(qc.get("series", {}).get("numbers", []))
    index = {int(n): i for i, n in enumerate(numbers)}
    first = int(qc.get("first", 0))
    available = sorted(int(t) for t in thumbnails)
    rows = []
    for flag in list(qc.get("flags", []))[:REVIEW_ROWS]:
        a, b = index.get(int(flag["first"])), index.get(int(flag["last"]))
        peak = index.get(int(flag.get("extra", {}).get("peak", flag["first"])), a)
        thumb = None
        if a is not None and b is not None and peak is not None:
            inside = [p for p in available if first + a <= p <= first + b]
            thumb = min(inside, key=lambda p: abs(p - first - peak)) if inside else None
        rows.append({**flag, "thumbnail": thumb})
    return rows


def actor_busy_ratios(timeline: Sequence[Mapping[str, Any]], until: float | None = None) -> dict[str, float]:
    """Share of time each actor spent working, from its first piece of work to ``until``.

    Overlapping work on one actor (several items in flight) counts once.
    ``until`` defaults to the last end in the timeline.  Feed it to
    ``JobMetrics.actor_busy``; the report shows it beside each actor's lane.
    """
    by_actor: dict[str, list[tuple[float, float]]] = {}
    for raw in timeline:
        e = _entry(raw)
        by_actor.setdefault(e["actor"], []).append((e["start"], e["end"]))
    if not by_actor:
        return {}
    end = until if until is not None else max(b for spans in by_actor.values() for _, b in spans)
    ratios = {}
    for actor, spans in by_actor.items():
        spans.sort()
        first = spans[0][0]
        busy, cur_a, cur_b = 0.0, spans[0][0], spans[0][1]
        for a, b in spans[1:]:
            if a > cur_b:
                busy += cur_b - cur_a
                cur_a, cur_b = a, b
            else:
                cur_b = max(cur_b, b)
        busy += min(cur_b, end) - min(cur_a, end)
        window = end - first
        ratios[actor] = min(1.0, busy / window) if window > 0 else 0.0
    return ratios


def _entry(raw: Mapping[str, Any]) -> dict[str, Any]:
    start = float(raw.get("start", 0.0))
    end = max(start, float(raw.get("end", start)))
    return {
        "actor": str(raw.get("actor") or "?"),
        "shot": str(raw.get("shot", "")),
        "chunk": int(raw.get("chunk", -1)),
        "kind": str(raw.get("kind", "render")),
        "start": round(start, 3),
        "end": round(end, 3),
        "ok": bool(raw.get("ok", True)),
        "attempt": int(raw.get("attempt", 1)),
    }


def _is_cpu_fallback(warning: str) -> bool:
    text = warning.lower()
    return "did not start" in text or "cpu fallback" in text or "not available" in text


def _cpu_only_roles(providers: Mapping[str, Sequence[str]]) -> list[str]:
    return sorted(role for role, ps in providers.items() if ps and ps[0] == CPU_PROVIDER)


def _shot_warnings(
    shot: Mapping[str, Any], failed_entries: Sequence[Mapping[str, Any]], cpu_fallback: bool
) -> list[str]:
    out: list[str] = []
    status = shot.get("status")
    if status == "failed":
        out.append(f"failed: {shot.get('error') or 'unknown error'}")
    if status == "published":
        if int(shot.get("faces_detected", 0)) == 0:
            out.append("faces not found: no face was detected in any frame")
        elif int(shot.get("faces_swapped", 0)) == 0:
            out.append("no face was swapped (faces were found but none matched a target identity)")
    cpu_roles = _cpu_only_roles(shot.get("providers", {}))
    if cpu_fallback and cpu_roles:
        out.append(f"CPU fallback: {', '.join(cpu_roles)} ran on the CPU")
    for e in failed_entries:
        out.append(f"{e['kind']} of chunk {e['chunk']} failed on {e['actor']} (attempt {e['attempt']})")
    if int(shot.get("retries", 0)) > 0:
        out.append(f"{shot['retries']} retried chunk(s)")
    return out


def _total_stages(shots: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    total: dict[str, float] = {}
    for shot in shots:
        for key, value in (shot.get("stage_seconds") or {}).items():
            if "." in key:  # sub-stages are already inside their parent
                continue
            total[key] = total.get(key, 0.0) + float(value)
    return total
