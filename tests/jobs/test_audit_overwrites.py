"""Issue 41 (audit: "review media ignore ``if_exists`` and can overwrite inputs"), through the real
entrypoint (``jobs.render.main``) before Ray: each case exits 2 naming the field and the file, and the
file is as it was.

* ``output.if_exists: fail`` holds for review media as for outputs: a review movie, a contact sheet or a
  review playlist (``output.review_timeline_url``) that exists is refused before Ray.
* Whatever ``if_exists`` says, no file the job writes lands on a file it reads that is not one of its
  render inputs: the job's spec, a ``--fixes`` file, the studio policy (the spec's or the cluster's),
  the signer's key and certificate chain, the model pack (a destination inside its folder), however
  the destination is spelt (``./``, ``//``, a symlinked folder).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import ray
import yaml

from jobs.render import EXIT_BAD_INPUT, main
from tests.faultjobs import job_spec, make_media, tmp_files

pytestmark = pytest.mark.timeout(60)

THEIRS = b"a file of someone else's that the job must not touch"
POLICY = "identities:\n  hero: {consent_ref: R-1, projects: [ep1], valid_until: 2099-12-31}\n"


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, str]:
    return make_media(str(tmp_path_factory.mktemp("audit-media")))


def _run(spec_path: Path, spec: dict, *args: str) -> int:
    """``jobs.render.main`` on ``spec`` written to ``spec_path``; its exit code."""
    spec_path.write_text(yaml.safe_dump(spec))
    return main([str(spec_path), *args])


def _refused(capsys, *words: str) -> str:
    """Refused before Ray naming ``words``, without a traceback."""
    err = capsys.readouterr().err
    for word in words:
        assert word in err, err
    assert "Traceback" not in err, err
    assert not ray.is_initialized()
    return err


def _review(spec: dict, dest: Path, **output: object) -> dict:
    spec["output"].update(review={"url": str(dest / "{shot}_review.mp4")}, **output)
    return spec


# -- output.if_exists: fail holds for review media ---------------------------------------------------


@pytest.mark.parametrize(
    ("name", "what"),
    [("plate_review.mp4", "review movie"), ("plate_review_contact.png", "contact sheet")],
)
def test_existing_review_media_are_refused_with_fail(
    media, dest, tmp_path, capsys, name, what, no_ray
) -> None:
    there = dest / name
    there.write_bytes(THEIRS)
    spec = _review(job_spec(media, str(dest), "review-exists"), dest)
    assert _run(tmp_path / "job.yaml", spec) == EXIT_BAD_INPUT
    _refused(capsys, "output.if_exists", str(there), what, "already exists")
    assert there.read_bytes() == THEIRS
    assert not (dest / "plate.mp4").exists() and not tmp_files(str(dest))


def test_an_existing_review_playlist_is_refused_with_fail(media, dest, tmp_path, capsys, no_ray) -> None:
    playlist = dest / "dailies.otio"
    playlist.write_bytes(THEIRS)
    spec = _review(job_spec(media, str(dest), "playlist-exists"), dest, review_timeline_url=str(playlist))
    assert _run(tmp_path / "job.yaml", spec) == EXIT_BAD_INPUT
    _refused(capsys, "output.if_exists", "output.review_timeline_url", str(playlist), "already exists")
    assert playlist.read_bytes() == THEIRS
    assert not tmp_files(str(dest))


# -- never onto a file the job reads, whatever if_exists says -------------------------------------------


@pytest.mark.parametrize("if_exists", ["fail", "skip", "overwrite"])
def test_the_review_playlist_never_replaces_the_jobs_spec(
    media, dest, tmp_path, capsys, if_exists, no_ray
) -> None:
    spec_path = tmp_path / "job.otio"  # a YAML spec, named as the playlist would be
    spec = _review(
        job_spec(media, str(dest), "onto-spec"), dest, review_timeline_url=str(spec_path), if_exists=if_exists
    )
    assert _run(spec_path, spec) == EXIT_BAD_INPUT
    _refused(capsys, "output.review_timeline_url", "would replace the job's spec", str(spec_path))
    assert yaml.safe_load(spec_path.read_text()) == spec
    assert sorted(p.name for p in dest.iterdir()) == ["keep.mp4"]


@pytest.mark.parametrize("spelling", ["dot", "double-slash", "symlinked-folder", "relative"])
def test_the_spec_spelt_another_way_is_still_the_spec(
    media, dest, tmp_path, capsys, spelling, no_ray
) -> None:
    folder = tmp_path / "jobs"
    folder.mkdir()
    os.symlink(folder, tmp_path / "jobs-link")
    spec_path = folder / "job.otio"
    playlist = {
        "dot": f"{folder}/./job.otio",
        "double-slash": f"{tmp_path}//jobs//job.otio",
        "symlinked-folder": f"{tmp_path}/jobs-link/job.otio",
        "relative": "./job.otio",  # against the spec's folder
    }[spelling]
    spec = _review(
        job_spec(media, str(dest), "spelt"), dest, review_timeline_url=playlist, if_exists="overwrite"
    )
    assert _run(spec_path, spec) == EXIT_BAD_INPUT
    _refused(capsys, "output.review_timeline_url", "would replace the job's spec", str(spec_path))
    assert yaml.safe_load(spec_path.read_text()) == spec


def test_the_spec_given_through_a_symlinked_folder(media, dest, tmp_path, capsys, no_ray) -> None:
    folder = tmp_path / "jobs"
    folder.mkdir()
    os.symlink(folder, tmp_path / "jobs-link")
    spec = _review(
        job_spec(media, str(dest), "via-link"),
        dest,
        review_timeline_url=str(folder / "job.otio"),
        if_exists="overwrite",
    )
    assert _run(tmp_path / "jobs-link" / "job.otio", spec) == EXIT_BAD_INPUT
    _refused(capsys, "output.review_timeline_url", "would replace the job's spec")
    assert yaml.safe_load((folder / "job.otio").read_text()) == spec


def test_the_review_playlist_never_replaces_a_fixes_file(media, dest, tmp_path, capsys, no_ray) -> None:
    fixes = tmp_path / "notes.otio"
    fixes.write_text(
        yaml.safe_dump({"shot": "plate", "fixes": [{"frames": "1-2", "track": 0, "action": "keep_plate"}]})
    )
    before = fixes.read_bytes()
    spec = _review(
        job_spec(media, str(dest), "onto-fixes"), dest, review_timeline_url=str(fixes), if_exists="overwrite"
    )
    assert _run(tmp_path / "job.yaml", spec, "--fixes", str(fixes)) == EXIT_BAD_INPUT
    _refused(capsys, "output.review_timeline_url", "would replace the --fixes file", str(fixes))
    assert fixes.read_bytes() == before


def test_the_summary_json_never_replaces_the_spec(media, dest, tmp_path, capsys, no_ray) -> None:
    spec_path = tmp_path / "job.yaml"
    spec = job_spec(media, str(dest), "summary-onto-spec")
    assert _run(spec_path, spec, "--summary-json", f"{tmp_path}/./job.yaml") == EXIT_BAD_INPUT
    _refused(capsys, "--summary-json", "would replace the job's spec", str(spec_path))
    assert yaml.safe_load(spec_path.read_text()) == spec


@pytest.mark.parametrize("what", ["picture", "plate", "output"])
def test_the_summary_json_never_replaces_an_input_or_an_output(
    media, dest, tmp_path, capsys, what, monkeypatch, no_ray
) -> None:
    """An independent audit's finding: ``--summary-json`` onto the identity picture or the plate passed
    every check (the job would have written its summary over them at the end)."""
    spec = job_spec(media, str(dest), f"summary-onto-{what}")
    target = {
        "picture": media["source"],
        "plate": os.path.join(os.path.dirname(media["plate"]), ".", os.path.basename(media["plate"])),
        "output": str(dest / "plate.mp4"),
    }[what]
    monkeypatch.chdir(tmp_path)
    before = Path(target).read_bytes() if os.path.exists(target) else None
    assert _run(tmp_path / "job.yaml", spec, "--summary-json", target) == EXIT_BAD_INPUT
    said = {
        "picture": "would replace identity hero's picture",
        "plate": "would replace shot plate's source",
        "output": "are the same file",
    }[what]
    _refused(capsys, "--summary-json", said)
    if before is not None:
        assert Path(target).read_bytes() == before


@pytest.mark.parametrize("where", ["spec", "cluster"])
def test_the_review_playlist_never_replaces_the_studio_policy(
    media, dest, tmp_path, capsys, where, monkeypatch, no_ray
) -> None:
    policy = tmp_path / "policy.otio"
    policy.write_text(POLICY)
    spec = _review(
        job_spec(media, str(dest), "onto-policy"),
        dest,
        review_timeline_url=str(policy),
        if_exists="overwrite",
    )
    if where == "spec":
        spec["provenance"] = {"policy_url": str(policy), "project": "ep1"}
        what = "the studio policy (provenance.policy_url)"
    else:
        monkeypatch.setenv("RECAST_POLICY_URL", str(policy))
        spec["provenance"] = {"project": "ep1"}
        what = "the studio policy (RECAST_POLICY_URL)"
    assert _run(tmp_path / "job.yaml", spec) == EXIT_BAD_INPUT
    _refused(capsys, "output.review_timeline_url", f"would replace {what}", str(policy))
    assert policy.read_text() == POLICY
    assert sorted(p.name for p in dest.iterdir()) == ["keep.mp4"]


@pytest.fixture()
def signer(tmp_path) -> dict[str, Path]:
    from tests.pipeline.provenance.provenance_helpers import make_test_ca

    folder = tmp_path / "ca"
    folder.mkdir()
    return make_test_ca(folder)


def test_review_media_never_replace_the_signers_key_or_chain(
    media, dest, tmp_path, capsys, signer, no_ray
) -> None:
    # The chain where the contact sheet goes, the key where the playlist goes.
    key, chain = dest / "studio-key.otio", dest / "plate_review_contact.png"
    shutil.copyfile(signer["key"], key)
    shutil.copyfile(signer["chain"], chain)
    pem = {key: key.read_bytes(), chain: chain.read_bytes()}
    elsewhere = tmp_path / "review"
    spec = _review(
        job_spec(media, str(dest), "onto-signer"),
        dest,
        review_timeline_url=str(elsewhere / "dailies.otio"),
        if_exists="overwrite",
    )
    spec["provenance"] = {"signer": {"certificate_chain_url": str(chain), "private_key_url": str(key)}}
    assert _run(tmp_path / "job.yaml", spec) == EXIT_BAD_INPUT
    err = _refused(
        capsys, "output.review.url", "contact sheet", "would replace the signer's certificate chain"
    )
    assert str(chain) in err
    spec["output"].update(review={"url": str(elsewhere / "{shot}.mp4")}, review_timeline_url=str(key))
    assert _run(tmp_path / "job.yaml", spec) == EXIT_BAD_INPUT
    _refused(capsys, "output.review_timeline_url", "would replace the signer's private key", str(key))
    assert {p: p.read_bytes() for p in pem} == pem
    assert not elsewhere.exists()


@pytest.fixture(scope="module")
def pack_manifest() -> bytes:
    from pipeline.models.pack import load_pack

    return Path(load_pack("builtin:default").local_dir, "manifest.json").read_bytes()


@pytest.mark.parametrize(
    ("field", "edit"),
    [
        ("output.review.url", lambda s, pack: s["output"]["review"].update(url=f"{pack}/{{shot}}_review.mp4")),
        ("output.review_timeline_url", lambda s, pack: s["output"].update(review_timeline_url=f"{pack}//dailies.otio")),
        ("output.url", lambda s, pack: s["output"].update(url=f"{pack}/out/./{{shot}}.mp4")),
        ("output.work_url", lambda s, pack: s["output"].update(work_url=f"{pack}/work")),
    ],
)  # fmt: skip
def test_nothing_is_written_inside_the_model_pack(
    media, dest, tmp_path, capsys, pack_manifest, field, edit, no_ray
) -> None:
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "manifest.json").write_bytes(pack_manifest)
    os.symlink(pack, tmp_path / "pack-link")
    spec = _review(job_spec(media, str(dest), "into-pack"), dest, if_exists="overwrite")
    spec["models"] = {"pack": str(tmp_path / "pack-link")}  # the folder spelt through a symlink
    edit(spec, pack)
    assert _run(tmp_path / "job.yaml", spec) == EXIT_BAD_INPUT
    _refused(capsys, field, "inside the model pack's folder", str(tmp_path / "pack-link"))
    assert sorted(p.name for p in pack.iterdir()) == ["manifest.json"]
    assert (pack / "manifest.json").read_bytes() == pack_manifest


def test_a_model_file_linked_from_outside_the_pack_is_an_input(
    media, dest, tmp_path, capsys, pack_manifest, no_ray
) -> None:
    # The pack's swapper file is a link to a file beside the job's review movies.
    manifest = json.loads(pack_manifest)
    name = next(m["file"] for m in manifest["models"] if m.get("file"))
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "manifest.json").write_bytes(pack_manifest)
    model = dest / "plate_review.mp4"
    model.write_bytes(THEIRS)
    os.symlink(model, pack / name)
    spec = _review(job_spec(media, str(dest), "onto-model"), dest, if_exists="overwrite")
    spec["models"] = {"pack": str(pack)}
    assert _run(tmp_path / "job.yaml", spec) == EXIT_BAD_INPUT
    _refused(capsys, "output.review.url", "would replace a model file of the model pack", name)
    assert model.read_bytes() == THEIRS
