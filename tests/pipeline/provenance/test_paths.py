"""Output URL templates cannot escape the job's output prefix."""

from __future__ import annotations

import pytest

from pipeline.errors import SpecError
from pipeline.provenance.paths import render_output_url, render_url

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


# -- render_url: whole templates (output.url, output.pass_url, output.work_url) ------------------


@pytest.mark.parametrize(
    "template",
    [
        "s3://deliveries/ep101/{shot}.mov",
        "s3://deliveries/{job_id}/{shot}/{shot}_recast.####.{ext}",
        "/mnt/out/{shot}/{shot}_recast.%04d.{ext}",
        "/mnt/out/sc_{shot}_v1.mp4",
        "/mnt/out/fixed.mp4",
        "/mnt//out/./{shot}.mp4",
        "file:///mnt/out/{shot}.mp4",
        "out/{shot}.mp4",
        "{shot}.mp4",
        "/mnt/work/{job_id}",
        "s3://work-bucket",
        "s3://work-bucket/{job_id}",
    ],
)
def test_render_url_gives_the_urls_plain_substitution_gave(template: str) -> None:
    values = {"shot": "sc010", "job_id": "ep101-faces", "ext": "exr"}
    expected = template
    for name, value in values.items():
        expected = expected.replace("{" + name + "}", value)
    assert render_url(template, values, field="output.url") == expected


@pytest.mark.parametrize(
    ("template", "values", "field", "words"),
    [
        ("/mnt/out/../etc/{shot}.mp4", {}, "output.url", "'..' segment"),
        ("/mnt/out/../x.mp4", {}, "output.url", "'..' segment"),
        ("s3://b/ep101/../other/{shot}.mov", {}, "output.url", "'..' segment"),
        ("/mnt/out/{shot}/../../x.mp4", {}, "output.url", "'..'"),
        ("/mnt/out/{shot}.mp4", {"shot": "../../etc/x"}, "output.url.shot", "plain name"),
        ("/mnt/out/{shot}.mp4", {"shot": "a/b"}, "output.url.shot", "plain name"),
        ("/mnt/out/{shot}.mp4", {"shot": ".."}, "output.url.shot", "plain name"),
        ("/mnt/out/x.{ext}", {"ext": "v2/../../x"}, "output.url.ext", "plain name"),
        ("s3://{shot}/x.mov", {}, "output.url", "bucket"),
        ("s3://b-{shot}", {}, "output.url", "bucket"),
        ("/mnt/work/../../{job_id}", {"job_id": "j"}, "output.work_url", "'..' segment"),
    ],
)
def test_render_url_refuses_escapes(template: str, values: dict, field: str, words: str) -> None:
    base = "output.work_url" if "work" in field else "output.url"
    with pytest.raises(SpecError, match=words) as err:
        render_url(template, {"shot": "sc010", **values}, field=base)
    assert err.value.field == field


def test_render_url_checks_only_the_values_it_uses() -> None:
    # A pattern shot named after an odd file still gets a fixed output name.
    assert render_url("/mnt/out/fixed.mp4", {"shot": ".odd"}, field="output.url") == "/mnt/out/fixed.mp4"
    # Dots inside a name are no segment of their own.
    assert (
        render_url("/mnt/out/{shot}.mp4", {"shot": "sc01..v2"}, field="output.url") == "/mnt/out/sc01..v2.mp4"
    )
