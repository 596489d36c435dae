"""decode.backend in a real job: auto falls back to PyAV and says why in the summary; nvdec refuses.

On a machine without PyNvVideoCodec (or without CUDA) every job runs ``auto``; its
output must be what PyAV decodes (the pipeline tests compare the frames byte for
byte) and the summary must carry one line saying NVDEC was not used and why.
"""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

from actors.render import RenderConfig, RenderWorker
from cluster.driver import run_job
from cluster.spec import parse_spec
from jobs.bench.clips import write_source_image
from pipeline.decoders import DecodeConfig, nvdec_runtime_problem
from pipeline.errors import SpecError
from tests.clips import ClipSpec, write_clip
from tests.cluster.test_driver import decoded_indices

nvdec_missing = pytest.mark.skipif(
    importlib.util.find_spec("PyNvVideoCodec") is not None and torch.cuda.is_available(),
    reason="NVDEC may be available here",
)


@nvdec_missing
@pytest.mark.ray
def test_auto_fallback_is_a_summary_warning(ray_local, tmp_path) -> None:
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
    line = f"NVDEC unavailable: {nvdec_runtime_problem()}; decoding with PyAV"
    assert summary.warnings.count(line) == 1, summary.warnings  # once per job, whatever the actor count
    assert decoded_indices(summary.shots[0].output_url) == list(range(30))


@nvdec_missing
def test_an_actor_asked_for_nvdec_without_it_fails_set_up_by_name() -> None:
    worker = RenderWorker(RenderConfig(decode=DecodeConfig(backend="nvdec")), "gpu-less")
    with pytest.raises(SpecError) as caught:
        worker.info()
    assert caught.value.field == "decode.backend"
    assert str(caught.value) == f"decode.backend: nvdec requested but unavailable: {nvdec_runtime_problem()}"
