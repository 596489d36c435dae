"""decode.backend in a real job and on an actor: auto on CPU actors is PyAV without a word; a GPU
actor whose NVDEC cannot run reports one fallback line (for the summary); nvdec refuses.

The output of ``auto`` here must be what PyAV decodes (the pipeline tests compare the
frames byte for byte).
"""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

from actors.render import RenderConfig, RenderWorker
from cluster.driver import run_job
from cluster.spec.job import parse_spec
from jobs.demo_media import write_source_image
from pipeline.errors import SpecError
from pipeline.video.decoders import DecodeConfig, nvdec_runtime_problem
from tests.clips import ClipSpec, decoded_indices, write_clip

nvdec_missing = pytest.mark.skipif(
    importlib.util.find_spec("PyNvVideoCodec") is not None and torch.cuda.is_available(),
    reason="NVDEC may be available here",
)


@pytest.mark.ray
def test_auto_on_cpu_actors_decodes_with_pyav_and_says_nothing(ray_local, tmp_path) -> None:
    clip = write_clip(str(tmp_path / "shot.mp4"), ClipSpec(frames=30, rate=24, gop=12, audio=False))
    data = {
        "job_id": "decode-auto",
        "shots": [{"name": "shot", "url": clip}],
        "identities": {
            "hero": {"images": [write_source_image(str(tmp_path / "source.jpg"))], "face_index": 0}
        },
        "output": {"url": os.path.join(str(tmp_path), "out", "{shot}.mp4"), "preset": "ultrafast"},
        "chunking": {"seconds": 1, "min_seconds": 1, "snap_to_keyframes": False},
        "resources": {"cpus_per_actor": 1, "max_actors": 1},
        "faces": {"batch_size": 4},
    }
    summary = run_job(parse_spec(data))
    assert summary.ok, summary.table()
    # CPU actors have no NVDEC to fall back from: a warning on every CPU job would be noise.
    assert not [w for w in summary.warnings if "NVDEC" in w], summary.warnings
    assert decoded_indices(summary.shots[0].output_url) == list(range(30))


@nvdec_missing
def test_a_gpu_actor_without_nvdec_reports_the_fallback_for_the_summary() -> None:
    # What a GPU actor whose NVDEC cannot run reports (the driver puts actors' warnings in the summary).
    info = RenderWorker(RenderConfig(decode=DecodeConfig(backend="auto")), "no-nvdec").info()
    line = f"NVDEC unavailable: {nvdec_runtime_problem()}; decoding with PyAV"
    assert info.warnings.count(line) == 1 and info.nvdec is False, info.warnings


@nvdec_missing
def test_an_actor_asked_for_nvdec_without_it_fails_set_up_by_name() -> None:
    worker = RenderWorker(RenderConfig(decode=DecodeConfig(backend="nvdec")), "gpu-less")
    with pytest.raises(SpecError) as caught:
        worker.info()
    assert caught.value.field == "decode.backend"
    assert str(caught.value) == f"decode.backend: nvdec requested but unavailable: {nvdec_runtime_problem()}"
