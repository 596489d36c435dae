"""The reference of ``summary.json`` (what pipelines parse), generated from the summary's own classes.

Every key a job's ``summary.json`` has, with its type (the field's annotation) and what it is (the
attribute docstring under the field in :mod:`cluster.report.summary`, read with :mod:`ast`; the few
keys that are properties or have no docstring take theirs from :data:`DESCRIBED` here).  The keys
come from a summary made the way the driver makes one, with every optional part filled, so a key
added to ``to_dict`` appears here, and one without a description fails the generator::

    python -m jobs.output_reference --write docs/reference/summary-json.md
    python -m jobs.output_reference --check docs/reference/summary-json.md   # CI: exit 1 when it differs
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path
from typing import Any

from cluster.report.summary import SUMMARY_SCHEMA, JobSummary, ShotSummary
from jobs.docs_types import attribute_docs, doc_text, generated_page_main

PAGE = Path("docs/reference/summary-json.md")
REGENERATE = f"python -m jobs.output_reference --write {PAGE}"

DESCRIBED: dict[str, dict[str, tuple[str, str]]] = {
    "job": {
        "schema_version": ("int", "The layout of this file; raised when a key changes meaning or goes."),
        "job_id": ("str", "The spec's `job_id`."),
        "ok": (
            "bool",
            "Every shot published (or skipped by `if_exists: skip`), no QC failure, no job failure.",
        ),
        "work_url": ("str", "The job's work area (manifest, segments, report)."),
        "actors": ("int", "Render actors the job ran at most."),
        "frames": ("int", "Frames of the shots published by this run and earlier ones it kept."),
        "fps": ("float", "`frames` over `wall_seconds`."),
        "wall_seconds": ("float", "From the start of the driver to its end."),
        "first_analysis_seconds": ("float | null", "From the start of the driver to the first analysis."),
        "decode_calls_per_frame": (
            "float | null",
            (
                "Decodes (analyses + renders) per rendered frame: 2.0 without reuse, 1.0 when every "
                "render reused its analysis' pictures; null when nothing was rendered."
            ),
        ),
        "warnings": ("list[str]", "What the job noted and went on (a record set aside, a lossy plate...)."),
        "actor_info": ("list[object]", "Each render actor: its node, providers, models and set-up time."),
        "shots": ("list[object]", "One entry per shot, in the order of the spec (below)."),
    },
    "shot": {
        "name": ("str", "The shot's name (the spec's, or from its file or clip)."),
        "url": ("str", "The source: a video file or an image-sequence pattern."),
        "output_url": ("str", "Where the output was (or would be) published."),
        "status": ("str", "`published`, `skipped` (`if_exists: skip`) or `failed`."),
        "error": ("str | null", "Why the shot failed."),
        "frames": ("int", "Frames of the published output."),
        "chunks": ("int", "Chunks the shot was cut into."),
        "faces_detected": ("int", "Faces the analyses found, all frames together."),
        "faces_swapped": ("int", "Faces replaced, all frames together."),
        "tracks": ("int", "Face tracks the planner followed through the shot."),
        "encoder": ("str | null", "The video encoder the segments were written with (`oiio` for frames)."),
        "providers": ("object", "Per model role, the execution providers the actors ran it on."),
        "chunk_actors": ("list[str]", "The actor that rendered each chunk, in chunk order."),
        "output_bytes": ("int", "The published output's size (a sequence: all its frames)."),
        "output_sha256": (
            "str | null",
            "The published file's sha256 (a sequence: that of its `<number> <sha256>` frame list).",
        ),
        "chunks_reused": ("int", "Chunks whose segment an earlier run committed, used as they were."),
        "analyses_run": ("int", "Analyses this run made."),
        "analyses_reused": ("int", "Analyses an earlier run committed, used as they were."),
        "frames_reused": ("int", "Frames rendered from their analysis' decoded pictures (no second decode)."),
        "fps": ("float", "`frames` over `seconds` for a published shot, else 0."),
        "fixes": ("list[object]", "Only when the shot has fixes: each fix, its frames and what it did."),
        "fixes_rerendered": (
            "list[object]",
            "Only when some: chunks rendered again because their fixes changed.",
        ),
        "review": ("object", "Only with `output.review`: the review movie, contact sheet and their frames."),
    },
    "report": {
        "schema": ("int", "The layout of `report.json`; raised when a key changes meaning or goes."),
        "generated_at": ("str", "When the report was written (UTC, ISO 8601)."),
        "running": ("bool", "An interim report, written while the job runs (the page reloads itself)."),
        "job": ("object", "The job's figures: the keys of `summary.json` above but `shots`."),
        "retries": ("int", "Calls run again, all shots together."),
        "shots": ("list[object]", "Each shot: the keys of `summary.json`'s `shots[]` and those below."),
        "timeline": ("list[object]", "Every call an actor ran (below)."),
        "identities": ("list[str]", "Only when the job has some: the choices of a note's other identity."),
    },
    "report_shot": {
        "retries": ("int", "The shot's calls run again."),
        "warnings": ("list[str]", "What the job noted about this shot."),
        "review": (
            "list[object]",
            "The review list: each flag (frames, track, reason, measure) and its thumbnail.",
        ),
        "frame_size": ("list[int]", "Only when known: the plate's width and height in pixels."),
        "review_media": ("object", "Only with review media: `summary.json`'s `review` of the shot."),
        "qc_file": ("str", "Only when linked: the shot's QC file, relative to the report."),
    },
    "timeline": {
        "actor": ("str", "The actor that ran the call."),
        "shot": ("str", "The shot."),
        "chunk": ("int", "The chunk's index."),
        "start": ("float", "Seconds from the job's start when the call began (3 decimals)."),
        "end": ("float", "Seconds from the job's start when it ended."),
        "attempt": ("int", "1 for the first try, 2 for the first retry..."),
    },
}
"""Keys whose field has no attribute docstring, or that are properties: (type, what it is)."""


def sample() -> JobSummary:
    """A summary as the driver makes one, with every optional part there (so every key shows)."""
    from cluster.report.summary import ReviewOutputs

    shot = ShotSummary("sh010", "plate.mov", "out/sh010.mov")
    shot.review = ReviewOutputs("r.mp4", "r.png", frames=1, flagged_frames=0)
    job = JobSummary(job_id="job", work_url="work", shots=[shot])
    job.edit, job.review_timeline_url, job.marking = {}, "dailies.otio", {}
    return job


def _json_type(annotation: str) -> str:
    """A field's annotation in JSON's words: null for None, object for mappings and classes."""
    text = re.sub(r"(?:dict|Mapping)\[[^\]]*\]", "object", annotation)
    text = re.sub(r"\b(?:tuple|Sequence)\[[^\]]*\]", "list", text)
    text = re.sub(r"\b[A-Z][A-Za-z]+\b", lambda m: "null" if m.group(0) == "None" else "object", text)
    return " | ".join(dict.fromkeys(part.strip() for part in text.split("|")))


def _rows(keys: list[str], cls: type, described: dict[str, tuple[str, str]]) -> list[str]:
    docs = attribute_docs(cls)
    types = {f.name: _json_type(str(f.type)) for f in dataclasses.fields(cls)}
    rows = ["| key | type | what it is |", "|---|---|---|"]
    for key in keys:
        kind, text = described.get(key, (types.get(key, "?"), doc_text(docs.get(key, ""))))
        if not text:
            raise ValueError(f"summary.json key {key!r} ({cls.__name__}) has no description: add one")
        rows.append(f"| `{key}` | {kind.replace('|', '\\|')} | {text} |")
    return rows


def render() -> str:
    """The whole page, the same bytes for the same classes."""
    data: dict[str, Any] = sample().to_dict()
    # Keys written only when there is something to say (a shot's fixes) are added from DESCRIBED.
    shot_keys = list(dict.fromkeys([*data["shots"][0], *DESCRIBED["shot"]]))
    job_keys = list(dict.fromkeys([*data, *DESCRIBED["job"]]))
    lines = [
        "# `summary.json` and `report.json`",
        "",
        "<!-- generated by python -m jobs.output_reference; do not edit -->",
        "",
        "What a job writes when it ends, in its work area (`<work_url>/summary.json`) and where",
        "`--summary-json` says: the figures pipelines parse.  Generated from `cluster/report/summary.py`;",
        f"`schema_version` is {SUMMARY_SCHEMA}.  Times are seconds, rounded to milliseconds.",
        "",
        "## The job",
        "",
        *_rows(job_keys, JobSummary, DESCRIBED["job"]),
        "",
        "## Each shot (`shots[]`)",
        "",
        *_rows(shot_keys, ShotSummary, DESCRIBED["shot"]),
        "",
        *_report_section(),
    ]
    return "\n".join(lines)


def sample_report() -> dict[str, Any]:
    """``report.json`` of :func:`sample`, with every optional part there."""
    from cluster.report.data import REPORT_SCHEMA, JobReport, ShotReport, TimelineEntry

    summary = sample()
    shot = ShotReport(summary.shots[0], 0, [], [], [], frame_size=(1920, 1080))
    entry = TimelineEntry("actor-0", "sh010", 0, "render", 0.0, 1.0, True, 1)
    report = JobReport(summary, "2026-12-07T00:00:00Z", False, {}, 0, [shot], [entry], identities=("hero",))
    data = report.to_dict()
    assert data["schema"] == REPORT_SCHEMA
    return data


def _report_section() -> list[str]:
    from cluster.report.data import REPORT_SCHEMA, JobReport, ShotReport, TimelineEntry

    data = sample_report()
    added = [k for k in data["shots"][0] if k not in sample().shots[0].to_dict()]
    return [
        "## `report.json`",
        "",
        "The report page's data, beside it in the work area (`<work_url>/report.json`), rewritten while",
        f"the job runs; `schema` is {REPORT_SCHEMA}.",
        "",
        *_rows(list(dict.fromkeys([*data, *DESCRIBED["report"]])), JobReport, DESCRIBED["report"]),
        "",
        "### What a shot adds (`shots[]`)",
        "",
        *_rows(
            list(dict.fromkeys([*added, *DESCRIBED["report_shot"]])), ShotReport, DESCRIBED["report_shot"]
        ),
        "",
        "### Each call (`timeline[]`)",
        "",
        *_rows(list(data["timeline"][0]), TimelineEntry, DESCRIBED["timeline"]),
        "",
    ]


def main(argv: list[str] | None = None) -> int:
    return generated_page_main(
        argv, module="jobs.output_reference", page=PAGE, what="summary.json reference", render=render
    )


if __name__ == "__main__":
    sys.exit(main())
