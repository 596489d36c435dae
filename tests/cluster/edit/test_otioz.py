"""An ``.otioz`` cut: its bundled media (a 30 fps movie, an EXR plate) extracted to the job's work area,
once, and the clips relinked there; a bundle on an object store; damaged and hostile bundles refused.

The bundles are written by OpenTimelineIO's own ``otioz`` writer, which bundles ``ExternalReference``
media only: a plate's frames are added to the zip under ``media/`` after it, as another bundler does.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import opentimelineio as otio
import pytest

from cluster.checks.prepare import prepare_job
from cluster.edit import publish_bundled, relinked, with_edit_shots
from cluster.spec.job import parse_spec
from cluster.spec.shot_refs import expand_shots
from pipeline.errors import SpecError
from tests.cluster.edit.cut_media import (
    MOVIE_AT_1H,
    RATE,
    RT,
    TR,
    Media,
    clip,
    gap,
    timeline,
    track,
    write_otio,
)


def the_cut(media: Media, *, bundled: bool) -> otio.schema.Timeline:
    """An EXR plate, a gap and the 30 fps movie; bundled: the plate's reference points into the bundle's
    ``media/A001C003/``; a second plate's is offline (into ``media/B002C004/``, which the bundle does not
    hold, or a folder that is not there)."""
    plate = media.exr.reference()
    lost = media.exr2.reference()
    lost.target_url_base = "media/B002C004/" if bundled else os.path.join(media.root, "gone/")
    if bundled:
        plate.target_url_base = "media/A001C003/"
    movie = otio.schema.ExternalReference(target_url=media.movie, available_range=TR(MOVIE_AT_1H, RT(90, 30)))
    return timeline(
        "ep101_z",
        track(
            "V1",
            clip("sc010", plate, media.exr.source(1005, 1012)),
            gap(3),
            clip("mov30", movie, TR(MOVIE_AT_1H.rescaled_to(RATE) + RT(24, RATE), RT(24, RATE))),
            clip("sc020", lost, media.exr2.source(1001, 1004)),
        ),
    )


def write_otioz(media: Media, path: str) -> str:
    """The cut as an ``.otioz``: OTIO's writer bundles the movie, then the plate's frames are added."""
    otio.adapters.write_to_file(the_cut(media, bundled=True), path)
    folder = os.path.dirname(media.exr.url)
    with zipfile.ZipFile(path, "a") as zf:
        for name in sorted(os.listdir(folder)):
            zf.write(os.path.join(folder, name), f"media/A001C003/{name}", compress_type=zipfile.ZIP_DEFLATED)
    return path


def spec_for(media: Media, url: str, out: str, **output: Any) -> dict[str, Any]:
    return {
        "job_id": "otioz",
        "edit": {"url": url, "handles": 2, "offline": "skip"},
        "identities": {"hero": {"images": [media.source]}},
        "output": {"url": f"{out}/{{shot}}/{{shot}}.####.{{ext}}", **output},
        "shots": [{"name": "mov30", "output": f"{out}/mov30.mp4"}],
    }


def sha256(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def shots_of(spec: Any) -> list[tuple[str, str, str, int]]:
    return [(s.name, s.url, str(s.frames), s.handles) for s in spec.shots]


def test_an_otioz_gives_the_shots_of_its_otio_with_media_in_the_work_area(media: Media, tmp_path) -> None:
    bundle = write_otioz(media, str(tmp_path / "ep101.otioz"))
    plain = write_otio(the_cut(media, bundled=False), tmp_path / "ep101.otio")
    out = str(tmp_path / "out")
    seen: list[str] = []
    spec, plan = with_edit_shots(parse_spec(spec_for(media, bundle, out)), allowed=seen.append)
    expected, _ = with_edit_shots(parse_spec(spec_for(media, plain, out)))
    assert plan is not None and plan.bundled is not None
    root = f"{out}/.recast-work/otioz/edit-media/{sha256(bundle)[:12]}"  # the job's default work area
    assert plan.bundled.root == root
    movie, plate = f"{root}/media/M30.mp4", f"{root}/media/A001C003/A001C003.####.exr"
    assert shots_of(spec) == [
        (name, {media.movie: movie, media.exr.url: plate}[url], frames, handles)
        for name, url, frames, handles in shots_of(expected)
    ]
    assert [name for name, *_ in shots_of(spec)] == ["mov30", "sc010"]
    # The studio policy saw the bundle, then where its media will be read from (never the extraction).
    assert seen == [bundle, plate, movie]
    # The media not in the bundle is offline, as a missing file is.
    assert [(u.where.name, "not in the bundle" in u.reason) for u in plan.skipped] == [("sc020", True)]
    assert not os.path.exists(root)  # nothing written before the job is allowed
    assert publish_bundled(plan.bundled) == (25, 0)  # the movie and 24 frames
    assert sha256(f"{root}/media/M30.mp4") == sha256(media.movie)
    frames = sorted(os.listdir(f"{root}/media/A001C003"))
    assert len(frames) == 24 and all(
        sha256(f"{root}/media/A001C003/{f}") == sha256(os.path.join(os.path.dirname(media.exr.url), f))
        for f in frames
    )
    assert not os.path.exists(plan.bundled.bundle.folder)  # the local extraction is gone

    # Submitted again: the files there are checked (size, sha256), not written again.
    stamps = {
        f: os.stat(os.path.join(dirpath, f)).st_mtime_ns for dirpath, _, fs in os.walk(root) for f in fs
    }
    again, plan2 = with_edit_shots(parse_spec(spec_for(media, bundle, out)))
    assert plan2 is not None and plan2.bundled is not None and again.shots == spec.shots
    assert publish_bundled(plan2.bundled) == (0, 25)
    assert stamps == {f: os.stat(os.path.join(d, f)).st_mtime_ns for d, _, fs in os.walk(root) for f in fs}
    # A file damaged there (same size, other bytes) is replaced; the others are kept.
    with open(f"{root}/media/M30.mp4", "r+b") as fh:
        fh.seek(100)
        fh.write(b"\0" * 8)
    _, plan3 = with_edit_shots(parse_spec(spec_for(media, bundle, out)))
    assert plan3 is not None and plan3.bundled is not None
    assert publish_bundled(plan3.bundled) == (1, 24)
    assert sha256(f"{root}/media/M30.mp4") == sha256(media.movie)

    # Back to the cut: the rendered clips point at their outputs; the offline one keeps its bundle path.
    back = relinked(plan, {r.name: r.output_url for r in expand_shots(spec)}, include_handles=True)
    refs = {c.name: c.media_reference for c in back.find_clips()}
    assert refs["mov30"].target_url == f"{out}/mov30.mp4"
    assert refs["mov30"].metadata["recast"]["source"] == movie
    assert refs["sc010"].target_url_base == f"{out}/sc010/"
    assert refs["sc020"].target_url_base == "media/B002C004/"


def test_prepare_publishes_the_bundled_media_before_probing(media: Media, tmp_path, no_ray) -> None:
    bundle = write_otioz(media, str(tmp_path / "ep101.otioz"))
    data = spec_for(media, bundle, str(tmp_path / "out"), work_url=str(tmp_path / "work"))
    data["chunking"] = {"seconds": 1, "min_seconds": 1}
    prepared = prepare_job(parse_spec(data), resume=False)
    root = f"{tmp_path}/work/edit-media/{sha256(bundle)[:12]}"
    assert {p.ref.name: p.ref.url for p in prepared.planned} == {
        "mov30": f"{root}/media/M30.mp4",
        "sc010": f"{root}/media/A001C003/A001C003.####.exr",
    }
    assert {p.ref.name: p.info.frame_count for p in prepared.planned} == {"mov30": 90, "sc010": 24}


def test_a_bundle_on_an_object_store_extracts_to_a_work_area_there(
    media: Media, s3_bucket: str, tmp_path
) -> None:
    local = write_otioz(media, str(tmp_path / "ep101.otioz"))
    remote = f"{s3_bucket}/editorial/ep101.otioz"
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    fs.put_file(local, remote.removeprefix("s3://"))
    work = f"{s3_bucket}/work/{{job_id}}"
    spec, plan = with_edit_shots(parse_spec(spec_for(media, remote, str(tmp_path / "out"), work_url=work)))
    assert plan is not None and plan.bundled is not None
    root = f"{s3_bucket}/work/otioz/edit-media/{sha256(local)[:12]}"
    assert {s.name: s.url for s in spec.shots} == {
        "mov30": f"{root}/media/M30.mp4",
        "sc010": f"{root}/media/A001C003/A001C003.####.exr",
    }
    assert publish_bundled(plan.bundled) == (25, 0)
    movie = f"{root}/media/M30.mp4".removeprefix("s3://")
    assert fs.cat_file(movie) == Path(media.movie).read_bytes()
    etag = fs.info(movie)["ETag"]
    _, plan2 = with_edit_shots(parse_spec(spec_for(media, remote, str(tmp_path / "out"), work_url=work)))
    assert plan2 is not None and plan2.bundled is not None
    assert publish_bundled(plan2.bundled) == (0, 25)
    fs.invalidate_cache()
    assert fs.info(movie)["ETag"] == etag and len(fs.ls(f"{root}/media/A001C003".removeprefix("s3://"))) == 24


def test_hostile_and_damaged_bundles_are_refused_naming_the_member(media: Media, tmp_path) -> None:
    good = write_otioz(media, str(tmp_path / "good.otioz"))
    out = str(tmp_path / "out")

    def refused(path: str) -> str:
        with pytest.raises(SpecError) as err:
            with_edit_shots(parse_spec(spec_for(media, path, out)))
        assert err.value.field == "edit.url" and path in err.value.reason
        return err.value.reason

    evil = str(tmp_path / "evil.otioz")
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(evil, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
        dst.writestr("media/../../evil.sh", b"#!/bin/sh\n")
    assert "'media/../../evil.sh' escapes the bundle" in refused(evil)
    absolute = str(tmp_path / "absolute.otioz")
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(absolute, "w") as dst:
        dst.writestr("content.otio", src.read("content.otio"))
        info = zipfile.ZipInfo("media/x.mov")
        info.filename = "/tmp/x.mov"  # what zipfile would otherwise sanitise
        dst.writestr(info, b"x")
    assert "'/tmp/x.mov' is an absolute path" in refused(absolute)
    assert not os.path.exists(tmp_path / "evil.sh") and not os.path.exists(out)

    data = Path(good).read_bytes()
    cut = str(tmp_path / "cut.otioz")
    with open(cut, "wb") as fh:
        fh.write(data[: len(data) // 2])
    assert "is not a readable .otioz" in refused(cut)

    # A member's bytes damaged (the zip's CRC says so): named.
    with zipfile.ZipFile(good) as zf:
        movie = zf.getinfo("media/M30.mp4")
        start = movie.header_offset + 30 + len(movie.filename) + len(movie.extra)
    damaged = str(tmp_path / "damaged.otioz")
    with open(damaged, "wb") as fh:
        fh.write(
            data[: start + 200]
            + bytes(b ^ 0xFF for b in data[start + 200 : start + 216])
            + data[start + 216 :]
        )
    assert "member 'media/M30.mp4' is damaged" in refused(damaged)


def test_bundles_are_bounded(media: Media, tmp_path, monkeypatch) -> None:
    from cluster.edit import bundle as bundle_module

    good = write_otioz(media, str(tmp_path / "good.otioz"))
    out = str(tmp_path / "out")
    monkeypatch.setattr(bundle_module, "BUNDLE_MAX_BYTES", os.path.getsize(good) - 1)
    with pytest.raises(SpecError) as err:
        with_edit_shots(parse_spec(spec_for(media, good, out)))
    assert err.value.field == "edit.url" and "an .otioz is read up to" in err.value.reason
    # Smaller than the bound, but its media (4 symbols a byte: about 4:1) would extract to more: refused unread.
    big = str(tmp_path / "big.otioz")
    symbols = np.random.default_rng(1).integers(0, 4, 8 << 20, dtype=np.uint8).tobytes()
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(big, "w") as dst:
        dst.writestr("content.otio", src.read("content.otio"), compress_type=zipfile.ZIP_DEFLATED)
        dst.writestr("media/plate.mov", symbols, compress_type=zipfile.ZIP_DEFLATED)
    monkeypatch.setattr(bundle_module, "BUNDLE_MAX_BYTES", 4 << 20)
    assert os.path.getsize(big) < 4 << 20
    with pytest.raises(SpecError) as err:
        with_edit_shots(parse_spec(spec_for(media, big, out)))
    assert err.value.field == "edit.url" and "its media extract to 8 MiB, more than 4 MiB" in err.value.reason
    # A zip bomb (8 MiB of zeros in 8 KiB: 1000:1) is refused by its ratio, whatever room the bound leaves.
    bomb = str(tmp_path / "bomb.otioz")
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(bomb, "w") as dst:
        dst.writestr("content.otio", src.read("content.otio"), compress_type=zipfile.ZIP_DEFLATED)
        dst.writestr("media/zeros.mov", bytes(8 << 20), compress_type=zipfile.ZIP_DEFLATED)
    monkeypatch.setattr(bundle_module, "BUNDLE_MAX_BYTES", 1 << 30)
    with pytest.raises(SpecError) as err:
        with_edit_shots(parse_spec(spec_for(media, bomb, out)))
    assert err.value.field == "edit.url" and "'media/zeros.mov' unpacks to 8 MiB" in err.value.reason
    assert "zip bomb" in err.value.reason
    # Many small bombs, each within its own allowance (1 MiB of zeros in 1 KiB): refused together.
    many = str(tmp_path / "many.otioz")
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(many, "w") as dst:
        dst.writestr("content.otio", src.read("content.otio"), compress_type=zipfile.ZIP_DEFLATED)
        for i in range(40):
            dst.writestr(f"media/z{i:03d}.mov", bytes(1 << 20), compress_type=zipfile.ZIP_DEFLATED)
    with pytest.raises(SpecError) as err:
        with_edit_shots(parse_spec(spec_for(media, many, out)))
    assert err.value.field == "edit.url" and "its 40 media files unpack to 40 MiB" in err.value.reason
    assert "together: a zip bomb" in err.value.reason


@pytest.mark.parametrize("existing", ["output", "review"])
def test_a_job_refused_for_a_file_already_there_extracts_nothing_to_its_work_area(
    media: Media, tmp_path, existing
) -> None:
    """An independent audit's finding: the bundle's media were written to the work area before the
    output and review checks refused the job.  A job that never ran refuses first, writes nothing."""
    bundle = write_otioz(media, str(tmp_path / "cut.otioz"))
    out = str(tmp_path / "out")
    data = spec_for(media, bundle, out)
    data["output"]["review"] = {"url": f"{out}/review/{{shot}}.mp4"}
    there = f"{out}/mov30.mp4" if existing == "output" else f"{out}/review/mov30.mp4"
    os.makedirs(os.path.dirname(there), exist_ok=True)
    Path(there).write_bytes(b"someone else's file")
    with pytest.raises(SpecError) as err:
        prepare_job(parse_spec(data), resume=False)
    assert err.value.field == "output.if_exists" and there in err.value.reason
    assert not list(Path(out).rglob("edit-media")), "the bundle's media were written before the refusal"
    assert Path(there).read_bytes() == b"someone else's file"
