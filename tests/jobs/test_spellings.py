"""Every spelling of a place is that place (issue 29, findings 1, 2, 5, 6 and 12), through the real
entrypoint (``jobs.render.main``) before Ray: each case exits 2 naming the field or file, and the
inputs and the destination are as they were (no file replaced, no folder created).

The spellings tried: plain absolute and relative paths, ``file://``, ``file:``, ``local://``,
``local:``, ``FILE://``, doubled slashes and ``.`` segments, ``..`` segments (relative, absolute,
in URLs, behind a backslash), symlinked folders and files, chained URLs (``simplecache::``,
``dir::``) and schemes Recast does not store to.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from cluster.checks.destinations import written_urls
from cluster.checks.prepare import remove_interrupted_publish
from cluster.checks.trust import authorise
from cluster.spec.job import parse_spec
from cluster.spec.shot_refs import expand_shots, work_url_for
from jobs.render import EXIT_BAD_INPUT, main
from pipeline.store import storage
from tests.faultjobs import job_spec, make_media, tmp_files


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, str]:
    return make_media(str(tmp_path_factory.mktemp("spelling-media")))


@pytest.fixture()
def site(tmp_path, media) -> Path:
    """A folder holding the plate (``site/plate.mp4``) and a picture, as a post team's share would."""
    root = tmp_path / "site"
    root.mkdir()
    shutil.copyfile(media["plate"], root / "plate.mp4")
    shutil.copyfile(media["source"], root / "hero.jpg")
    return root


def run(where: Path, spec: dict) -> int:
    path = where / "job.yaml"
    path.write_text(yaml.safe_dump(spec))
    return main([str(path)])


def tree(root: Path) -> dict[str, bytes]:
    """Every file and folder under ``root`` (the job spec the test writes aside)."""
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else b""
        for p in root.rglob("*")
        if p.name != "job.yaml"
    }


def refused(capsys, *words: str) -> str:
    err = capsys.readouterr().err
    for word in words:
        assert word in err, err
    assert "Traceback" not in err, err
    return err


def site_spec(site: Path, out: str, **extra) -> dict:
    media = {"plate": str(site / "plate.mp4"), "source": str(site / "hero.jpg")}
    return job_spec(media, "unused", "spell", **extra) | {"output": {"url": out, "if_exists": "overwrite"}}


# -- finding 1: every spelling that reaches the local disk is local ----------------------------------


@pytest.mark.parametrize(
    "spelling",
    [
        "local://{site}/{{shot}}.mp4",  # the audit's reproduction
        "local:{site}/{{shot}}.mp4",
        "file:{site}/{{shot}}.mp4",
        "FILE://{site}/{{shot}}.mp4",
        "file://{site}//./{{shot}}.mp4",
        "local://{link}/{{shot}}.mp4",  # a symlink to the plate's folder
    ],
)
def test_an_output_onto_the_plate_is_refused_however_it_is_spelt(site, capsys, spelling, no_ray) -> None:
    os.symlink(site, site.parent / "site-link")
    before = tree(site)
    spec = site_spec(site, spelling.format(site=site, link=site.parent / "site-link"))
    assert run(site.parent, spec) == EXIT_BAD_INPUT
    refused(capsys, "output.url", "would replace", "plate.mp4")
    assert tree(site) == before


@pytest.mark.parametrize("spelling", ["local://{p}", "local:{p}", "file:{p}", "file://{p}"])
def test_a_fifo_picture_is_refused_however_it_is_spelt(site, capsys, spelling, no_ray) -> None:
    fifo = site / "fifo.jpg"
    os.mkfifo(fifo)  # nothing ever writes to it: opening it would hang the driver
    spec = site_spec(site, f"{site}/out/{{shot}}.mp4")
    spec["identities"]["hero"]["images"] = [spelling.format(p=fifo)]
    assert run(site.parent, spec) == EXIT_BAD_INPUT
    refused(capsys, "identities.hero.images[0]", "FIFO")
    assert not (site / "out").exists()


@pytest.mark.parametrize("spelling", ["local://{p}", "file:{p}", "local:{p}"])
def test_a_fifo_pack_manifest_is_refused_however_it_is_spelt(site, capsys, spelling, no_ray) -> None:
    pack = site / "pack"
    pack.mkdir()
    os.mkfifo(pack / "manifest.json")
    spec = site_spec(site, f"{site}/out/{{shot}}.mp4")
    spec["models"] = {"pack": spelling.format(p=pack)}
    assert run(site.parent, spec) == EXIT_BAD_INPUT
    refused(capsys, "manifest.json", "FIFO")


def test_a_spec_that_is_a_fifo_is_refused_as_local_url(tmp_path, capsys, no_ray) -> None:
    fifo = tmp_path / "job.yaml"
    os.mkfifo(fifo)
    assert main([f"local://{fifo}"]) == EXIT_BAD_INPUT
    refused(capsys, "FIFO")


@pytest.mark.parametrize(
    ("where", "url", "words"),
    [
        ("shot", "simplecache::file://{site}/plate.mp4", ["shots[0].url", "chained"]),
        ("shot", "dir::{site}/plate.mp4", ["shots[0].url", "chained"]),
        ("output", "simplecache::file://{site}/out/{{shot}}.mp4", ["output.url", "chained"]),
        ("picture", "filecache::local://{site}/hero.jpg", ["identities.hero.images[0]", "chained"]),
        ("shot", "ftp://{site}/plate.mp4", ["shots[0].url", "unsupported scheme 'ftp://'"]),
        ("output", "S3://bucket/../x/{{shot}}.mp4", ["output.url", "'..'"]),
    ],
)
def test_chained_and_unknown_urls_are_refused_by_field(site, capsys, where, url, words, no_ray) -> None:
    spec = site_spec(site, f"{site}/out/{{shot}}.mp4")
    url = url.format(site=site)
    if where == "shot":
        spec["shots"][0]["url"] = url
    elif where == "output":
        spec["output"]["url"] = url
    else:
        spec["identities"]["hero"]["images"] = [url]
    before = tree(site)
    assert run(site.parent, spec) == EXIT_BAD_INPUT
    refused(capsys, *words)
    assert tree(site) == before


# -- finding 5: '..' is checked as written, before anything is normalised ----------------------------


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda s: s["output"].update(url="out/../../escape/{shot}.mp4"), "output.url"),  # the audit's
        (lambda s: s["output"].update(work_url="w/../../x"), "output.work_url"),
        (lambda s: s["shots"][0].update(output="sub/../../x.mp4"), "shots[0].output"),
        (lambda s: s["output"].update(url="file://OUT/a/../{shot}.mp4"), "output.url"),
        (
            lambda s: s["output"].update(pass_url="p/..\\..\\{shot}_{pass}", passes=["matte"]),
            "output.pass_url",
        ),
        (lambda s: s["output"].update(url="local:out/x/../../../{shot}.mp4"), "output.url"),
    ],
)
def test_dotdot_in_a_written_path_is_refused_as_written(site, capsys, edit, field, no_ray) -> None:
    jobs = site / "jobs" / "ep1"
    jobs.mkdir(parents=True)
    spec = site_spec(site, f"{site}/out/{{shot}}.mp4")
    edit(spec)
    spec["output"]["url"] = spec["output"]["url"].replace("OUT", str(site / "out"))
    before = tree(site)
    assert run(jobs, spec) == EXIT_BAD_INPUT
    refused(capsys, field, "'..' segment")
    assert tree(site) == before  # no empty .recast-work two levels up, nothing anywhere


# -- finding 2: everything the job writes is authorised like an output -------------------------------


def _policy(site: Path, *, inputs: list[str], outputs: list[str]) -> str:
    policy = site / "policy.yaml"
    policy.write_text(
        yaml.safe_dump(
            {
                "identities": {"hero": {"consent_ref": "R-1", "projects": ["*"]}},
                "allowed_input_prefixes": inputs,
                "allowed_output_prefixes": outputs,
            }
        )
    )
    return str(policy)


def _with_policy(site: Path, spec: dict, *, inputs: list[str] | None = None) -> dict:
    policy = _policy(site, inputs=inputs or [str(site)], outputs=[str(site / "outok")])
    spec["provenance"] = {"policy_url": policy, "project": "ep1", "audit": False}
    return spec


@pytest.mark.parametrize(
    ("edit", "field_words"),
    [
        (lambda s, site: s["output"].update(pass_url=f"{site}/elsewhere/{{shot}}_{{pass}}"), "elsewhere"),
        (lambda s, site: s["output"].update(pass_url="rel/{shot}_{pass}"), "rel/plate_matte"),
        (lambda s, site: s["output"].update(work_url=f"local://{site}/work"), f"{'work'}"),
        (lambda s, site: s["output"].update(url=f"file:{site}/outok/../elsewhere/{{shot}}.mp4"), "'..'"),
        (lambda s, site: s["output"].update(review={"url": f"{site}/dailies/{{shot}}.mp4"}), "dailies"),
        (
            lambda s, site: s["output"].update(
                review={"url": f"{site}/outok/{{shot}}_review.mp4"}, review_timeline_url=f"{site}/all.otio"
            ),
            "all.otio",
        ),
    ],
)
def test_passes_and_the_work_area_are_authorised_like_outputs(
    site, capsys, edit, field_words, no_ray
) -> None:
    spec = _with_policy(site, site_spec(site, f"{site}/outok/{{shot}}.mp4"))
    spec["output"].update(passes=["matte"], work_url=f"{site}/outok/work")
    edit(spec, site)
    before = tree(site)
    assert run(site, spec) == EXIT_BAD_INPUT
    err = refused(capsys, field_words)
    assert "not under an allowed output prefix" in err or "'..' segment" in err, err
    assert tree(site) == before


def test_the_authorised_places_are_every_written_place(site) -> None:
    """The control: inside the prefix, everything the job writes is listed and allowed."""
    spec_data = _with_policy(site, site_spec(site, f"{site}/outok/{{shot}}.mp4"))
    spec_data["output"].update(passes=["matte", "face", "tracks"], work_url=f"{site}/outok/work")
    spec = parse_spec(spec_data, base_dir=str(site))
    shots = expand_shots(spec)
    written = [url for url, _ in written_urls(spec, shots, work_url_for(spec, shots))]
    assert written == [
        f"{site}/outok/plate.mp4",
        f"{site}/outok/plate_matte.####.exr",
        f"{site}/outok/plate_face.####.exr",
        f"{site}/outok/plate_tracks.jsonl",
        f"{site}/outok/work",
    ]
    authorise(spec, shots, written, env={})  # raises if any is refused


# -- finding 6: each file actually opened is authorised, after its links ----------------------------


def _sequence(folder: Path, first: int, count: int) -> str:
    from tests.plates import write_sequence

    return write_sequence(folder, "plate", first=first, count=count, size=(64, 36), face=False)


def test_a_sequence_frame_linked_outside_the_allowed_prefix_is_refused(
    site, tmp_path, capsys, no_ray
) -> None:
    outside = tmp_path / "outside"
    pattern = _sequence(site / "seq", 1001, 3)
    _sequence(outside, 1002, 1)
    os.remove(site / "seq" / "plate.1002.exr")
    os.symlink(outside / "plate.1002.exr", site / "seq" / "plate.1002.exr")
    spec = _with_policy(site, site_spec(site, f"{site}/outok/{{shot}}.####.exr"))
    spec["shots"] = [{"name": "seq", "url": pattern}]
    assert run(site, spec) == EXIT_BAD_INPUT
    refused(capsys, "plate.1002.exr", "not under an allowed input prefix")
    # The control: the same frame as a file of its own is allowed.
    os.remove(site / "seq" / "plate.1002.exr")
    shutil.copyfile(outside / "plate.1002.exr", site / "seq" / "plate.1002.exr")
    parsed = parse_spec(spec, base_dir=str(site))
    authorise(parsed, expand_shots(parsed), [], env={})


def _pack_copy(folder: Path) -> dict:
    from pipeline.models.pack import load_pack

    builtin = load_pack("builtin:default")
    folder.mkdir(parents=True)
    manifest = json.loads(Path(builtin.local_dir, "manifest.json").read_text())
    for entry in manifest["models"]:
        if entry.get("file"):
            shutil.copyfile(os.path.join(builtin.local_dir, entry["file"]), folder / entry["file"])
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return manifest


def test_the_pack_manifest_is_read_once_before_ray(site, monkeypatch, no_ray) -> None:
    """Under a policy, the manifest the policy allowed is the one the adapters check and the pack loads."""
    from cluster.checks.prepare import prepare_job
    from pipeline.store import storage

    pack = site / "packs" / "studio"
    _pack_copy(pack)
    spec = parse_spec(
        _with_policy(site, site_spec(site, f"{site}/outok/{{shot}}.mp4"), inputs=[str(site)])
        | {"models": {"pack": str(pack)}},
        base_dir=str(site),
    )
    real = storage.read_bytes
    reads: list[str] = []

    def counted(url: str, **kwargs):
        if url.endswith("manifest.json"):
            reads.append(url)
        return real(url, **kwargs)

    monkeypatch.setattr(storage, "read_bytes", counted)
    prepared = prepare_job(spec, resume=False)
    assert reads == [f"{pack}/manifest.json"]
    assert prepared.keys.pack_hash == hashlib.sha256((pack / "manifest.json").read_bytes()).hexdigest()


@pytest.mark.parametrize("linked", ["manifest", "model"])
def test_pack_files_linked_outside_the_allowed_pack_are_refused(
    site, tmp_path, capsys, linked, no_ray
) -> None:
    pack = site / "packs" / "studio"
    manifest = _pack_copy(pack)
    name = "manifest.json" if linked == "manifest" else manifest["models"][1]["file"]
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.move(pack / name, outside / name)
    os.symlink(outside / name, pack / name)
    spec = _with_policy(site, site_spec(site, f"{site}/outok/{{shot}}.mp4"), inputs=[str(site)])
    spec["models"] = {"pack": f"local://{pack}"}
    assert run(site, spec) == EXIT_BAD_INPUT
    refused(capsys, name, "not under an allowed input prefix")


def test_an_ocio_config_outside_the_allowed_prefix_is_refused(site, tmp_path, capsys, no_ray) -> None:
    config = tmp_path / "studio.ocio"
    config.write_text("ocio_profile_version: 2\n")
    spec = _with_policy(site, site_spec(site, f"{site}/outok/{{shot}}.mp4"))
    spec["colour"] = {"config": str(config)}
    assert run(site, spec) == EXIT_BAD_INPUT
    refused(capsys, "studio.ocio", "not under an allowed input prefix")


@pytest.mark.parametrize("pattern", ["{secret}/*.mp4", "{secret}/sc*/x.mp4", "local://{secret}/*"])
def test_a_pattern_in_a_forbidden_folder_is_refused_before_listing(
    site, tmp_path, capsys, pattern, no_ray
) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "merger-talks-sc01.mp4").write_bytes(b"x")
    spec = _with_policy(site, site_spec(site, f"{site}/outok/{{shot}}.mp4"))
    spec["shots"] = [{"pattern": pattern.format(secret=secret)}]
    assert run(site, spec) == EXIT_BAD_INPUT
    err = refused(capsys, "shots[0].pattern", "refused by the studio policy")
    assert "merger-talks" not in err  # no file-name oracle


# -- finding 12: clean-up touches only names Recast writes ------------------------------------------


def test_clean_up_removes_only_recast_temporaries(tmp_path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    theirs = [".precious.png.tmp-keepme", ".0001.png.tmp-0123456789ab", ".0001.png.recast-tmp-NOTHEX12345",
              ".plate.mp4.tmp-0123456789ab", ".other.mp4.recast-tmp-0123456789ab", "0001.png"]  # fmt: skip
    ours = [".0001.png.recast-tmp-0123456789ab", ".1002.png.recast-tmp-abcdef012345",
            ".plate.mp4.recast-tmp-0123456789ab"]  # fmt: skip
    for name in theirs + ours:
        (out / name).write_bytes(b"keep")
    remove_interrupted_publish(f"{out}/####.png")  # the audit's output: a sequence with an empty head
    remove_interrupted_publish(f"local://{out}/plate.mp4")
    assert sorted(p.name for p in out.iterdir()) == sorted(theirs)


def test_a_publish_leaves_a_name_clean_up_recognises(tmp_path) -> None:
    """The temporary name a real publish writes is the one clean-up matches (killed mid-write)."""
    src = tmp_path / "src.bin"
    src.write_bytes(b"x" * 1000)

    seen: list[str] = []

    def killed(tmp: str) -> None:
        shutil.copyfile(src, tmp)
        seen.append(os.path.basename(tmp))
        raise KeyboardInterrupt  # the driver dies after the copy, before the rename

    with pytest.raises(KeyboardInterrupt):
        storage.replace_atomically(str(tmp_path / "out.mp4"), killed)
    # replace_atomically removes its own temporary on the way out; a SIGKILL would not: put it back.
    leftover = tmp_path / seen[0]
    leftover.write_bytes(b"half")
    remove_interrupted_publish(str(tmp_path / "out.mp4"))
    assert not leftover.exists() and not tmp_files(str(tmp_path))


# -- names the file system cannot hold, outputs that are folders: before Ray ------------------------


@pytest.mark.parametrize(
    ("edit", "field", "words"),
    [
        # 200 + 45 bytes fits in 255; the temporary name it is published through (25 more) does not.
        (
            lambda s, site: (
                s["shots"][0].update(name="n" * 200),
                s["output"].update(url=f"{site}/outok/{{shot}}_{'x' * 40}.mp4"),
            ),
            "output.url",
            ["255 bytes", "temporary"],
        ),
        (
            lambda s, site: s["shots"][0].update(name="n" * 200, output=f"{site}/outok/{'n' * 240}.mp4"),
            "shots[0].output",
            ["255 bytes"],
        ),
        (
            lambda s, site: s["output"].update(url=f"{site}/{'d' * 300}/{{shot}}.mp4"),
            "output.url",
            ["longer than"],
        ),
        (lambda s, site: (site / "outok" / "plate.mp4").mkdir(parents=True), "output.url", ["is a folder"]),
    ],
)
def test_names_too_long_and_folders_are_refused_before_ray(site, capsys, edit, field, words, no_ray) -> None:
    spec = site_spec(site, f"{site}/outok/{{shot}}.mp4")
    spec["output"]["passes"] = ["matte"]
    edit(spec, site)
    assert run(site, spec) == EXIT_BAD_INPUT
    refused(capsys, field, *words)
