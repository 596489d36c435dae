"""Output codecs and their containers in the job spec: ProRes 4444 / XQ in MOV, DNxHR HQX in MOV or MXF."""

from __future__ import annotations

import pytest

from cluster.spec import parse_spec
from pipeline.errors import SpecError


def _spec(codec: str, url: str) -> dict:
    return {
        "job_id": "ep1",
        "shots": [{"name": "a", "url": "/data/a.mov"}],
        "identities": {"hero": {"images": ["/refs/hero.jpg"]}},
        "output": {"url": url, "codec": codec},
    }


@pytest.mark.parametrize(
    ("codec", "url"),
    [
        ("prores_4444", "/out/{shot}.mov"),
        ("prores_4444xq", "/out/{shot}.MOV"),
        ("dnxhr_hqx", "/out/{shot}.mov"),
        ("dnxhr_hqx", "/out/{shot}.mxf"),
    ],
)
def test_finishing_codecs_in_their_containers(codec: str, url: str) -> None:
    spec = parse_spec(_spec(codec, url))
    assert spec.output.encode_settings().codec == codec


@pytest.mark.parametrize(
    ("codec", "url", "words"),
    [
        ("prores_4444", "/out/{shot}.mp4", "codec prores_4444 needs a .mov output url"),
        ("prores_4444xq", "/out/{shot}.mxf", "codec prores_4444xq needs a .mov output url"),
        ("prores", "/out/{shot}.mxf", "codec prores needs a .mov output url"),
        ("dnxhr_hqx", "/out/{shot}.mp4", "codec dnxhr_hqx needs a .mov or .mxf output url"),
        ("h264", "/out/{shot}.mxf", "codec h264 cannot be written to .mxf"),
        ("hevc", "/out/{shot}.mxf", "codec hevc cannot be written to .mxf"),
    ],
)
def test_codecs_refuse_other_containers(codec: str, url: str, words: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(_spec(codec, url))
    assert err.value.field == "output" and words in err.value.reason, str(err.value)


def test_shot_outputs_may_be_mxf() -> None:
    data = _spec("dnxhr_hqx", "/out/{shot}.mxf")
    data["shots"][0]["output"] = "/elsewhere/a.mxf"
    assert parse_spec(data).shots[0].output == "/elsewhere/a.mxf"
