"""Render actors: warm model sessions that analyse and render chunks of shots.

One actor owns one set of model sessions (created once, in ``__init__``) and
the identities of the job (loaded once, cached by name).  The driver calls:

* ``info()`` first: providers actually used, warnings, the pack; it re-raises
  any error from set-up (bad pack, source image without a face) so that the
  driver reports it by name instead of as a dead actor;
* ``analyze_chunk(shot_url, info, chunk)`` -> :class:`ChunkAnalysis` (faces with embeddings; small);
  ``analyze_chunk_apart``: the same as two results, the faces apart (what the driver calls);
* ``render_chunk(shot_url, info, chunk, tasks_per_frame, *, encoder, segment_url, faces)``
  -> :class:`SegmentResult`: stream-decodes the range, renders, encodes one
  segment and uploads it to the job's work area;
* ``render_frames(...)``: the same for an image sequence, whose frames are
  written one by one under their own numbers (:mod:`actors.plates`).

Chunk methods run decode, inference and encode overlapped (:func:`pipeline.stages.run_stages`):
memory is a few batches of frames, whatever the length of the shot.

:class:`RenderWorker` is the plain class (in-process, e.g. benchmarks); :data:`RenderActor`, as a Ray actor.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import ray

from actors.batches import BatchRenderer, IdentityCheck
from actors.chunkframes import ChunkFrames
from actors.config import RenderConfig
from actors.consent import PictureEmbeddings
from actors.marking import FrameMarker
from actors.output import redact_actor_output
from actors.plates import PlateFrames, frames_writer
from actors.results import (
    ActorInfo,
    ChunkAnalysis,
    ChunkPass,
    FrameFile,
    PackInfo,
    SegmentResult,
    SequencePass,
    VideoLayersPlan,
    analysis_stages,
)
from actors.review import REVIEW_PASS, PlateView, ReviewSegment, upload
from actors.segments import ChunkSegments, PassLayers
from pipeline.errors import RecastError, SpecError
from pipeline.faces.config import FaceConfig
from pipeline.faces.detectsize import DetectTiles
from pipeline.faces.embedplan import EmbedSchedule
from pipeline.geometry.packing import PackedFaces
from pipeline.geometry.types import Face, FaceTask
from pipeline.review.frames import ReviewLook
from pipeline.stages import StageTimes, run_stages
from pipeline.store import storage
from pipeline.store.retries import RetryTally
from pipeline.video.chunking import Chunk
from pipeline.video.decoders import VideoDecoder
from pipeline.video.encode import EncoderChoice, EncodeSettings, choose_encoder
from pipeline.video.probe import VideoInfo

if TYPE_CHECKING:
    from pipeline.faces.renderers.base import Renderer
    from pipeline.video.decode import Frame

logger = logging.getLogger(__name__)


class RenderWorker(PictureEmbeddings):
    """Model sessions + identities, created once; renders chunk after chunk."""

    def __init__(self, config: RenderConfig, label: str = "actor") -> None:
        redact_actor_output()  # before set-up logs anything: Ray forwards it to the driver unfiltered
        # before the pack or a picture is read; its retries go with each result (set-up's with the first)
        self.retries = RetryTally(storage.configure(config.storage))
        self.config = config
        self.label = label
        self.setup_error: RecastError | None = None
        self.models: Any = None
        self.identities: dict[str, Any] = {}
        self.adapters: Any = None  # AdapterCache when the pack's swapper has LoRA slots
        self.setup_seconds = 0.0
        self.chunks_done = 0
        self._analyzer: Any = None
        self.decoder: VideoDecoder | None = None  # made in _setup: an nvdec that cannot run is a set-up error
        self._renderers: dict[FaceConfig, Renderer] = {}  # one per shot-level faces config, made on first use
        self.plates = PlateFrames(config.codec_threads)  # image-sequence reading and writing
        self.frames = ChunkFrames(self.plates, config.codec_threads, config.decode_cache_mb)
        self.pass_layers = PassLayers()  # a video's pass frames (their colour made once per config)
        started = time.perf_counter()
        try:
            self._setup()
        except RecastError as exc:
            # Kept and re-raised by every call: a failed __init__ would only
            # surface as a dead actor, without the message naming the file.
            logger.error("actor %s set-up failed: %s", label, exc)
            self.setup_error = exc
        self.setup_seconds = time.perf_counter() - started

    def _setup(self) -> None:
        from pipeline.faces.analyze import FaceAnalyzer
        from pipeline.faces.renderers import make_renderer
        from pipeline.models.loader import load_face_models
        from pipeline.models.pack import load_pack

        self.decoder = self.frames.decoder = VideoDecoder(self.config.decode, self.config.execution.device_id)
        pack = load_pack(self.config.pack_url, cache_dir=self.config.pack_cache_dir)
        self.models = load_face_models(pack, self.config.execution)
        if self.models.lora_slots is not None:
            from pipeline.lora import AdapterCache

            self.adapters = AdapterCache(self.models.lora_slots)  # own temp dir; LRU-bounded
        for name in self.config.identities:
            self.identity(name)
        self._analyzer = FaceAnalyzer(self.models)
        self._renderers[self.config.faces] = make_renderer(self.models, self.identities, self.config.faces)

    def renderer(self, faces: FaceConfig | None = None) -> Renderer:
        """The renderer for ``faces`` (a shot's own settings; None: the job's), made once."""
        from pipeline.faces.renderers import make_renderer

        config = faces if faces is not None else self.config.faces
        if config not in self._renderers:
            self._renderers[config] = make_renderer(self.models, self.identities, config)
        return self._renderers[config]

    def identity(self, name: str) -> Any:
        """The loaded identity ``name`` (loaded on first use, then cached)."""
        from pipeline.faces.identity import load_identity, prepared_for

        if name not in self.identities:
            source = self.config.identities[name]
            adapter = None
            if source.adapter is not None:
                if self.adapters is None:
                    raise SpecError(
                        f"identities.{name}.adapter",
                        f"model pack {self.config.pack_url} has no LoRA slots (swapper contract.lora)",
                    )
                adapter = self.adapters.get(source.adapter.url, source.adapter.sha256)
            images, index, limits = list(source.images), source.face_index, self.config.limits
            one = load_identity(name, images, self.models, face_index=index, adapter=adapter, limits=limits)
            self.identities[name] = prepared_for(one, self.models.swapper)  # the pictures are dropped
        return self.identities[name]

    def _ready(self) -> None:
        if self.setup_error is not None:
            raise self.setup_error

    def info(self) -> ActorInfo:
        """Who this actor is and what it actually runs on (raises any set-up error)."""
        self._ready()
        import av

        wanted = ("h264_nvenc", "hevc_nvenc", "libx264", "libx265", "prores_ks")
        return ActorInfo(
            label=self.label,
            host=socket.gethostname(),
            pid=os.getpid(),
            providers=dict(self.models.providers),
            warnings=(*self.models.warnings, *(self.decoder.warnings if self.decoder else [])),
            nvdec=self.decoder is not None and self.decoder.nvdec_ready,
            pack=PackInfo(
                url=self.config.pack_url, name=self.models.pack.manifest.name, hash=self.models.pack.hash
            ),
            identities=tuple(sorted(self.identities)),
            encoders_built_in=tuple(name for name in wanted if name in av.codecs_available),
            setup_seconds=self.setup_seconds,
            models_id=id(self.models),  # the same object for the actor's whole life
            chunks_done=self.chunks_done,
        )

    def identity_embeddings(self) -> dict[str, np.ndarray]:
        """Recognizer-space embedding of every identity (the driver's tracking needs them)."""
        self._ready()
        return {name: np.asarray(ident.embedding, np.float32) for name, ident in self.identities.items()}

    def choose_encoders(self, settings: EncodeSettings, infos: Sequence[VideoInfo]) -> list[EncoderChoice]:
        """The encoder for each shot, chosen here because this is where encoding happens.

        An image sequence is written frame by frame with OpenImageIO in its own format."""
        self._ready()
        return [
            choose_encoder(settings, info) if info.sequence is None else frames_writer(info) for info in infos
        ]

    def analyze_chunk(
        self, shot_url: str, info: VideoInfo, chunk: Chunk, settings: FaceConfig | None = None
    ) -> ChunkAnalysis:
        """Detect and embed (``faces.embed`` says which) every face of ``chunk``, with the shot's own
        ``faces`` (``settings``; None: the job's): embed schedule, detection size, refinement, batch."""
        self._ready()
        settings = self.config.faces if settings is None else settings
        faces: list[list[Face]] = []
        schedule, tiles = EmbedSchedule.of(settings), DetectTiles.of(settings)
        before = dict(self._analyzer.stage_seconds)

        def analyze(frames: list[Frame]) -> list[list[Face]]:
            return self._analyzer.analyze_frames(frames, schedule, tiles, refine=settings.refine == "auto")

        source, collector = self.frames.for_analysis(shot_url, info, chunk)
        times = run_stages(
            source,
            analyze,
            faces.append,
            batch_size=settings.batch_size,
            queue_batches=self.config.queue_batches,
        )
        if len(faces) != chunk.end_frame - chunk.start_frame:
            raise RecastError(
                f"{shot_url}: chunk {chunk.index} decoded {len(faces)} frames, "
                f"expected {chunk.end_frame - chunk.start_frame}"
            )
        self.frames.analysed(collector)  # keeps the decoded pictures for the render, if they fit
        self.chunks_done += 1
        return ChunkAnalysis(
            chunk_index=chunk.index,
            start_frame=chunk.start_frame,
            faces=faces,
            stage_seconds=analysis_stages(times, before, self._analyzer.stage_seconds),
            actor=self.label,
            faces_embedded=schedule.faces_chosen,
            warnings=tuple(tiles.notes) if tiles is not None else (),
            storage_retries=self.retries.take(),
        )

    @ray.method(num_returns=2)
    def analyze_chunk_apart(
        self, shot_url: str, info: VideoInfo, chunk: Chunk, settings: FaceConfig | None = None
    ) -> tuple[ChunkAnalysis, PackedFaces]:
        """:meth:`analyze_chunk` as two results: the analysis without its faces, which the driver
        reads, and the faces, which it hands to the shot's planner actor unread (both owned by the
        driver, the caller, so they outlive this actor)."""
        return self.analyze_chunk(shot_url, info, chunk, settings).apart()

    def render_chunk(
        self,
        shot_url: str,
        info: VideoInfo,
        chunk: Chunk,
        tasks_per_frame: Sequence[Sequence[FaceTask]],
        *,
        encoder: EncoderChoice,
        segment_url: str,
        faces: FaceConfig | None = None,
        review: ReviewLook | None = None,
        layers: VideoLayersPlan | None = None,
    ) -> SegmentResult:
        """Render ``chunk`` with the planned tasks, encode it and upload it to ``segment_url``.

        ``faces``: the shot's own render settings (None: the job's).  ``review``: also write the
        chunk's review segment so (:mod:`actors.review`); ``layers``: the pass frames (:mod:`actors.segments`)."""
        run = self._start(info, chunk, tasks_per_frame, faces)
        source, reused = self.frames.for_render(shot_url, info, chunk)
        threads = self.config.codec_threads
        with tempfile.TemporaryDirectory(prefix="recast-seg-") as tmp:
            path = os.path.join(tmp, "segment.review.mp4")
            rev = (
                None
                if review is None
                else ReviewSegment(path, info, chunk, review, tasks_per_frame, threads=threads)
            )
            frame_layers = None if layers is None else self.pass_layers.layers(info, layers, threads)
            with ChunkSegments(
                tmp, info, encoder, chunk, threads=threads, layers=frame_layers, review=rev
            ) as segments:
                times: StageTimes = run_stages(
                    source,
                    run.batches,
                    segments.write,
                    batch_size=run.faces.batch_size,
                    queue_batches=self.config.queue_batches,
                )
            if (written := segments.written) != chunk.frame_count:
                raise RecastError(
                    f"{shot_url}: chunk {chunk.index} wrote {written} frames, expected {chunk.frame_count}"
                )
            encode_close_done = time.perf_counter()
            uploaded = segments.upload(segment_url)
            upload_seconds = time.perf_counter() - encode_close_done
        stages = {
            "decode": times.read_seconds,
            "render": times.process_seconds,
            "encode": times.write_seconds,
            "upload": upload_seconds,
        }
        return self._result(
            run,
            ChunkOutput(
                url=segment_url,
                sha256=uploaded.sha256,
                bytes=uploaded.bytes,
                frames=segments.written,
                encoder=encoder.name,
                passes=dict(uploaded.passes),
            ),
            stages,
            times,
            reused=reused,
        )

    def render_frames(
        self,
        shot_url: str,
        info: VideoInfo,
        chunk: Chunk,
        tasks_per_frame: Sequence[Sequence[FaceTask]],
        *,
        output_url: str,
        faces: FaceConfig | None = None,
        compression: str | None = None,
        pass_urls: dict[str, str] | None = None,
        review: tuple[ReviewLook, str] | None = None,
    ) -> SegmentResult:
        """Render ``chunk`` of an image sequence and write each frame whole to ``output_url``'s frame
        name (:meth:`actors.plates.PlateFrames.render`); the result's ``frame_files`` lists them.

        ``review``: (look, URL) of the chunk's review segment, through the plate's display/view."""
        run = self._start(info, chunk, tasks_per_frame, faces)
        pass_urls = pass_urls or {}
        with tempfile.TemporaryDirectory(prefix="recast-review-") as tmp:
            path = os.path.join(tmp, "segment.review.mp4")
            with contextlib.ExitStack() as stack:
                rev = None
                if review is not None:
                    pictures = PlateView(self.plates.converter(info))
                    rev = ReviewSegment(path, info, chunk, review[0], tasks_per_frame, pictures=pictures)
                    stack.enter_context(rev)
                written = self.plates.render(
                    info,
                    chunk,
                    self.frames.decode(shot_url, info, chunk),
                    run.batches,
                    output_url=output_url,
                    compression=compression,
                    pass_urls=pass_urls,
                    batch_size=run.faces.batch_size,
                    queue_batches=self.config.queue_batches,
                    review=rev,
                    ai_label=self.config.ai_frame_label,
                )
            reviewed = {REVIEW_PASS: upload(path, review[1])} if review is not None else {}
        output = ChunkOutput(
            url=output_url,
            sha256=written.listing_sha256,
            bytes=written.bytes,
            frames=len(written.frames),
            encoder="oiio",
            frame_files=written.frames,
            passes={k: SequencePass(url=pass_urls[k], frames=v) for k, v in written.passes.items()}
            | reviewed,
        )
        return self._result(run, output, written.stages, written.times)

    def _start(
        self,
        info: VideoInfo,
        chunk: Chunk,
        tasks_per_frame: Sequence[Sequence[FaceTask]],
        faces: FaceConfig | None,
    ) -> ChunkRun:
        """A chunk's render begins: the tasks checked, the renderer and the process stage made."""
        self._ready()
        started = time.perf_counter()
        self._check_tasks(chunk, tasks_per_frame)
        settings = faces if faces is not None else self.config.faces
        renderer = self.renderer(settings)
        return ChunkRun(
            chunk=chunk,
            tasks_per_frame=tasks_per_frame,
            renderer=renderer,
            stage_before=dict(renderer.stage_seconds),
            batches=self._batch_renderer(
                renderer,
                info,
                chunk,
                tasks_per_frame,
                faces=settings,
            ),
            started=started,
            faces=settings,
        )

    def _check_tasks(self, chunk: Chunk, tasks_per_frame: Sequence[Sequence[FaceTask]]) -> int:
        expected = chunk.end_frame - chunk.start_frame
        if len(tasks_per_frame) != expected:
            raise ValueError(f"chunk {chunk.index}: {len(tasks_per_frame)} task lists for {expected} frames")
        return expected

    def _batch_renderer(
        self,
        renderer: Renderer,
        info: VideoInfo,
        chunk: Chunk,
        tasks_per_frame: Sequence[Sequence[FaceTask]],
        *,
        faces: FaceConfig,
    ) -> BatchRenderer:
        """The process stage of a chunk: faces, marks, mattes for passes and QC, QC measures."""
        config = self.config
        qc = config.qc if config.qc is not None and config.qc.enabled else None
        identity = None
        if qc is not None:
            recognizer = self.models.recognizer
            references = {name: np.asarray(i.embedding, np.float32) for name, i in self.identities.items()}
            identity = IdentityCheck(recognizer.embed_aligned, int(recognizer.crop_size), references)
        mark = FrameMarker(config.watermark, config.watermark_payload, config.review_label, info.frame_number)
        return BatchRenderer(
            renderer,
            chunk,
            tasks_per_frame,
            mark=mark,
            mattes=bool(config.passes),
            qc=qc,
            identity=identity,
            renderer_for=lambda overrides: self.renderer(faces.model_copy(update=dict(overrides))),
            detector=self.models.detector,
        )

    def _result(
        self,
        run: ChunkRun,
        output: ChunkOutput,
        stages: dict[str, float],
        times: StageTimes,
        *,
        reused: bool = False,
    ) -> SegmentResult:
        """The chunk's result: what it wrote, its stages (the renderer's as ``render.<stage>``, the marks'
        as ``render.mark``), its QC measures and the frames that got the watermark."""
        batches = run.batches
        marking = {"mark": batches.mark.seconds} if batches.mark and batches.mark.seconds else {}
        for key, value in (run.renderer.stage_seconds | marking).items():
            stages[f"render.{key}"] = value - run.stage_before.get(key, 0.0)
        self.chunks_done += 1
        return SegmentResult(
            chunk_index=run.chunk.index,
            url=output.url,
            sha256=output.sha256,
            bytes=output.bytes,
            frames=output.frames,
            faces_swapped=sum(len(t) for t in run.tasks_per_frame),
            stage_seconds=stages,
            providers=dict(self.models.providers),
            encoder=output.encoder,
            actor=self.label,
            wall_seconds=time.perf_counter() - run.started,
            model_busy_share=times.process_busy_share,
            frames_reused=output.frames if reused else 0,
            frames_decoded=0 if reused else output.frames,
            frame_files=output.frame_files,
            passes=output.passes,
            qc=tuple(batches.measures) if batches.qc is not None else (),
            # which frames got the mark, and its strength
            watermark=batches.mark.record() if batches.mark is not None else None,
            replaced_frames=batches.mark.replaced_runs() if batches.mark is not None else (),
            storage_retries=self.retries.take(),
        )


@dataclass(frozen=True)
class ChunkRun:
    """One chunk's render under way (:meth:`RenderWorker._start`)."""

    chunk: Chunk
    tasks_per_frame: Sequence[Sequence[FaceTask]]
    renderer: Renderer
    stage_before: dict[str, float]
    """The renderer's cumulative stage seconds before the chunk."""
    batches: BatchRenderer
    started: float
    faces: FaceConfig  # the settings it renders with: the shot's own (batch size too), else the job's


@dataclass(frozen=True, kw_only=True)
class ChunkOutput:
    """What a chunk's render wrote: the segment (or frames) and its passes."""

    url: str
    sha256: str
    bytes: int
    frames: int
    encoder: str
    frame_files: tuple[FrameFile, ...] = ()
    passes: dict[str, ChunkPass] = field(default_factory=dict)


RenderActor = ray.remote(RenderWorker)
"""``RenderWorker`` as a Ray actor; size it with ``RenderActor.options(num_gpus=..., num_cpus=...)``."""
