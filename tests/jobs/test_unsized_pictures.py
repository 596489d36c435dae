"""Finding 8a of issue 29 through the real entrypoint: an identity picture whose size is known only by
decoding it (the audit's 12000x12000 Radiance ``.hdr``: 9 MB on disk, 2.36 GB decoded) is refused
before Ray, unread past its header, naming the identity field and the file."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from jobs.render import EXIT_BAD_INPUT
from tests.faultjobs import job_spec, make_media
from tests.hostile_inputs import radiance_hdr
from tests.jobs.refusals import refused, run_main


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, str]:
    return make_media(str(tmp_path_factory.mktemp("unsized-media")))


def _picture(tmp_path: Path, kind: str) -> str:
    if kind == "hdr-12000":
        return str(radiance_hdr(tmp_path / "hero.hdr", 12_000, 12_000))
    if kind == "hdr-named-jpg":  # the extension does not matter: the bytes do
        return str(radiance_hdr(tmp_path / "hero.jpg", 640, 480))
    path = tmp_path / "hero.gif"
    Image.new("RGB", (64, 64), (10, 200, 10)).save(path, format="GIF")
    return str(path)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("hdr-12000", ["size cannot be read from its header, so it is not decoded"]),
        ("hdr-named-jpg", ["size cannot be read from its header, so it is not decoded"]),
        ("gif", ["a GIF picture is not decoded"]),
    ],
)
def test_unsized_identity_picture_is_refused(media, dest, tmp_path, capsys, kind, words, no_ray) -> None:
    url = _picture(tmp_path, kind)
    spec = job_spec(media, str(dest), "unsized")
    spec["identities"]["hero"]["images"] = [media["source"], url]
    assert run_main(tmp_path, spec) == EXIT_BAD_INPUT
    err = refused(dest, capsys, "identities.hero.images[1]", url, *words)
    assert "Traceback" not in err
