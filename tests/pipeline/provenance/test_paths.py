"""Output URL templates cannot escape the job's output prefix."""

from __future__ import annotations

import pytest

from pipeline.errors import SpecError
from pipeline.provenance.paths import render_output_url

PREFIX = "s3://studio-renders/nightfall/job-7"


def test_renders_under_prefix() -> None:
    url = render_output_url("{shot}/{shot}_v{version:03d}.mp4", PREFIX + "/", {"shot": "sh010", "version": 2})
    assert url == f"{PREFIX}/sh010/sh010_v002.mp4"
    assert render_output_url(f"{PREFIX}/{{shot}}.mov", PREFIX, {"shot": "SH 20.b"}) == f"{PREFIX}/SH 20.b.mov"
    assert render_output_url("{shot}.mp4", "/tmp/out", {"shot": "a"}) == "/tmp/out/a.mp4"


@pytest.mark.parametrize(
    "shot",
    [
        "..",
        "../other-job/sh010",
        "sh/010",
        "/etc/passwd",
        "s3://other-bucket/x",
        ".hidden",
        "a\\b",
        "sh\n010",
        "",
    ],
)
def test_bad_shot_names_refused(shot: str) -> None:
    with pytest.raises(SpecError) as err:
        render_output_url("{shot}.mp4", PREFIX, {"shot": shot})
    assert err.value.field == "output.template.shot"


@pytest.mark.parametrize(
    ("template", "words"),
    [
        ("../{shot}.mp4", "'..'"),
        ("/abs/{shot}.mp4", "absolute"),
        ("s3://other-bucket/{shot}.mp4", "not under the output prefix"),
        ("s3://studio-renders/nightfall/job-70/{shot}.mp4", "not under the output prefix"),
        ("gs://studio-renders/nightfall/job-7/{shot}.mp4", "not under the output prefix"),
        ("{shot}/../../{shot}.mp4", "'..'"),
        ("{shot}//x.mp4", "empty"),
        ("{shot.__class__}.mp4", "plain name"),
        ("{shot[0]}.mp4", "plain name"),
        ("{shot!r}.mp4", "conversions"),
        ("{take}.mp4", "has no value"),
        ("{shot}/", "does not name a file"),
        ("C:{shot}.mp4", "absolute"),
    ],
)
def test_escaping_templates_refused(template: str, words: str) -> None:
    with pytest.raises(SpecError, match=words):
        render_output_url(template, PREFIX, {"shot": "sh010"})


def test_bad_prefix_and_values() -> None:
    with pytest.raises(SpecError, match="output.prefix"):
        render_output_url("{shot}.mp4", "s3://b/../x", {"shot": "a"})
    with pytest.raises(SpecError, match="must be a name or an integer"):
        render_output_url("{shot}.mp4", PREFIX, {"shot": ["a"]})
