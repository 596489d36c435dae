"""What a render actor is set up with: :class:`RenderConfig`, the same for every actor of a job.

Built by the driver from the job spec (:mod:`cluster.schedule.actor_config`), sent once to each
actor (:mod:`actors.render`).
"""

from __future__ import annotations

from pydantic import Field

from pipeline.configbase import Frozen
from pipeline.faces.config import FaceConfig, IdentitySource
from pipeline.limits import InputLimits
from pipeline.models.runtime.settings import ExecutionConfig
from pipeline.provenance.watermark import WatermarkConfig
from pipeline.qc.config import QcConfig
from pipeline.store.retries import StorageConfig
from pipeline.video.decoders import DecodeConfig


class RenderConfig(Frozen):
    """Everything an actor needs to set itself up; identical for every actor of a job.

    ``faces.batch_size`` is also the number of frames per batch between the stages.
    """

    pack_url: str = "builtin:default"
    pack_cache_dir: str | None = None
    execution: ExecutionConfig = ExecutionConfig()
    identities: dict[str, IdentitySource] = Field(default_factory=dict)
    faces: FaceConfig = FaceConfig()
    queue_batches: int = Field(default=2, ge=1)
    codec_threads: int = Field(default=0, ge=0)
    """Decoder and encoder threads each; 0: the codecs' defaults (one per core).  The
    driver sets CPU actors' to their CPU reservation so actors sharing a node don't
    oversubscribe its cores."""
    decode: DecodeConfig = DecodeConfig()  # PyAV or NVDEC (pipeline.video.decoders); the spec's ``decode``
    watermark: WatermarkConfig | None = None
    """When set, ``watermark_payload`` is marked invisibly in every replaced face's box."""
    watermark_payload: int | None = None
    ai_frame_label: str | None = None
    """The job id stated in the AI-modified header attribute of every image-sequence frame whose
    faces were replaced (:func:`pipeline.provenance.sidecar.ai_header_attributes`); None: none."""
    review_label: bool = False
    """Draw a visible "AI-altered" label on every frame (review copies)."""
    passes: tuple[str, ...] = ()
    """Compositing passes to write with each chunk (``output.passes``)."""
    qc: QcConfig | None = None
    """QC measures taken while rendering (None or disabled: none)."""
    limits: InputLimits = InputLimits()  # identity pictures' file size and pixels (the spec's)
    storage: StorageConfig = StorageConfig()
    """Object-store retries and time limits (the spec's ``storage``), set up before anything is read."""
    decode_cache_mb: int = Field(default=2048, ge=0)
    """Decoded pictures kept from analyses for renders on this actor (:mod:`actors.chunkframes`); 0: off."""
