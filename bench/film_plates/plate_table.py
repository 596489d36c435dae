"""The plates scenario's table (markdown), a pure function of ``plates.json``'s content."""

from __future__ import annotations

from typing import Any


def _f(value: Any, fmt: str = "{:.2f}") -> str:
    return "-" if value is None else fmt.format(value)


def plates_table(figures: dict[str, Any]) -> str:
    """I/O rates, colour costs and the job comparison as markdown tables."""
    m, s = figures["machine"], figures["settings"]
    lines = [
        f"## Film plates ({m['cores']} cores, {m['cpu']}, {m['memory_gb']} GB)",
        "",
        (
            f"I/O: one process, {s['cores']} I/O threads (an actor's CPU count), `write_plate` / `read_plates`"
            " (reads include the conversion to the model space). Local = files just written (page cache);"
            " S3 = loopback moto server in the same process."
        ),
        "",
        (
            "| size | format | frames | MB/frame | local write fps | local read fps | S3 write fps "
            "| S3 read fps | S3/local write | S3/local read |"
        ),
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in figures["io"]:
        local, s3 = row["local"], row.get("s3", {})
        ratio = row.get("s3_over_local", {})
        lines.append(
            f"| {row['size']} | {row['format']} | {row['frames']} | {row['mb_per_frame']:.1f} "
            f"| {local['write']['fps']:.2f} | {local['read']['fps']:.2f} "
            f"| {_f(s3.get('write', {}).get('fps'))} | {_f(s3.get('read', {}).get('fps'))} "
            f"| {_f(ratio.get('write'))} | {_f(ratio.get('read'))} |"
        )
    lines += [
        "",
        (
            "Colour round trip per frame (ms, median): `to_model` of the whole frame, `to_plate` of a"
            " face-sized region, `merge_back` of a face-sized change (it includes its own to_model +"
            " to_plate); round trip = to_model + merge_back."
        ),
        "",
        (
            "| size | format | face px | to_model (frame) | to_plate (face) | merge_back (face) | round trip "
            "| x smallest size |"
        ),
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in figures["colour"]:
        lines.append(
            f"| {row['size']} | {row['format']} | {row['face_side_px']} | {row['to_model_frame_ms']:.1f} "
            f"| {row['to_plate_face_ms']:.1f} | {row['merge_back_face_ms']:.1f} | {row['round_trip_ms']:.1f} "
            f"| {_f(row.get('round_trip_over_smallest'))} |"
        )
    job = figures.get("job")
    if job:
        lines += [
            "",
            (
                f"Whole job: {job['frames']} frames of {job['size']}, 1 CPU actor x {job['cpus_per_actor']} CPUs,"
                " built-in pack; fps = frames / (first dispatch to published output)."
            ),
            "",
            "| plate | input MB | frames | faces | fps | job fps (with start-up) |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for name, run in job["runs"].items():
            lines.append(
                f"| {name} | {run['input_mb']:.1f} | {run['frames']} | {run['faces_swapped']} "
                f"| {run['fps']:.2f} | {run['job_fps']:.2f} |"
            )
        lines += ["", f"sequence fps / ProRes 4444 fps = {_f(job['sequence_over_prores_fps'], '{:.3f}')}"]
    return "\n".join(lines)
