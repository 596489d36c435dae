"""``output.review`` and ``output.review_timeline_url``: validated, made canonical, and every file
they name is a destination of the job (authorised, checked for collisions)."""

from __future__ import annotations

import pytest

from cluster.checks.destinations import destinations, written_urls
from cluster.spec.job import parse_spec
from cluster.spec.review import contact_url
from cluster.spec.shot_refs import expand_shots
from pipeline.errors import SpecError


def _spec(**output) -> dict:
    return {
        "job_id": "ep101",
        "shots": [{"name": "sh010", "url": "/data/a.mp4"}, {"name": "sh020", "url": "/data/b.mov"}],
        "identities": {"hero": {"images": ["/refs/hero.jpg"]}},
        "output": {"url": "/out/{shot}.mp4", **output},
    }


def test_review_defaults_and_urls() -> None:
    spec = parse_spec(_spec(review={"url": "/review/{job_id}/{shot}_review.mp4"}))
    review = spec.output.review
    assert review is not None and review.layout == "side_by_side" and review.max_width == 1920
    movie = review.movie_url("sh010", spec.job_id)
    assert movie == "/review/ep101/sh010_review.mp4"
    assert contact_url(movie) == "/review/ep101/sh010_review_contact.png"
    assert parse_spec(_spec()).output.review is None


def test_relative_review_urls_are_canonical(tmp_path) -> None:
    data = _spec(review={"url": "dailies/{shot}.mp4"}, review_timeline_url="dailies/all.otio")
    spec = parse_spec(data, base_dir=str(tmp_path))
    assert spec.output.review is not None and spec.output.review.url == f"{tmp_path}/dailies/{{shot}}.mp4"
    assert spec.output.review_timeline_url == f"{tmp_path}/dailies/all.otio"


@pytest.mark.parametrize(
    ("output", "field", "message"),
    [
        ({"review": {"url": "/r/{shot}.mov"}}, "output.review.url", "must end with .mp4"),
        ({"review": {"url": "/r/review.mp4"}}, "output.review.url", "needs a {shot}"),
        ({"review": {"url": "/r/{shot}_{pass}.mp4"}}, "output.review.url", "unknown placeholder"),
        ({"review": {"url": "/r/{shot}.mp4", "layout": "grid"}}, "output.review.layout", "side_by_side"),
        ({"review": {"url": "/r/{shot}.mp4", "max_width": 10}}, "output.review.max_width", "64"),
        ({"review": {"url": "/r/../{shot}.mp4"}}, "output.review.url", "'..'"),
        ({"review_timeline_url": "/r/all.otio"}, "output.review_timeline_url", "needs output.review"),
        (
            {"review": {"url": "/r/{shot}.mp4"}, "review_timeline_url": "/r/all.edl"},
            "output.review_timeline_url",
            ".otio",
        ),
    ],
)
def test_bad_review_settings_name_their_field(output, field, message) -> None:
    with pytest.raises(SpecError, match=message) as err:
        parse_spec(_spec(**output))
    assert err.value.field == field


def test_review_media_are_destinations() -> None:
    spec = parse_spec(_spec(review={"url": "/r/{shot}.mp4"}, review_timeline_url="/r/all.otio"))
    shots = expand_shots(spec)
    written = written_urls(spec, shots, "/work")
    for url in ("/r/sh010.mp4", "/r/sh010_contact.png", "/r/sh020.mp4", "/r/sh020_contact.png"):
        assert (url, "output.review.url") in written
    assert ("/r/all.otio", "output.review_timeline_url") in written
    whats = {place.what for place, _ in destinations(spec, shots)}
    assert {"shot sh010's review movie", "shot sh020's contact sheet", "the review playlist"} <= whats
