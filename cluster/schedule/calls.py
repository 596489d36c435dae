"""The calls the driver makes on render actors, and results an earlier run left, as values."""

from __future__ import annotations

from typing import Any

from actors.results import SegmentResult, SequencePass, VideoLayersPlan, pass_sha256
from cluster.checks.prepare import PlannedShot
from cluster.schedule.shot_run import ChunkRender, ShotRun
from cluster.schedule.work_queue import WorkItem
from cluster.spec.job import JobSpec
from cluster.state.manifest import RenderRecord
from pipeline.geometry.types import FaceTask
from pipeline.passes.naming import LAYERS
from pipeline.review.frames import ReviewLook
from pipeline.video.chunking import Chunk
from pipeline.video.encode import EncoderChoice
from pipeline.video.probe import VideoInfo


def reused_segment(record: RenderRecord, encoder: EncoderChoice) -> SegmentResult:
    """A segment committed by an earlier run, as if just rendered."""
    return SegmentResult(
        chunk_index=record.chunk,
        url=record.segment_url,
        sha256=record.sha256,
        bytes=record.bytes,
        frames=record.frames,
        faces_swapped=record.faces_swapped,
        stage_seconds={},
        providers={},
        encoder=encoder.name,
        actor=record.actor or "manifest",
        wall_seconds=0.0,
        frame_files=record.frame_files,
        passes=dict(record.passes),
        qc=record.qc,
        watermark=record.watermark,
        replaced_frames=record.replaced_frames,
    )


def segment_record(result: SegmentResult, key: str) -> RenderRecord:
    """The record that commits a segment just rendered under ``key`` (the inverse of :func:`reused_segment`)."""
    return RenderRecord(
        chunk=result.chunk_index,
        key=key,
        segment_url=result.url,
        sha256=result.sha256,
        bytes=result.bytes,
        frames=result.frames,
        faces_swapped=result.faces_swapped,
        actor=result.actor,
        frame_files=result.frame_files,
        passes=dict(result.passes),
        qc=result.qc,
        watermark=result.watermark,
        replaced_frames=result.replaced_frames,
    )


def segment_sha256(segments: list[SegmentResult]) -> dict[str, str]:
    """URL -> recorded sha256 of every segment and pass segment of a video shot (checked at the merge)."""
    out = {s.url: s.sha256 for s in segments}
    for s in segments:
        out.update(pass_sha256(s.passes))
    return out


def sequence_frames(segments: list[SegmentResult], name: str | None = None) -> dict[int, tuple[str, int]]:
    """Frame number -> (sha256, bytes) of every frame an image sequence's segments wrote: the output's
    (``name`` None) or pass ``name``'s."""
    out: dict[int, tuple[str, int]] = {}
    for s in segments:
        if name is None:
            files = s.frame_files
        elif isinstance(entry := s.passes[name], SequencePass):
            files = entry.frames
        else:
            raise TypeError(f"chunk {s.chunk_index}: pass {name} is a video segment, not frames")
        out.update({int(f.number): (f.sha256, f.bytes) for f in files})
    return out


def adapter_identities(spec: JobSpec, tasks: list[list[FaceTask]]) -> tuple[str, ...]:
    """Identities with an adapter that a chunk renders: actors that hold them are preferred."""
    idents = spec.identities
    names = {task.identity for frame in tasks for task in frame}
    return tuple(sorted(n for n in names if n in idents and idents[n].adapter is not None))


_RENDER, _ANALYZE = 0, 1  # render work first: it finishes shots


def analysis_item(run: ShotRun, chunk: Chunk, faces: dict[tuple[str, int], Any]) -> WorkItem:
    """The analysis of ``chunk``: after every pending render, the longest shots first.  Its call's
    faces (a reference, never read by the driver) go into ``faces`` under (shot, chunk)."""
    return WorkItem(
        priority=(_ANALYZE, run.rank, chunk.index),
        kind="analyze",
        shot=run.name,
        chunk=chunk.index,
        call=analyze_call(run, chunk, faces),
    )


def render_item(
    run: ShotRun, render: ChunkRender, segment_url: str, spec: JobSpec, *, review_url: str | None = None
) -> WorkItem:
    """The render of a planned chunk, preferably on the actor that analysed it (when idle)."""
    chunk = render.chunk
    return WorkItem(
        priority=(_RENDER, run.rank, chunk.index),
        affinity=render.affinity,
        prefer=run.analysed_by.get(chunk.index),
        kind="render",
        shot=run.name,
        chunk=chunk.index,
        call=render_call(
            run,
            chunk,
            render.tasks,
            segment_url,
            spec.output.compression,
            review=review_look(run.name, run.shot.info, spec),
            review_url=review_url,
        ),
    )


def review_look(shot: str, info: VideoInfo, spec: JobSpec) -> ReviewLook | None:
    """How the review frames of ``shot`` (probed as ``info``) look (None: no review movie)."""
    review = spec.output.review
    if review is None:
        return None
    return ReviewLook.of(shot, info.width, info.height, review.layout, review.max_width)


def analyze_call(run: ShotRun, chunk: Chunk, faces: dict[tuple[str, int], Any]) -> Any:
    """The analysis call: the driver waits on its first result (the analysis without its faces);
    the second, the faces, is kept in ``faces`` for the shot's planner actor (a retry replaces it)."""
    url, info, key = run.shot.ref.url, run.info_ref, (run.name, chunk.index)
    settings = run.shot.settings.faces  # the shot's own analysis settings (its key has them too)

    def call(actor: Any) -> Any:
        analysis, faces[key] = actor.analyze_chunk_apart.remote(url, info, chunk, settings)
        return analysis

    return call


def render_call(
    run: ShotRun,
    chunk: Chunk,
    tasks: list[list[FaceTask]],
    segment_url: str,
    compression: str | None,
    *,
    review: ReviewLook | None = None,
    review_url: str | None = None,
) -> Any:
    """The render call of a chunk; ``review_url``: where an image sequence's review segment goes (a
    video's goes beside its segment)."""
    url, info, encoder, faces = run.shot.ref.url, run.info_ref, run.encoder, run.shot.settings.faces
    if run.shot.is_sequence:
        passes = run.shot.pass_urls
        plate_review = None if review is None or review_url is None else (review, review_url)
        return lambda actor: actor.render_frames.remote(
            url,
            info,
            chunk,
            tasks,
            output_url=segment_url,
            faces=faces,
            compression=compression,
            pass_urls=passes,
            review=plate_review,
        )
    layers = video_layers(run.shot)
    return lambda actor: actor.render_chunk.remote(
        url,
        info,
        chunk,
        tasks,
        encoder=encoder,
        segment_url=segment_url,
        faces=faces,
        review=review,
        layers=layers,
    )


def video_layers(shot: PlannedShot) -> VideoLayersPlan | None:
    """The matte and face pass frames a video shot's chunks write (None: no such pass asked)."""
    urls = {name: url for name, url in shot.pass_urls.items() if name in LAYERS}
    if not urls:
        return None
    return VideoLayersPlan(urls=urls, config=shot.settings.colour.config, delivered=shot.window.delivered)
