"""Output codecs and their containers in the job spec: ProRes 4444 / XQ in MOV, DNxHR HQX in MOV or MXF."""

from __future__ import annotations

import pytest

from cluster.spec.job import parse_spec
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


def test_output_colour_is_parsed_into_the_encode_settings() -> None:
    data = _spec("prores", "/out/{shot}.mov")
    data["output"]["colour"] = {"primaries": "bt2020", "transfer": "smpte2084", "matrix": "bt2020nc"}
    colour = parse_spec(data).output.encode_settings().colour
    assert colour is not None and (colour.primaries, colour.transfer, colour.matrix, colour.range) == (
        "bt2020",
        "smpte2084",
        "bt2020nc",
        None,
    )
    assert parse_spec(_spec("h264", "/out/{shot}.mp4")).output.encode_settings().colour is None


@pytest.mark.parametrize(
    ("codec", "url", "colour", "field", "words"),
    [
        ("h264", "/out/{shot}.mp4", {"primaries": "rec709"}, "output.colour.primaries", "not an FFmpeg primaries name"),
        ("h264", "/out/{shot}.mp4", {"transfer": "PQ"}, "output.colour.transfer", "not an FFmpeg transfer name"),
        ("h264", "/out/{shot}.mp4", {"matrix": "ictcp"}, "output.colour.matrix", "cannot be converted to"),
        ("h264", "/out/{shot}.mp4", {"range": "limited"}, "output.colour.range", "use one of tv, pc or unspecified"),
        ("h264", "/out/{shot}.mp4", {"range": 1}, "output.colour.range", "valid string"),
        ("h264", "/out/{shot}.mp4", {"gamma": "2.4"}, "output.colour.gamma", "unknown key"),
        ("prores", "/out/{shot}.mov", {"range": "pc"}, "output.colour.range", "prores stores limited range only"),
        ("prores_4444xq", "/out/{shot}.mov", {"range": "pc"}, "output.colour.range", "limited range only"),
        ("hevc", "/out/{shot}.mp4", {"range": "unspecified"}, "output.colour.range", "hevc always states a range"),
        ("dnxhr_hqx", "/out/{shot}.mxf", {"range": "unspecified"}, "output.colour.range", "always states a range"),
    ],
)  # fmt: skip
def test_bad_output_colour(codec: str, url: str, colour: dict, field: str, words: str) -> None:
    data = _spec(codec, url)
    data["output"]["colour"] = colour
    with pytest.raises(SpecError) as err:
        parse_spec(data)
    assert err.value.field == field and words in err.value.reason, str(err.value)
