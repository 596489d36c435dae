"""A work area written by an earlier Recast is read as this version's, one written by a newer Recast is
refused by version (issue 44).

One small real job (the embedded pack, 1 s of the astronaut) is rendered through ``jobs.render.main``.
Its records are then rewritten as the Recast before issue 43 wrote them (manifest version 1, without
the fields version 2 added): resubmitted, the job resumes, keeps its published output and says which
version it read.  With ``job.json`` at a version no Recast has written yet it is refused before Ray,
exit 2 naming the file, the version found and the versions this Recast reads, nothing touched.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cluster.state.manifest import MANIFEST_VERSION, READABLE_VERSIONS
from jobs.demo_media import make_face_clip, write_source_image

pytestmark = pytest.mark.ray

VERSION_2_FIELDS = ("content_sha256", "credentials_url", "replaced_frames")


def _records(work: Path) -> list[Path]:
    return sorted((work / "manifest").rglob("*.json"))


def _rewrite(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    for name in VERSION_2_FIELDS:
        data.pop(name, None)
    data.update(changes)
    path.write_text(json.dumps(data, indent=1))


def test_older_work_area_is_read_newer_is_refused(ray_local, tmp_path, capsys) -> None:
    from jobs.render import EXIT_BAD_INPUT, EXIT_OK, main

    assert MANIFEST_VERSION == 2 and READABLE_VERSIONS == (1, 2)
    clip = make_face_clip(
        str(tmp_path / "plate.mp4"), seconds=1.0, width=320, height=180, gop=12, timecode=None
    )
    out = tmp_path / "out"
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "job_id": "versions",
                "shots": [{"name": "plate", "url": clip}],
                "identities": {
                    "hero": {"images": [write_source_image(str(tmp_path / "s.jpg"))], "face_index": 0}
                },
                "output": {"url": str(out / "{shot}.mp4"), "preset": "ultrafast"},
                "chunking": {"seconds": 1, "min_seconds": 1, "snap_to_keyframes": False},
                "resources": {"cpus_per_actor": 1, "max_actors": 1},
            }
        )
    )
    assert main([str(spec)]) == EXIT_OK
    work = out / ".recast-work" / "versions"
    records = _records(work)
    assert records and all(json.loads(p.read_text())["version"] == MANIFEST_VERSION for p in records)
    published = (out / "plate.mp4").read_bytes()

    # As the Recast before issue 43 wrote them: version 1, without version 2's fields.
    for path in records:
        _rewrite(path, version=1)
    summary_json = tmp_path / "summary.json"
    capsys.readouterr()
    assert main([str(spec), "--summary-json", str(summary_json)]) == EXIT_OK
    summary = json.loads(summary_json.read_text())
    assert any("manifest version 1" in w for w in summary["warnings"]), summary["warnings"]
    (shot,) = summary["shots"]
    assert shot["status"] == "published" and shot["reused"], shot  # its published output kept
    assert (out / "plate.mp4").read_bytes() == published
    assert json.loads((work / "manifest" / "job.json").read_text())["version"] == MANIFEST_VERSION

    # Written by a newer Recast: refused before anything is read or written.
    _rewrite(work / "manifest" / "job.json", version=3)
    before = {p: p.read_bytes() for p in _records(work)}
    capsys.readouterr()
    assert main([str(spec)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "job.json" in err and "manifest version 3" in err and "reads versions 1, 2" in err, err
    assert "--fresh" in err
    assert {p: p.read_bytes() for p in _records(work)} == before
    assert (out / "plate.mp4").read_bytes() == published
