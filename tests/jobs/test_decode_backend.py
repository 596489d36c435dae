"""``decode.backend: nvdec`` refused before Ray through the real entrypoint (exit 2, the field named)."""

from __future__ import annotations

from pathlib import Path

import pytest
import ray
import yaml

from jobs.render import EXIT_BAD_INPUT, main
from tests.clips import CLIPS, write_clip
from tests.faultjobs import job_spec, make_media


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("decode-media")
    out = make_media(str(root))
    out["prores"] = write_clip(str(root / "prores.mov"), CLIPS["ten_bit_prores"][1])
    return out


def _run(tmp_path: Path, spec: dict) -> int:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    return main([str(path)])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"decode": {"backend": "nvdec"}, "resources": {"gpus_per_actor": 0}},
            "decode.backend: nvdec needs GPU actors, but resources.gpus_per_actor is 0",
        ),
        (
            {"decode": {"backend": "nvdec"}, "resources": {"gpus_per_actor": 1}, "prores": True},
            "decode.backend: nvdec cannot decode shot prores: NVDEC does not decode prores",
        ),
        ({"decode": {"backend": "cuvid"}}, "decode.backend"),
        ({"decode": {"threads": 2}}, "decode.threads"),
    ],
)
def test_nvdec_refused_before_ray(media, tmp_path, capsys, no_ray, change, message) -> None:
    spec = job_spec(media, str(tmp_path / "out"), "decode-refused")
    if change.pop("prores", False):
        spec["shots"] = [{"name": "plate", "url": media["plate"]}, {"name": "prores", "url": media["prores"]}]
    spec.update(change)
    assert _run(tmp_path, spec) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert message in err, err
    assert not ray.is_initialized()
    assert not (tmp_path / "out").exists()
