"""Every output codec carries each source's colour description through a chunked job on Ray.

Five sources (BT.709 limited, BT.601 full range, untagged 8-bit, BT.709 10-bit,
BT.2020 PQ 10-bit) are the shots of one job per codec, two chunks each.  Their
frames hold no face, so every pixel is "outside the faces": decoded with the
tags each file carries, the output equals its source up to the codec and
swscale's rounding, and exactly where the codec keeps the source's pixel format.  A wrong matrix moves the saturated patches by 4 levels or
more, a wrong range by 10 or more.
"""

from __future__ import annotations

import dataclasses

import pytest

from cluster.driver import run_job
from cluster.spec.job import parse_spec
from jobs.demo_media import write_source_image
from pipeline.colour import UNSPECIFIED, ColourTags
from pipeline.video.colr import read_colr
from pipeline.video.probe import probe
from tests.colour_media import SOURCES, TAGS, assert_kept, frame_errors, frame_tags, read_back, write_sources

pytestmark = pytest.mark.ray

CODECS = ("h264", "hevc", "prores", "prores_4444", "prores_4444xq", "dnxhr_hqx")


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str]]:
    folder = tmp_path_factory.mktemp("colour-sources")
    return write_source_image(str(folder / "source.jpg")), write_sources(str(folder))


def _job(media: tuple[str, dict[str, str]], codec: str, out: str, **output: object) -> dict:
    face, sources = media
    ext = "mp4" if codec in ("h264", "hevc") else "mov"
    return {
        "job_id": f"colour-{codec}",
        "shots": [{"name": name, "url": url} for name, url in sources.items()],
        "identities": {"hero": {"images": [face], "face_index": 0}},
        # quality 0: x264 is lossless there, so what is measured is the colour handling
        "output": {"url": f"{out}/{{shot}}.{ext}", "codec": codec, "quality": 0, "preset": "ultrafast",
                   "hardware": False, **output},
        "chunking": {"seconds": 1, "min_seconds": 1},
        "resources": {"cpus_per_actor": 0.5, "max_actors": 2},
    }  # fmt: skip


def expected(codec: str, tags: ColourTags) -> ColourTags:
    """``tags`` as ``codec`` can say them: ProRes is limited range only; HEVC and DNxHR state a range."""
    if codec.startswith("prores") or (tags.range == UNSPECIFIED and codec in ("hevc", "dnxhr_hqx")):
        return dataclasses.replace(tags, range="tv")
    return tags


def _check_shot(codec: str, shot, source_url: str, want: ColourTags) -> None:
    assert shot.status == "published" and shot.chunks == 2, (shot.name, shot.status, shot.error)
    assert shot.colour == want.as_dict(), (shot.name, shot.colour)
    assert read_back(shot.output_url) == want, shot.name
    box = read_colr(shot.output_url)
    if not want.describes_colour():
        assert box is None, (shot.name, box)  # no box: the file's way of saying unspecified
    else:
        assert box is not None and want.codes()[:3] == (box.primaries, box.transfer, box.matrix), shot.name
        # MP4's nclx also carries the range; QuickTime's nclc has no field for it.
        assert box.full_range == (want.range == "pc" if codec in ("h264", "hevc") else None), shot.name
    if codec.startswith("prores"):
        # ProRes also states primaries, transfer and matrix in every frame's header.
        assert frame_tags(shot.output_url) == want, shot.name
    source = probe(source_url)
    same_samples = codec in ("h264", "hevc")  # these keep the source's pixel format, matrix and range
    assert_kept(
        frame_errors(source, shot.output_url, want), f"{codec} {shot.name}", same_samples=same_samples
    )


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_keeps_each_sources_colour(ray_local, media, tmp_path, codec: str) -> None:
    summary = run_job(parse_spec(_job(media, codec, str(tmp_path / "out"))))
    assert summary.ok, summary.table()
    assert [s.name for s in summary.shots] == list(SOURCES)
    for shot in summary.shots:
        _check_shot(codec, shot, media[1][shot.name], expected(codec, TAGS[shot.name]))


def test_output_colour_overrides_the_tags_and_the_conversion(ray_local, media, tmp_path) -> None:
    override = {"primaries": "bt2020", "transfer": "arib-std-b67", "matrix": "bt2020nc"}
    data = _job(media, "prores", str(tmp_path / "out"), colour=override)
    data["shots"] = [s for s in data["shots"] if s["name"] in ("bt601full", "untagged")]
    summary = run_job(parse_spec(data))
    assert summary.ok, summary.table()
    for shot in summary.shots:
        want = ColourTags("bt2020", "arib-std-b67", "bt2020nc", "tv")
        _check_shot("prores", shot, media[1][shot.name], want)
