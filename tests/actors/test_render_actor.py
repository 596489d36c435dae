"""The render actor on a real local Ray: warm sessions reused, analysis per frame, segments uploaded to S3."""

from __future__ import annotations

import hashlib

import av
import numpy as np
import pytest
import ray

from actors.render import RenderActor, RenderConfig
from jobs.demo_media import make_face_clip, write_source_image
from pipeline.faces.config import FaceConfig, IdentitySource, SelectionConfig
from pipeline.store import storage
from pipeline.tracking.faceplan import plan_shot
from pipeline.tracking.tracker import TrackingConfig, track_chunk
from pipeline.video.chunking import plan_chunks
from pipeline.video.encode import EncodeSettings
from pipeline.video.probe import probe
from tests.raytools import s3_env_vars

pytestmark = pytest.mark.ray


@pytest.fixture()
def ray_s3(ray_local, s3_endpoint) -> dict:
    """The shared Ray; the loopback S3 settings reach the actor through its own runtime env."""
    return {"env_vars": s3_env_vars()}


def test_actor_analyzes_and_renders_chunks(ray_s3, s3_bucket, tmp_path) -> None:
    clip = make_face_clip(str(tmp_path / "plate.mp4"), seconds=2.0, width=200, height=150, gop=12)
    url = f"{s3_bucket}/plates/plate.mp4"
    storage.publish_file(clip, url)
    source = write_source_image(str(tmp_path / "source.jpg"))
    config = RenderConfig(
        identities={"hero": IdentitySource(images=(source,), face_index=0)}, faces=FaceConfig(batch_size=4)
    )
    actor = RenderActor.options(num_cpus=1, runtime_env=ray_s3).remote(config, "a0")
    first = ray.get(actor.info.remote())
    assert first.label == "a0" and first.identities == ("hero",)
    assert "CPUExecutionProvider" in first.providers["detector"]

    info = probe(url)
    plan = plan_chunks(info, 1.0, min_seconds=1.0, snap_to_keyframes=False)
    assert len(plan.chunks) == 2
    analyses = ray.get([actor.analyze_chunk.remote(url, info, c) for c in plan.chunks])
    faces, ids, state = [], [], None
    for chunk, analysis in zip(plan.chunks, analyses, strict=True):
        assert len(analysis.faces) == chunk.frame_count
        assert all(len(f) == 1 for f in analysis.faces)
        # per track (the default): the chunk's first frame and every 8th frame of the shot
        assert analysis.faces[0][0].embedding is not None
        assert 0 < analysis.faces_embedded < chunk.frame_count
        frame_ids, state = track_chunk(analysis.faces, chunk.start_frame, TrackingConfig(), state)
        faces += analysis.faces
        ids += frame_ids
    embeddings = ray.get(actor.identity_embeddings.remote())
    face_plan = plan_shot(
        faces,
        ids,
        SelectionConfig(source="hero"),
        embeddings,
        TrackingConfig(),
        frame_times=info.frame_times(),
    )
    encoder = ray.get(actor.choose_encoders.remote(EncodeSettings(preset="ultrafast"), [info]))[0]

    results = ray.get(
        [
            actor.render_chunk.remote(
                url,
                info,
                c,
                face_plan.for_range(c.start_frame, c.end_frame),
                encoder=encoder,
                segment_url=f"{s3_bucket}/work/seg{c.index}.{encoder.container}",
            )
            for c in plan.chunks
        ]
    )
    for chunk, result in zip(plan.chunks, results, strict=True):
        data = storage.read_bytes(result.url)
        assert hashlib.sha256(data).hexdigest() == result.sha256 and len(data) == result.bytes
        assert result.frames == chunk.frame_count == result.faces_swapped
        assert result.encoder == encoder.name and result.actor == "a0"
        assert result.stage_seconds["render"] > 0 and result.stage_seconds["encode"] > 0
        with storage.fetched(result.url, suffix=".mp4") as local, av.open(local) as container:
            rendered = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
        assert len(rendered) == chunk.frame_count
        with av.open(clip) as container:
            source_frames = [
                f.to_ndarray(format="rgb24")
                for i, f in enumerate(container.decode(video=0))
                if chunk.start_frame <= i < chunk.end_frame
            ]
        diffs = [np.abs(a.astype(int) - b.astype(int)).mean() for a, b in zip(source_frames, rendered)]
        assert min(diffs) > 1.0  # every frame had its face replaced

    # The sessions were created once and served all four calls.
    last = ray.get(actor.info.remote())
    assert last.models_id == first.models_id and last.pid == first.pid
    assert last.setup_seconds == first.setup_seconds and last.chunks_done == 4
    ray.kill(actor)


def test_setup_errors_reach_the_caller_by_name(ray_s3, tmp_path) -> None:
    from pipeline.errors import ModelPackError, StorageError

    config = RenderConfig(pack_url=str(tmp_path / "no-such-pack"))
    actor = RenderActor.options(num_cpus=0.5, runtime_env=ray_s3).remote(config, "bad")
    with pytest.raises((ModelPackError, StorageError)) as err:
        ray.get(actor.info.remote())
    assert "no-such-pack" in str(err.value)
    ray.kill(actor)
