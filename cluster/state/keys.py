"""Cache keys: the digest of exactly what each step of a job depends on.

A manifest record is reused only when its key equals the key computed now, so a
changed input redoes exactly the steps it affects:

* analysis: the source, the chunk's range, the models and how they execute;
* tracking: the analysis, the tracking settings and the tracker state coming in;
* render: the source, models, ``faces.*``, identities, encoder, marks, the
  face tasks planned for the chunk and the shot's fixes that touch its frames;
* shot: everything the published output depends on, known before any actor runs.

The key kinds are distinct types, so one cannot be passed where another is expected.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, NewType

from cluster.spec.job import JobSpec
from cluster.spec.shot_refs import ShotRef, ShotSettings
from cluster.spec.windows import ShotWindow
from cluster.state.manifest import digest, tasks_digest
from pipeline.errors import RecastError, SpecError
from pipeline.faces.config import AUTO_DETECT_VERSION, REFINE_VERSION, FaceConfig
from pipeline.geometry.types import FaceTask
from pipeline.store import storage
from pipeline.video.chunking import Chunk, ChunkPlan
from pipeline.video.encode import EncoderChoice

AnalysisKey = NewType("AnalysisKey", str)
TrackKey = NewType("TrackKey", str)
RenderKey = NewType("RenderKey", str)
ShotKey = NewType("ShotKey", str)
Fingerprint = dict[str, Any]
"""What identifies a shot's source (see :func:`cluster.state.manifest.input_fingerprint`)."""


def execution_key(spec: JobSpec) -> dict[str, Any]:
    """The parts of ``models.execution`` that change model outputs.

    Thread counts and ``cpu_winograd`` only change float32 rounding (far below
    one code value), so chunks rendered either way may sit in one shot.
    """
    ex = spec.models.execution
    return {"backend": ex.backend, "fp16": ex.fp16}


def marks_key(spec: JobSpec) -> dict[str, Any] | None:
    """What of ``provenance`` changes rendered pixels or published bytes (None: nothing, which only a
    cluster policy's leave to switch marking off allows)."""
    prov = spec.marking
    if not (prov.watermark.enabled or prov.review_label or prov.content_credentials):
        return None
    return {
        "watermark": prov.watermark if prov.watermark.enabled else None,
        "job_id": spec.job_id if prov.watermark.enabled or prov.content_credentials else None,
        "review_label": prov.review_label,
        "content_credentials": prov.content_credentials,
        "signer": prov.signer,
    }


def identities_digest(spec: JobSpec) -> str:
    """Digest of every identity's pictures (their bytes), face index and adapter.

    Reading the pictures here also fails the job early, naming a missing or unreadable one.
    """
    parts: dict[str, Any] = {}
    for name, ident in sorted(spec.identities.items()):
        images = []
        for i, url in enumerate(ident.images):
            try:
                data = storage.read_bytes(url, max_bytes=spec.limits.max_image_bytes)
                images.append(hashlib.sha256(data).hexdigest())
            except RecastError as exc:
                raise SpecError(f"identities.{name}.images[{i}]", f"cannot read {url}: {exc}") from exc
        parts[name] = {
            "images": images,
            "face_index": ident.face_index,
            "adapter": ident.adapter.sha256 if ident.adapter else None,
        }
    return digest(parts)


@dataclass(frozen=True)
class JobKeys:
    """Computes every key of one job from the spec, the model pack hash and the identities digest."""

    spec: JobSpec
    pack_hash: str
    identities: str

    def analysis(
        self, fingerprint: Fingerprint, chunk: Chunk, faces: FaceConfig | None = None
    ) -> AnalysisKey:
        """A chunk's analysis: its source frames, the models and the shot's analysis settings
        (``faces``: the shot's own; None: the job's), not tracking, rendering or encode."""
        faces = self.spec.faces if faces is None else faces
        return AnalysisKey(
            digest(
                {
                    "input": fingerprint,
                    "chunk": [chunk.start_frame, chunk.end_frame],
                    "pack": self.pack_hash,
                    "execution": execution_key(self.spec),
                    # which faces get embeddings (every_frame: the key from before schedules)
                    **({} if faces.embed == "every_frame" else {"embed": [faces.embed, faces.embed_stride]}),
                    **(
                        {}
                        if faces.detect_size == "fixed"
                        else {"detect_size": [faces.detect_size, AUTO_DETECT_VERSION]}
                    ),
                    # faces detected again at the plate's resolution (off: the key from before)
                    **({} if faces.refine == "off" else {"refine": [faces.refine, REFINE_VERSION]}),
                }
            )
        )

    def track(self, analysis: AnalysisKey, state_in: dict[str, Any] | None) -> TrackKey:
        """A chunk's tracking: its analysis, the tracking settings and the tracker state coming in."""
        return TrackKey(digest({"analysis": analysis, "tracking": self.spec.tracking, "state_in": state_in}))

    def render(
        self,
        fingerprint: Fingerprint,
        chunk: Chunk,
        encoder: EncoderChoice,
        tasks: list[list[FaceTask]],
        settings: ShotSettings | None = None,
        frames_url: str | None = None,
        *,
        fixes: list[dict[str, Any]] | None = None,
    ) -> RenderKey:
        """A chunk's segment: its frames, models, render settings, identities, encoder, and exactly the
        face tasks planned for it (so a tracking or selection change redoes only the chunks it alters).

        An image sequence's frames (``frames_url``: where they are written) also depend on that place
        and on ``output.compression``.  ``fixes``: the shot's fixes that touch the chunk's frames
        (:func:`cluster.spec.fixes.fixes_of_chunk`); none: the key of a shot without fixes."""
        parts: dict[str, Any] = {
            "input": fingerprint,
            "chunk": [chunk.start_frame, chunk.end_frame],
            "pack": self.pack_hash,
            "execution": execution_key(self.spec),
            "faces": settings.faces if settings is not None else self.spec.faces,
            "identities": self.identities,
            "encoder": encoder,
            "tasks": tasks_digest(tasks),
        }
        if frames_url is not None:
            parts["frames_url"] = frames_url
            parts["compression"] = self.spec.output.compression
        if fixes:
            parts["fixes"] = fixes
        out = self.spec.output
        if out.passes:  # the chunk's pass segments or frames are part of what it produced
            parts["passes"] = [list(out.passes), out.pass_url]
            if frames_url is None:  # a video's matte and face: scene-linear EXR frames (once ProRes movies)
                parts["passes"].append("exr-scene-linear")
        if out.review is not None:  # the chunk's review segment
            parts["review"] = [out.review.layout, out.review.max_width]
        if self.spec.qc.enabled:  # measures recorded with the chunk
            parts["qc"] = self.spec.qc.identity_every
        return RenderKey(digest(self._with_marks(parts)))

    def shot(
        self,
        ref: ShotRef,
        fingerprint: Fingerprint,
        plan: ChunkPlan,
        settings: ShotSettings | None = None,
        window: ShotWindow | None = None,
    ) -> ShotKey:
        """Everything a shot's output depends on, known before any actor runs.

        A shot's own settings and frame window enter only where they differ from the job's (the
        keys of jobs without them stay as they were)."""
        spec = self.spec
        parts: dict[str, Any] = {
            "input": fingerprint,
            "chunks": [[c.start_frame, c.end_frame] for c in plan.chunks],
            "pack": self.pack_hash,
            "execution": execution_key(spec),
            "tracking": spec.tracking,
            "selection": settings.selection if settings is not None else spec.selection,
            "faces": settings.faces if settings is not None else spec.faces,
            "identities": self.identities,
            "encode": spec.output.encode_settings(),
            "output": ref.output_url,
        }
        if window is not None and not window.whole:
            parts["delivered"] = list(window.delivered)
        if settings is not None and settings.fixes:  # a changed fix changes the output
            parts["fixes"] = [fix.model_dump(mode="json") for fix in settings.fixes]
        if ref.is_sequence:
            parts["compression"] = spec.output.compression
        return ShotKey(digest(self._with_marks(parts)))

    def _with_marks(self, parts: dict[str, Any]) -> dict[str, Any]:
        marks = marks_key(self.spec)
        if marks is not None:  # only then: keys of jobs without provenance do not depend on it
            parts["marks"] = marks
        return parts
