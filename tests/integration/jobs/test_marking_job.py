"""Every output of a real job is marked as AI-made by default, and only the cluster's policy can say
otherwise (issue 43).

A spec with no ``provenance`` block, as a new user writes it, renders a 640x360 clip of a real face
(the embedded pack, two CPU actors on a local Ray) through ``jobs.render.main``: ``jobs.verify`` reads
Content Credentials saying faces were replaced by AI, signed with the installation's own key (trusted
only with that installation's root), stating the rendered content's sha256; ``jobs.detect_watermark``
finds the job's mark.  Switching marking off is refused with exit 2 naming the field, unless the
cluster's policy (``RECAST_POLICY_URL``) allows unmarked outputs: then the output carries neither mark
and the audit records, the summary and the report say what was switched off and by which policy.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import yaml

from bench.watermark import moving_face_frames, write_video
from cluster.report.summary import SUMMARY_SCHEMA
from jobs import detect_watermark, verify
from jobs.demo_media import write_source_image
from pipeline.provenance.audit import AuditLog
from pipeline.provenance.install_key import signing_dir

pytestmark = pytest.mark.ray

FRAMES = 48


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("marking-job")
    return {
        "plate": write_video(str(root / "plate.mp4"), moving_face_frames(640, 360, FRAMES), crf=16),
        "source": write_source_image(str(root / "source.jpg")),
        "root": str(root),
    }


def _spec(media: dict[str, str], out: Path, job_id: str, **extra: object) -> str:
    data = {
        "job_id": job_id,
        "shots": [{"name": "plate", "url": media["plate"]}],
        "identities": {"hero": {"images": [media["source"]], "face_index": 0}},
        "output": {"url": str(out / "{shot}.mp4"), "preset": "ultrafast"},
        "chunking": {"seconds": 1, "min_seconds": 1, "snap_to_keyframes": False},
        "resources": {"cpus_per_actor": 1, "max_actors": 2},
        **extra,
    }
    path = out.parent / f"{job_id}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def test_a_new_users_job_is_marked(ray_local, media, tmp_path, capsys) -> None:
    from jobs.render import EXIT_OK, main

    out = tmp_path / "out"
    summary_json = tmp_path / "summary.json"
    assert main([_spec(media, out, "marked"), "--summary-json", str(summary_json)]) == EXIT_OK
    output = str(out / "plate.mp4")
    capsys.readouterr()
    # Content Credentials: faces replaced by AI, the job, the identity (no policy: said so), the pack.
    assert verify.main([output]) == verify.EXIT_INVALID  # valid, but no one's trusted signer
    said = capsys.readouterr().out
    for line in (
        "valid (untrusted signer)",
        "faces replaced by AI: yes",
        "job: marked",
        "identity hero: consent none",
    ):
        assert line in said, said
    assert "Recast installation key (untrusted)" in said, said
    # The installation's root makes it trusted on the machine that signed it; the JSON states the content.
    assert (
        verify.main([output, "--json", "--trust-anchors", str(signing_dir() / "root.pem")]) == verify.EXIT_OK
    )
    found = _json(capsys)
    assert found["status"] == "valid" and found["trusted"] and found["ai_replaced"]
    summary = json.loads(summary_json.read_text())
    assert summary["schema_version"] == SUMMARY_SCHEMA  # docs/reference/summary-json.md
    page = Path(__file__).resolve().parents[3] / "docs" / "reference" / "summary-json.md"
    assert all(f"| `{key}` |" in page.read_text() for key in [*summary, *summary["shots"][0]])
    (shot,) = summary["shots"]
    assert found["content_sha256"] == shot["content_sha256"] != shot["output_sha256"]
    assert shot["output_sha256"] == hashlib.sha256(Path(output).read_bytes()).hexdigest()
    marking = summary["marking"]
    assert marking["watermark"] and marking["content_credentials"] and not marking["switched_off"]
    assert marking["signer"] == "installation (untrusted)"
    # The invisible watermark: found with the job id (exit 0).
    assert (
        detect_watermark.main([output, "--job-id", "marked", "--window", "12"]) == detect_watermark.EXIT_FOUND
    )
    assert _json(capsys)["payload"] == marking["watermark_payload"]
    # What marking cost is in the stage times: the watermark in the actors' calls, signing at the publish.
    assert shot["stage_seconds"]["render.mark"] > 0 and shot["stage_seconds"]["sign"] > 0


def test_only_the_cluster_policy_switches_marking_off(
    ray_local, media, tmp_path, capsys, monkeypatch
) -> None:
    from jobs.render import EXIT_BAD_INPUT, EXIT_OK, main

    monkeypatch.delenv("RECAST_POLICY_URL", raising=False)
    out = tmp_path / "out"
    off = {"provenance": {"watermark": {"enabled": False}, "content_credentials": False}}
    spec = _spec(media, out, "unmarked", **off)
    # The spec alone: refused before anything is written, naming the field.
    assert main([spec]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "provenance.watermark.enabled" in err and "RECAST_POLICY_URL" in err, err
    assert not out.exists()
    # The cluster's policy allows it: rendered unmarked, and the audit log says so.
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        yaml.safe_dump(
            {
                "identities": {"hero": {"consent_ref": "REL-7", "projects": ["*"]}},
                "allow_unmarked_outputs": True,
            }
        )
    )
    monkeypatch.setenv("RECAST_POLICY_URL", str(policy))
    summary_json = tmp_path / "summary.json"
    assert main([spec, "--summary-json", str(summary_json)]) == EXIT_OK
    output = str(out / "plate.mp4")
    capsys.readouterr()
    assert verify.main([output]) == verify.EXIT_MISSING
    assert (
        detect_watermark.main([output, "--job-id", "unmarked", "--window", "12"])
        == detect_watermark.EXIT_NOT_FOUND
    )
    capsys.readouterr()
    summary = json.loads(summary_json.read_text())
    assert summary["shots"][0]["content_sha256"] == summary["shots"][0]["output_sha256"]
    fields = ["provenance.watermark.enabled", "provenance.content_credentials"]
    assert summary["marking"]["switched_off"] == fields and summary["marking"]["switched_off_by"] == str(
        policy
    )
    started, completed = AuditLog(str(out)).records()
    for record in (started, completed):
        assert record.extra["marking"]["switched_off"] == fields, record.extra
        assert record.extra["marking"]["switched_off_by"] == str(policy)
        assert not record.extra["marking"]["watermark"] and not record.extra["marking"]["content_credentials"]
    report = Path(out / ".recast-work" / "unmarked" / "report.html")
    if not report.exists():  # the work area's place as the summary gives it
        report = Path(summary["work_url"]) / "report.html"
    page = report.read_text()
    assert "switched off: provenance.watermark.enabled, provenance.content_credentials" in page
    assert os.path.basename(str(policy)) in page
