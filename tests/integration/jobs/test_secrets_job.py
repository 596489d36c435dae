"""A real job whose spec carries credentials in every place a user could paste one: none of
them reaches any file the job writes, nor its terminal.

Planted (each a unique string):

* the shot URL: a plate under a presigned name, ``plate.mp4?X-Amz-Signature=...&token=...``;
* the model pack URL: a copy of the embedded pack in a folder named ``pack?token=...&sig=...``;
* the signer's private-key URL: ``signer.pem?token=...``.

The job runs as ``python -m jobs.render`` in its own process, joined to the shared local
Ray with ``log_to_driver`` on (the actors' output is printed there), with its runtime
environment given the way ``ray job submit`` gives it.  Then every file under the output
folder (outputs, work area: segments, manifest records, summary, report; audit records),
the ``--summary-json`` file, the pack cache and the captured stdout and stderr are read
byte for byte.  A spec with a credential in a URL's userinfo (password with ``@``) on the
loopback S3 store is refused before Ray, naming the field, and leaves nothing behind:
s3fs would take ``KEY:p@ss`` for a bucket name and botocore echo it in its error.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from jobs.demo_media import make_face_clip, write_source_image
from pipeline.models.pack import BUILTIN_DEFAULT, load_pack
from pipeline.store.redact import RedactingFilter
from tests.pipeline.provenance.provenance_helpers import make_test_ca
from tests.raytools import RAY_ENV, REPO

RUN = uuid.uuid4().hex[:8]
SIGNATURE = f"5e1f{RUN}deadbeef"
SHOT_TOKEN = f"shot-tok-{RUN}"
PACK_TOKEN = f"pack-tok-{RUN}"
PACK_SIG = f"pack-sig-{RUN}"
KEY_TOKEN = f"key-tok-{RUN}"
PLANTED = (SIGNATURE, SHOT_TOKEN, PACK_TOKEN, PACK_SIG, KEY_TOKEN)
REDACTED_MARK = "***REDACTED***"


def _files(*roots: Path) -> list[Path]:
    return sorted(p for root in roots if root.exists() for p in root.rglob("*") if p.is_file())


def _spec(root: Path, shot_url: str, pack_url: str, key_url: str, chain_url: str) -> dict:
    return {
        "job_id": "secrets-job",
        "shots": [{"name": "plate", "url": shot_url}],
        "identities": {"hero": {"images": [str(root / "media" / "source.jpg")], "face_index": 0}},
        "models": {"pack": pack_url},
        "output": {"url": str(root / "out" / "{shot}.mp4"), "preset": "ultrafast"},
        "chunking": {"seconds": 1, "min_seconds": 1, "snap_to_keyframes": False},
        "resources": {"cpus_per_actor": 1, "max_actors": 2},
        "faces": {"batch_size": 4},
        "provenance": {
            "policy_url": str(root / "policy.yaml"),
            "project": "ep101",
            "signer": {"certificate_chain_url": chain_url, "private_key_url": key_url},
            "watermark": {"enabled": True},
        },
    }


@pytest.mark.ray
def test_no_planted_secret_in_any_artefact_of_a_job(ray_local, tmp_path: Path) -> None:
    root, media, cache = tmp_path, tmp_path / "media", tmp_path / "cache"
    media.mkdir()
    clip = make_face_clip(str(media / "plate.mp4"), seconds=1.5, width=320, height=180, gop=12, timecode=None)
    shot_url = f"{clip}?X-Amz-Signature={SIGNATURE}&token={SHOT_TOKEN}"
    shutil.copy(clip, shot_url)
    write_source_image(str(media / "source.jpg"))
    builtin = Path(load_pack(BUILTIN_DEFAULT, cache_dir=str(tmp_path / "builtin")).local_dir)
    pack_url = str(media / f"pack?token={PACK_TOKEN}&sig={PACK_SIG}")
    shutil.copytree(builtin, pack_url, ignore=shutil.ignore_patterns(".recast-pack.json"))
    ca = make_test_ca(media / "ca")
    key_url = str(media / "ca" / f"signer.pem?token={KEY_TOKEN}")
    shutil.copy(ca["key"], key_url)
    (root / "policy.yaml").write_text(
        yaml.safe_dump(
            {
                "identities": {"hero": {"consent_ref": "REL-E18", "projects": ["ep101"]}},
                "allowed_input_prefixes": [str(media)],
                "allowed_output_prefixes": [str(root / "out")],
            }
        )
    )
    spec = root / "spec.yaml"
    spec.write_text(yaml.safe_dump(_spec(root, shot_url, pack_url, key_url, str(ca["chain"]))))
    summary_json = root / "summary.json"

    runtime_env = {"env_vars": {"PYTHONPATH": str(REPO), "RECAST_CACHE_DIR": str(cache), **RAY_ENV}}
    env = {
        **os.environ,
        **RAY_ENV,
        "RAY_ADDRESS": ray_local.gcs_address or "",
        "PYTHONPATH": str(REPO),
        "RECAST_CACHE_DIR": str(cache),
        "RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps({"runtime_env": runtime_env}),
    }
    result = subprocess.run(
        [sys.executable, "-m", "jobs.render", str(spec), "--summary-json", str(summary_json)],
        check=False,
        cwd=str(REPO),
        env=env,
        capture_output=True,
        timeout=600,
    )
    stderr = result.stderr.decode(errors="replace")
    assert result.returncode == 0, stderr[-4000:]
    summary = json.loads(summary_json.read_text())
    assert summary["shots"][0]["status"] == "published", summary
    # The planted values were echoed, redacted, where the job reports its inputs.
    assert "X-Amz-Signature=***REDACTED***" in summary_json.read_text()
    assert f"token={REDACTED_MARK}" in stderr or f"token={REDACTED_MARK}" in result.stdout.decode()

    written = _files(root / "out", cache)
    names = {p.name for p in written}
    for expected in (
        "summary.json",
        "report.html",
        "report.json",
        "job.json",
        "shot.json",
        ".recast-pack.json",
    ):
        assert expected in names, expected
    assert any(p.name.startswith("render-") for p in written) and any(p.suffix == ".mp4" for p in written)
    assert any("audit" in p.parts for p in written)
    artefacts: dict[str, bytes] = {str(p): p.read_bytes() for p in [*written, summary_json]}
    artefacts["stdout"], artefacts["stderr"] = result.stdout, result.stderr
    for name, data in artefacts.items():
        for secret in PLANTED:
            assert secret.encode() not in data, (name, secret)


@pytest.mark.parametrize(
    ("field", "edit"),
    [
        ("shots[0].url", lambda d, u: d["shots"][0].update(url=u)),
        ("output.url", lambda d, u: d["output"].update(url=u + "/{shot}.mp4")),
        ("output.work_url", lambda d, u: d["output"].update(work_url=u)),
        ("models.pack", lambda d, u: d.update(models={"pack": u})),
        ("identities.hero.images[0]", lambda d, u: d["identities"]["hero"].update(images=[u])),
    ],
)
def test_userinfo_in_any_url_field_is_refused(field: str, edit, tmp_path: Path) -> None:
    from cluster.spec.job import parse_spec
    from pipeline.errors import SpecError

    data = _spec(tmp_path, "/plates/a.mov", "builtin:default", "/keys/k.pem", "/keys/chain.pem")
    edit(data, "s3://AKIAIOSFODNN7EXAMPLE:p@ss/w0rd@bucket/x")
    with pytest.raises(SpecError) as refused:
        parse_spec(data)
    assert refused.value.field == field
    assert "s3://***REDACTED***@bucket/x" in str(refused.value) and "environment" in str(refused.value)
    assert "p@ss" not in str(refused.value) and "AKIA" not in str(refused.value)


def _drop_redaction_filters() -> None:
    """``jobs.render.main`` adds a RedactingFilter to the root handlers: take it off again."""
    for handler in logging.getLogger().handlers:
        for flt in [f for f in handler.filters if isinstance(f, RedactingFilter)]:
            handler.removeFilter(flt)


def test_userinfo_credentials_refused_before_ray_and_never_echoed(
    s3_bucket: str, tmp_path: Path, no_ray, capsys: pytest.CaptureFixture[str]
) -> None:
    from jobs.render import EXIT_BAD_INPUT, main

    password = f"p@ss/w0rd@{RUN}"
    bucket = s3_bucket.removeprefix("s3://")
    spec = tmp_path / "spec.yaml"
    out = tmp_path / "out"
    source = write_source_image(str(tmp_path / "source.jpg"))
    spec.write_text(
        yaml.safe_dump(
            {
                "job_id": "userinfo-job",
                "shots": [
                    {"name": "plate", "url": f"s3://AKIAIOSFODNN7EXAMPLE:{password}@{bucket}/plate.mp4"}
                ],
                "identities": {"hero": {"images": [source], "face_index": 0}},
                "output": {"url": str(out / "{shot}.mp4")},
            }
        )
    )
    try:
        code = main([str(spec)])
    finally:
        _drop_redaction_filters()
    assert code == EXIT_BAD_INPUT
    printed = capsys.readouterr()
    text = printed.out + printed.err
    assert f"s3://{REDACTED_MARK}@{bucket}/plate.mp4" in text, text
    for secret in (password, "p@ss", "w0rd", "AKIAIOSFODNN7EXAMPLE"):
        assert secret not in text, secret
    assert not out.exists()
