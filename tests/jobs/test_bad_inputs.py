"""Every bad input in the table of docs/failures.md through the real entrypoint (``jobs.render.main`` / ``python -m jobs.render``).

Each case asserts the message (naming the file or field), the exit code, and
that the destination is as it was: no file created, a pre-existing file
unchanged, no stray temporary file.  Most are found before Ray starts (those
tests take the ``no_ray`` fixture, which checks Ray was never initialised); the
source image without a face and a full work area need actors.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import ray
import yaml

from cluster.state.fingerprints import stat_fingerprint
from jobs.render import EXIT_BAD_INPUT, EXIT_RENDER_FAILED
from tests.clips import write_audio
from tests.faultjobs import job_spec, make_media, tmp_files
from tests.jobs.refusals import KEEP, assert_untouched, run_main, snapshot
from tests.raytools import RAY_ENV, REPO, free_port
from tests.tmpfs import small_tmpfs


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("bad-media")
    out = make_media(str(root))
    plate = Path(out["plate"]).read_bytes()
    (root / "zero.mp4").write_bytes(b"")
    (root / "truncated.mp4").write_bytes(plate[: len(plate) * 6 // 10])
    (root / "corrupt.mp4").write_bytes(
        bytes(np.random.default_rng(3).integers(0, 256, 200_000, dtype=np.uint8))
    )
    (root / "notmedia.mp4").write_text("shot list\nsc01 hero\n" * 100)
    write_audio(root / "audio.mp4", np.zeros(47 * 1024, np.float32))  # about a second of silence
    out.update({k: str(root / f"{k}.mp4") for k in ("zero", "truncated", "corrupt", "notmedia", "audio")})
    return out


# -- found before Ray starts -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "words"),
    [
        ("zero", ["zero.mp4", "empty"]),
        ("truncated", ["truncated.mp4", "truncated"]),
        ("corrupt", ["corrupt.mp4"]),
        ("notmedia", ["notmedia.mp4"]),
        ("audio", ["audio.mp4", "no video stream"]),
        ("missing", ["missing.mp4", "not found"]),
    ],
)
def test_bad_source_video(media, dest, tmp_path, capsys, source, words, no_ray) -> None:
    url = media.get(source, str(tmp_path / "missing.mp4"))
    spec = job_spec(media, str(dest), "bad-source")
    spec["shots"] = [{"name": "good", "url": media["plate"]}, {"name": "bad", "url": url}]
    before = snapshot(dest)
    assert run_main(tmp_path, spec) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    for word in words:
        assert word in err, err
    assert not ray.is_initialized()
    assert_untouched(dest, before)
    assert not (dest / ".recast-work").exists()


def _pack(tmp_path: Path, damage: str) -> str:
    from pipeline.models.pack import load_pack

    builtin = load_pack("builtin:default")
    folder = tmp_path / "pack"
    folder.mkdir()
    manifest = json.loads(Path(builtin.local_dir, "manifest.json").read_text())
    for entry in manifest["models"]:
        if entry.get("file"):
            shutil.copyfile(os.path.join(builtin.local_dir, entry["file"]), folder / entry["file"])
    recognizer = manifest["models"][1]
    if damage == "missing":
        (folder / recognizer["file"]).unlink()
    elif damage == "checksum":
        with open(folder / recognizer["file"], "ab") as fh:
            fh.write(b"\0")
    elif damage == "contract":
        # Declared as a 512-d ArcFace recognizer, but the file is SFace (128-d): checksum right, contract wrong.
        recognizer["kind"], recognizer["contract"] = (
            "arcface",
            {"input_size": [112, 112], "embedding_dim": 512},
        )
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return str(folder)


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        ("missing", ["face_recognition_sface_2021dec_float.onnx"]),
        ("checksum", ["face_recognition_sface_2021dec_float.onnx", "sha256"]),
        ("contract", ["face_recognition_sface_2021dec_float.onnx", "512"]),
    ],
)
def test_bad_model_pack(media, dest, tmp_path, capsys, damage, words, no_ray, monkeypatch) -> None:
    monkeypatch.setenv("RECAST_CACHE_DIR", str(tmp_path))  # models.cache_dir must lie under it
    spec = job_spec(media, str(dest), "bad-pack")
    spec["models"] = {"pack": _pack(tmp_path, damage), "cache_dir": str(tmp_path / "cache")}
    before = snapshot(dest)
    assert run_main(tmp_path, spec) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "model pack" in err.lower() or "pack" in err, err
    for word in words:
        assert word in err, err
    assert not ray.is_initialized()
    assert_untouched(dest, before)


@pytest.mark.parametrize(
    ("edit", "field", "words"),
    [
        (lambda s: s.update(tint="red"), "tint", ["unknown key"]),
        (lambda s: s["output"].update(codex="h264"), "output.codex", ["unknown key"]),
        (lambda s: s["resources"].update(max_actors="many"), "resources.max_actors", ["integer"]),
        (lambda s: s["chunking"].update(seconds=0.1), "chunking", ["between"]),
        (lambda s: s["chunking"].update(seconds=600), "chunking", ["between"]),
        (lambda s: s.update(shots=[]), "shots", []),
        (
            lambda s: s["output"].update(colour={"matrix": "rec709"}),
            "output.colour.matrix",
            ["FFmpeg matrix"],
        ),
        (
            lambda s: s["output"].update(codec="hevc", colour={"range": "unspecified"}),
            "output.colour.range",
            ["hevc always states a range"],
        ),
        (lambda s: s.setdefault("faces", {}).update(embed="sometimes"), "faces.embed", ["every_frame"]),
        (lambda s: s.setdefault("faces", {}).update(detect_size="4k"), "faces.detect_size", ["auto"]),
        (
            lambda s: s.setdefault("faces", {}).update(embed_stride=0),
            "faces.embed_stride",
            ["greater than or equal to 1"],
        ),
    ],
)
def test_bad_spec(media, dest, tmp_path, capsys, edit, field, words, no_ray) -> None:
    spec = job_spec(media, str(dest), "bad-spec")
    edit(spec)
    before = snapshot(dest)
    assert run_main(tmp_path, spec) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "bad job spec" in err and field in err, err
    for word in words:
        assert word in err, err
    assert not ray.is_initialized()
    assert_untouched(dest, before)


def test_spec_not_yaml(media, dest, tmp_path, capsys, no_ray) -> None:
    assert run_main(tmp_path, "job_id: [unclosed\n") == EXIT_BAD_INPUT
    assert "not valid YAML" in capsys.readouterr().err


def test_output_exists_without_permission(media, dest, tmp_path, capsys, no_ray) -> None:
    spec = job_spec(media, str(dest), "exists")
    spec["output"]["url"] = str(dest / "keep.mp4")
    before = snapshot(dest)
    assert run_main(tmp_path, spec) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "output.if_exists" in err and "keep.mp4" in err and "already exists" in err, err
    assert not ray.is_initialized()
    assert_untouched(dest, before)
    assert not (dest / ".recast-work").exists()


@pytest.mark.parametrize("where", ["/proc/recast-test/{shot}.mp4", "/dev/null/{shot}.mp4"])
def test_output_not_writable(media, tmp_path, capsys, where, no_ray) -> None:
    spec = job_spec(media, str(tmp_path), "unwritable")
    spec["output"]["url"] = where
    assert run_main(tmp_path, spec) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert where.rsplit("/", 1)[0] in err, err
    assert not ray.is_initialized()
    assert not os.path.exists(where.format(shot="plate"))


def test_resume_without_manifest(media, dest, tmp_path, capsys, no_ray) -> None:
    spec = job_spec(media, str(dest), "never-ran")
    assert run_main(tmp_path, spec, "--resume") == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "--resume" in err and "no manifest" in err, err
    assert not ray.is_initialized()


def test_missing_identity_image(media, dest, tmp_path, capsys, no_ray) -> None:
    spec = job_spec(media, str(dest), "no-image")
    spec["identities"]["hero"]["images"] = [str(tmp_path / "nobody.jpg")]
    before = snapshot(dest)
    assert run_main(tmp_path, spec) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "identities.hero.images[0]" in err and "nobody.jpg" in err, err
    assert_untouched(dest, before)


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) + ("/" if p.is_dir() else "") for p in root.rglob("*"))


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda s, m, new: s["output"].update(work_url="/proc/recast-test/{job_id}"), ["/proc/recast-test"]),
        (lambda s, m, new: s["output"].update(url=f"{new}/deliveries/../../escaped/{{shot}}.mp4"), ["output.url", "'..'"]),
        (lambda s, m, new: s["shots"][0].update(output=m["plate"]), ["shots[0].output", "would replace", "plate.mp4"]),
        (lambda s, m, new: s["shots"].append({"name": "b", "url": m["plate"], "output": f"{new}/deliveries/./plate.mp4"}), ["same file"]),
        (lambda s, m, new: s["shots"].append({"name": "b", "url": f"{new}/missing.mp4"}), ["missing.mp4", "not found"]),
    ],
)  # fmt: skip
def test_a_refused_job_leaves_no_folders(media, tmp_path, capsys, edit, words, no_ray) -> None:
    root = tmp_path / "site"
    root.mkdir()
    new = root / "new"  # neither the outputs' folder nor the work area exists yet
    spec = job_spec(media, str(new / "deliveries"), "refused")
    spec["output"].update(if_exists="overwrite", work_url=str(new / "work" / "{job_id}"))
    edit(spec, media, new)
    before = _tree(root)
    assert run_main(tmp_path, spec) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    for word in words:
        assert word in err, err
    assert not ray.is_initialized()
    assert _tree(root) == before, "the refused job left folders behind"


def test_an_output_onto_its_own_source_is_refused(media, tmp_path, capsys, no_ray) -> None:
    plate = tmp_path / "plate.mp4"
    shutil.copyfile(media["plate"], plate)
    fingerprint = stat_fingerprint(str(plate))
    spec = job_spec({**media, "plate": str(plate)}, str(tmp_path), "onto-source")
    spec["output"]["if_exists"] = "overwrite"
    assert run_main(tmp_path, spec) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "output.url" in err and "would replace shot plate's source" in err and str(plate) in err, err
    assert stat_fingerprint(str(plate)) == fingerprint
    assert not tmp_files(str(tmp_path))


# -- unreachable and access-denied stores (own processes: S3 settings come from the environment) --


def _render_subprocess(spec: dict, tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    spec_path = tmp_path / "job.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    full = {**os.environ, **RAY_ENV, "PYTHONPATH": str(REPO), **env}
    return subprocess.run(  # noqa: PLW1510 - the exit code is the assertion
        [sys.executable, "-m", "jobs.render", str(spec_path)],
        cwd=str(REPO), env=full, capture_output=True, text=True, timeout=180,
    )  # fmt: skip


S3_TEST_ENV = {
    "AWS_ACCESS_KEY_ID": "recast-test",
    "AWS_SECRET_ACCESS_KEY": "recast-test",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_MAX_ATTEMPTS": "1",
}


@pytest.mark.ray
def test_unreachable_store(media, dest, tmp_path) -> None:
    port = free_port()  # nothing listens there
    spec = job_spec(media, str(dest), "unreachable")
    spec["shots"] = [{"name": "plate", "url": "s3://plates/ep101/plate.mp4"}]
    before = snapshot(dest)
    started = time.monotonic()
    done = _render_subprocess(spec, tmp_path, {**S3_TEST_ENV, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"})
    assert done.returncode == EXIT_BAD_INPUT, done.stderr[-3000:]
    assert "s3://plates/ep101/plate.mp4" in done.stderr, done.stderr[-3000:]
    assert time.monotonic() - started < 120
    assert_untouched(dest, before)


@pytest.fixture()
def denying_s3() -> Iterator[str]:
    """A moto S3 server of its own that enforces IAM auth: unknown keys are refused (403)."""
    port = free_port()
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "0"}
    code = (
        "import time\nfrom moto.server import ThreadedMotoServer\n"
        f"s = ThreadedMotoServer(ip_address='127.0.0.1', port={port}, verbose=False)\ns.start()\n"
        "time.sleep(3600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(url, timeout=1)
                break
            except urllib.error.HTTPError:
                break  # it answers (with a refusal): up
            except OSError:
                time.sleep(0.2)
        yield url
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.mark.ray
def test_access_denied(media, dest, tmp_path, denying_s3) -> None:
    spec = job_spec(media, str(dest), "denied")
    spec["shots"] = [{"name": "plate", "url": "s3://plates/ep101/plate.mp4"}]
    before = snapshot(dest)
    done = _render_subprocess(spec, tmp_path, {**S3_TEST_ENV, "AWS_ENDPOINT_URL": denying_s3})
    assert done.returncode == EXIT_BAD_INPUT, done.stderr[-3000:]
    assert "s3://plates/ep101/plate.mp4" in done.stderr and "denied" in done.stderr.lower(), done.stderr[
        -3000:
    ]
    assert_untouched(dest, before)


# -- found when actors start or while rendering ------------------------------------------------


@pytest.mark.ray
def test_source_image_without_face(media, dest, tmp_path, capsys, ray_local) -> None:
    import cv2

    from tests.clips import frame_rgb

    still = tmp_path / "noface.png"
    cv2.imwrite(str(still), frame_rgb(3, 160, 120))
    spec = job_spec(media, str(dest), "no-face")
    spec["identities"]["hero"]["images"] = [str(still)]
    before = snapshot(dest)
    assert run_main(tmp_path, spec) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "noface.png" in err and "face" in err, err
    assert_untouched(dest, before)


@pytest.mark.ray
def test_an_output_that_appears_during_the_job_is_not_overwritten(media, dest, tmp_path, ray_local) -> None:
    """``if_exists: fail`` holds at publish too: the output checked absent before Ray is
    created by someone else while the job renders; the shot fails and their file stays."""
    from cluster.driver import JobRunner
    from cluster.spec.job import parse_spec

    spec = job_spec(media, str(dest), "appears")
    spec["output"]["passes"] = ["matte"]
    runner = JobRunner(parse_spec(spec), resume=False)
    prepared = runner.prepare()  # the checks before Ray: plate.mp4 is not there
    assert [p.ref.name for p in prepared.planned] == ["plate"]
    (dest / "plate.mp4").write_bytes(KEEP)  # another job, an editor, a second submit of this spec
    summary = runner.run()
    assert not summary.ok
    (shot,) = summary.shots
    assert shot.status == "failed", summary.table()
    assert "plate.mp4" in str(shot.error) and "left untouched, not overwritten" in str(shot.error), shot.error
    assert "if_exists: fail" in str(shot.error)
    assert (dest / "plate.mp4").read_bytes() == KEEP
    assert not list(dest.glob("plate_matte*"))  # the set is not half-published either
    assert not tmp_files(str(dest))


@pytest.fixture()
def small_fs(tmp_path):
    """A 192 KiB tmpfs (as root); else the test is skipped."""
    with small_tmpfs(tmp_path / "small", "192k") as folder:
        yield folder


@pytest.mark.ray
def test_work_area_disk_full(media, dest, tmp_path, capsys, ray_local, small_fs) -> None:
    spec = job_spec(media, str(dest), "disk-full")
    spec["output"]["work_url"] = str(small_fs / "{job_id}")
    spec["output"]["url"] = str(dest / "{shot}.mp4")
    before = snapshot(dest)
    keep_fp = stat_fingerprint(str(dest / "keep.mp4"))
    assert run_main(tmp_path, spec) == EXIT_RENDER_FAILED
    err = capsys.readouterr().err
    assert "plate" in err and "no space left on device" in err, err
    assert f"job: the work area is full ({small_fs}/disk-full/" in err, err  # a job failure, the path named
    assert_untouched(dest, before)
    assert stat_fingerprint(str(dest / "keep.mp4")) == keep_fp
    assert not tmp_files(str(small_fs))


# -- provenance fields a job spec may not set, and dates that do not exist -------------------------


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        (
            "provenance: {project: 2027-02-30}\n",
            "provenance.project",
            ["2027-02-30", "not a date that exists"],
        ),
        ("tags: {delivery: 2027-06-31}\n", "tags.delivery", ["2027-06-31", "job.yaml"]),
        (
            (
                "provenance: {signer: {certificate_chain_url: c.pem, private_key_url: k.pem,"
                " timestamp_url: 'http://tsa.example'}}\n"
            ),
            "provenance.signer.timestamp_url",
            ["studio policy", "RECAST_TIMESTAMP_URL"],
        ),
    ],
)
def test_bad_provenance_in_spec(media, dest, tmp_path, capsys, text, field, words, no_ray) -> None:
    spec = yaml.safe_dump(job_spec(media, str(dest), "bad-prov")) + text
    before = snapshot(dest)
    assert run_main(tmp_path, spec) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "bad job spec" in err and field in err, err
    for word in words:
        assert word in err, err
    assert_untouched(dest, before)


@pytest.mark.parametrize("date", ["2027-06-31", "2027-02-30"])
def test_policy_date_that_does_not_exist(media, dest, tmp_path, capsys, date, no_ray) -> None:
    policy = tmp_path / "studio-policy.yaml"
    policy.write_text(f"identities:\n  hero: {{consent_ref: R-1, projects: [ep1], valid_until: {date}}}\n")
    spec = job_spec(media, str(dest), "bad-policy-date")
    spec["provenance"] = {"policy_url": str(policy), "project": "ep1"}
    before = snapshot(dest)
    assert run_main(tmp_path, spec) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert f"{policy}#identities.hero.valid_until" in err and date in err, err
    assert not ray.is_initialized()
    assert_untouched(dest, before)
