"""The naive face-swap loop, as common open-source tools run it: the benchmark's baseline.

One frame at a time, one stage after another, in one process::

    decode frame -> detect -> recognise every face -> swap -> paste back (-> enhance) -> encode frame

Same model pack and role classes as Recast (``pipeline.models``, ``pipeline.faces``),
ONNX Runtime as those tools run it: every core for each model call and its own
direct convolutions (no Winograd rewrite, ``cpu_winograd=False``), the same encoder
settings as the Recast run it is compared with.  Nothing overlaps: while a model runs,
nothing is decoded or encoded.  Ray-free.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import av

from pipeline.faces.config import FaceConfig, SelectionConfig
from pipeline.faces.select import select_faces
from pipeline.geometry.types import FaceTask
from pipeline.models.runtime.settings import ExecutionConfig
from pipeline.video.chunking import Chunk
from pipeline.video.decode import Frame
from pipeline.video.encode import EncodeSettings, SegmentWriter, choose_encoder
from pipeline.video.probe import probe

logger = logging.getLogger(__name__)


@dataclass
class NaiveResult:
    """What the naive loop did and how long each stage took (wall seconds, summed over frames)."""

    frames: int
    faces_detected: int
    faces_swapped: int
    loop_seconds: float
    """Wall seconds of the frame loop (models already loaded)."""
    setup_seconds: float
    """Pack load, sessions and source identity."""
    stage_seconds: dict[str, float] = field(default_factory=dict)
    encoder: str = ""

    @property
    def fps(self) -> float:
        return self.frames / self.loop_seconds if self.loop_seconds > 0 else 0.0


def naive_render(
    clip_path: str,
    out_path: str,
    *,
    pack_url: str,
    source_image: str,
    face_index: int | None = 0,
    enhance: bool = False,
    encode: EncodeSettings | None = None,
    execution: ExecutionConfig | None = None,
    pack_cache_dir: str | None = None,
) -> NaiveResult:
    """Render every face of ``clip_path`` into ``out_path`` with the naive sequential loop."""
    from pipeline.faces.analyze import FaceAnalyzer
    from pipeline.faces.identity import load_identity
    from pipeline.faces.renderers.cpu import FaceRenderer
    from pipeline.models.loader import load_face_models
    from pipeline.models.pack import load_pack

    started = time.perf_counter()
    execution = execution or ExecutionConfig(cpu_winograd=False)
    models = load_face_models(load_pack(pack_url, cache_dir=pack_cache_dir), execution)
    identity = load_identity("hero", [source_image], models, face_index=face_index)
    # batch_size=1: one frame, one face at a time, like the tools this stands for.
    analyzer = FaceAnalyzer(models, batch_size=1)
    renderer = FaceRenderer(models, {"hero": identity}, FaceConfig(enhance=enhance, batch_size=1))
    selection = SelectionConfig(mode="all", source="hero")
    info = probe(clip_path)
    choice = choose_encoder(encode or EncodeSettings(codec="h264", preset="veryfast", hardware=False), info)
    setup_seconds = time.perf_counter() - started

    stages = {"decode": 0.0, "encode": 0.0}
    detected = swapped = frames = 0
    whole = Chunk(0, 0, info.frame_count, info.pts[0], info.end_pts())
    loop_started = time.perf_counter()
    with av.open(clip_path) as container, SegmentWriter(out_path, info, choice, whole) as writer:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        decoded = container.decode(stream)
        while True:
            t0 = time.perf_counter()
            av_frame = next(decoded, None)
            if av_frame is None:
                break
            if av_frame.pts is None:
                raise ValueError(f"{clip_path}: frame {frames} has no timestamp")
            rgb = av_frame.to_ndarray(format="rgb24")
            stages["decode"] += time.perf_counter() - t0
            faces = analyzer.analyze([rgb], embed=True)[0]
            tasks = [
                FaceTask(track_id=-1, identity=src, box=f.box, landmarks=f.landmarks)
                for f, src in select_faces(faces, selection, {"hero": identity})
            ]
            out = renderer.render([rgb], [tasks])[0]
            t0 = time.perf_counter()
            writer.write(Frame(index=frames, pts=int(av_frame.pts), rgb=out))
            stages["encode"] += time.perf_counter() - t0
            detected += len(faces)
            swapped += len(tasks)
            frames += 1
    loop_seconds = time.perf_counter() - loop_started
    stages.update(analyzer.stage_seconds)
    stages.update(renderer.stage_seconds)
    logger.info("naive loop: %d frames in %.1fs (%.2f fps)", frames, loop_seconds, frames / loop_seconds)
    return NaiveResult(
        frames=frames,
        faces_detected=detected,
        faces_swapped=swapped,
        loop_seconds=loop_seconds,
        setup_seconds=setup_seconds,
        stage_seconds=stages,
        encoder=choice.name,
    )
