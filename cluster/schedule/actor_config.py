"""The one configuration every render actor of a job is built from."""

from __future__ import annotations

from actors.config import RenderConfig
from cluster.checks.provenance import watermark_config
from cluster.schedule.pool import PoolPlan, actor_execution_threads
from cluster.spec.job import JobSpec
from pipeline.video.decoders import DecodeConfig


def render_config(spec: JobSpec, pool: PoolPlan) -> RenderConfig:
    """What every actor of the job is built from: pack, execution, identities, faces, marks, threads."""
    from pipeline.provenance.watermark import job_payload

    execution = spec.models.execution
    if pool.num_gpus == 0 and execution.intra_op_threads == 0:
        # CPU actors share the node's cores: each gets as many threads as CPUs it reserved.
        execution = execution.model_copy(update={"intra_op_threads": actor_execution_threads(pool)})
    watermark = watermark_config(spec)
    return RenderConfig(
        watermark=watermark,
        watermark_payload=job_payload(spec.job_id) if watermark is not None else None,
        ai_frame_label=spec.job_id if spec.marking.content_credentials else None,
        review_label=spec.marking.review_label,
        pack_url=spec.models.pack,
        pack_cache_dir=spec.models.cache_dir,
        execution=execution,
        identities=dict(spec.identities),
        faces=spec.faces,
        passes=tuple(p for p in spec.output.passes if p != "tracks"),
        qc=spec.qc,
        limits=spec.limits,
        decode_cache_mb=spec.resources.decode_cache_mb,
        storage=spec.storage,
        # Actors without a GPU have no NVDEC to look for: auto is PyAV there, without a warning.
        decode=spec.decode
        if pool.num_gpus or spec.decode.backend != "auto"
        else DecodeConfig(backend="pyav"),
        # CPU actors' codecs too: an actor uses the cores it reserved, no more.
        codec_threads=actor_execution_threads(pool) if pool.num_gpus == 0 else 0,
    )
