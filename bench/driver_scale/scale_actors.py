"""Simulated render actors for the driver's scale benchmark.

Each simulated actor answers the render actor's interface (``analyze_chunk`` and ``_apart``,
``render_chunk``, ``identity_embeddings``, ``choose_encoders`` and the set-up
probe) and sleeps for the chunk's modelled time instead of decoding or running
models.  Hundreds of them live on a few asyncio Ray actors ("hosts"), one slot
each, so a 2-core machine can stand in for a 256-GPU cluster: the driver sees
256 distinct actor handles, real ObjectRefs and real ``ray.wait``.  Every call
records when it started and ended on its slot, so the benchmark can measure how
long actors waited for the driver between calls.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray

from actors.results import ActorInfo, ChunkAnalysis, PackInfo, SegmentResult
from pipeline.geometry.packing import PackedFaces
from pipeline.geometry.types import Face
from pipeline.store import storage
from pipeline.video.chunking import Chunk
from pipeline.video.encode import EncoderChoice
from pipeline.video.probe import VideoInfo


@dataclass(frozen=True)
class SimulatedWork:
    """Modelled seconds of one chunk's analysis and render (already scaled), and faces per frame."""

    analysis_seconds: float
    render_seconds: float
    faces_per_frame: int = 1
    embedding_dim: int = 128


def _faces(chunk: Chunk, info: VideoInfo, work: SimulatedWork) -> list[list[Face]]:
    """A slowly drifting face per frame (the tracker follows one track per face)."""
    rng = np.random.default_rng(chunk.index)
    emb = rng.standard_normal(work.embedding_dim).astype(np.float32)
    emb /= np.linalg.norm(emb)
    out = []
    for frame in range(chunk.start_frame, chunk.end_frame):
        faces = []
        for k in range(work.faces_per_frame):
            x = 200.0 + 700.0 * k + (frame % 240)
            box = np.array([x, 400.0, x + 500.0, 1000.0], np.float32)
            marks = np.array([[x + 160, 620], [x + 340, 620], [x + 250, 740], [x + 180, 860], [x + 320, 860]])
            faces.append(Face(box, marks.astype(np.float32), 0.9, emb))
        out.append(faces)
    return out


class SimulatedHostWorker:
    """Hosts many simulated actors (slots); every call sleeps, then answers like a render actor."""

    def __init__(self, work: SimulatedWork) -> None:
        self.work = work
        self.busy: dict[int, asyncio.Lock] = {}
        """One lock per slot: like a real actor, a simulated one runs one call at a time (the next waits)."""
        self.calls: list[tuple[int, str, str, int, float, float]] = []
        """(slot, kind, shot, chunk, start, end), times in ``time.time()`` seconds."""

    async def describe(self, slot: int, label: str) -> ActorInfo:
        return ActorInfo(
            label=label,
            host="simulated",
            pid=os.getpid(),
            providers={"swapper": ["Simulated"]},
            warnings=(),
            nvdec=False,
            pack=PackInfo(url="simulated", name="simulated", hash="simulated-pack"),
            identities=("hero",),
            encoders_built_in=(),
            setup_seconds=0.0,
            models_id=slot,  # one simulated actor per slot
            chunks_done=0,
            node_id=ray.get_runtime_context().get_node_id(),
        )

    async def identity_embeddings(self) -> dict[str, np.ndarray]:
        vec = np.zeros(self.work.embedding_dim, np.float32)
        vec[0] = 1.0
        return {"hero": vec}

    async def choose_encoders(self, settings: Any, infos: list[VideoInfo]) -> list[EncoderChoice]:
        return [EncoderChoice("libx264", "yuv420p", {}, False, "mkv") for _ in infos]

    async def analyze_chunk(
        self, slot: int, label: str, url: str, info: VideoInfo, chunk: Chunk
    ) -> ChunkAnalysis:
        async with self.busy.setdefault(slot, asyncio.Lock()):
            start = time.time()
            await asyncio.sleep(self.work.analysis_seconds)
            faces = _faces(chunk, info, self.work)
            end = time.time()
        self.calls.append((slot, "analyze", url, chunk.index, start, end))
        return ChunkAnalysis(chunk.index, chunk.start_frame, faces, {"wall": end - start}, label)

    @ray.method(num_returns=2)
    async def analyze_chunk_apart(
        self, slot: int, label: str, url: str, info: VideoInfo, chunk: Chunk, settings: object = None
    ) -> tuple[ChunkAnalysis, PackedFaces]:
        """The real actor's ``analyze_chunk_apart``: the analysis without its faces, and the faces."""
        return (await self.analyze_chunk(slot, label, url, info, chunk)).apart()

    async def render_chunk(
        self,
        slot: int,
        label: str,
        url: str,
        info: VideoInfo,
        chunk: Chunk,
        tasks: list,
        *,
        encoder: Any,
        segment_url: str,
        faces: Any = None,
        review: Any = None,
        layers: Any = None,
    ) -> SegmentResult:
        """The real actor's ``render_chunk`` signature (``faces``, ``review``, ``layers``: unused by the
        simulation)."""
        async with self.busy.setdefault(slot, asyncio.Lock()):
            start = time.time()
            await asyncio.sleep(self.work.render_seconds)
            data = f"simulated segment {chunk.index}".encode()
            storage.write_bytes(segment_url, data)
            end = time.time()
        self.calls.append((slot, "render", url, chunk.index, start, end))
        return SegmentResult(
            chunk_index=chunk.index,
            url=segment_url,
            sha256="0" * 64,
            bytes=len(data),
            frames=chunk.frame_count,
            faces_swapped=sum(len(f) for f in tasks),
            stage_seconds={"render.swap": end - start},
            providers={"swapper": ["Simulated"]},
            encoder=encoder.name,
            actor=label,
            wall_seconds=end - start,
        )

    async def call_log(self) -> list[tuple[int, str, str, int, float, float]]:
        return list(self.calls)


SimulatedHost = ray.remote(num_cpus=0)(SimulatedHostWorker)
"""``SimulatedHostWorker`` as an asyncio Ray actor (give it a high ``max_concurrency``)."""


class _Method:
    def __init__(self, host: Any, name: str, prefix: tuple[Any, ...]) -> None:
        self._host, self._name, self._prefix = host, name, prefix

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._host, self._name).remote(*self._prefix, *args, **kwargs)


class SimulatedActorHandle:
    """Looks like a render actor's handle to the driver; calls go to its host with its slot."""

    def __init__(self, host: Any, slot: int, label: str) -> None:
        self.slot, self.label = slot, label
        self.analyze_chunk = _Method(host, "analyze_chunk", (slot, label))
        self.analyze_chunk_apart = _Method(host, "analyze_chunk_apart", (slot, label))
        self.render_chunk = _Method(host, "render_chunk", (slot, label))
        self.identity_embeddings = _Method(host, "identity_embeddings", ())
        self.choose_encoders = _Method(host, "choose_encoders", ())
        self._describe = _Method(host, "describe", (slot, label))

    @property
    def __ray_call__(self) -> Any:  # the set-up probe (cluster.schedule.pool.ready_ref)
        describe = self._describe

        class _Probe:
            @staticmethod
            def remote(fn: Any) -> Any:
                return describe.remote()

        return _Probe()


class SimulatedActorClass:
    """Stands in for ``RenderActor`` in :class:`cluster.driver.DriverParts`: spreads actors over hosts."""

    def __init__(self, hosts: list[Any]) -> None:
        self.hosts = hosts
        self.started = 0

    def options(self, **_: Any) -> SimulatedActorClass:
        return self

    def remote(self, config: Any, label: str) -> SimulatedActorHandle:
        slot = self.started
        self.started += 1
        return SimulatedActorHandle(self.hosts[slot % len(self.hosts)], slot, label)
