"""Manifest records keep no credentials: URLs lose their userinfo, errors are redacted (real work area, no Ray)."""

from __future__ import annotations

import json
from pathlib import Path

import fsspec

from actors.results import VideoPass
from cluster.state.keys import RenderKey, ShotKey
from cluster.state.ledger import Ledger
from cluster.state.manifest import JobManifest, RenderRecord

PASSWORD = "p@ss/w0rd@SECRET"


def _texts(folder: Path) -> str:
    return "\n".join(p.read_text() for p in folder.rglob("*.json"))


def test_records_keep_no_credentials(tmp_path: Path) -> None:
    # memory:// takes any path, userinfo-looking or not, so the segment really exists at this URL.
    segment = f"memory://user:{PASSWORD}@work-e18/segments/a/00000.mkv"
    tracks = f"memory://user:{PASSWORD}@work-e18/segments/a/00000.tracks.json"
    fs = fsspec.filesystem("memory")
    fs.pipe(segment.removeprefix("memory://"), b"x" * 10)
    fs.pipe(tracks.removeprefix("memory://"), b"{}")
    work = tmp_path / "work"
    ledger = Ledger(JobManifest(str(work)), resumed=True)
    record = RenderRecord(
        0,
        RenderKey("r"),
        segment,
        "0" * 64,
        10,
        24,
        1,
        "actor-0",
        passes={"tracks": VideoPass(tracks, 2, "1" * 64)},
    )
    assert ledger.commit_segment("a", record) is None
    ledger.shot_published(
        "a",
        spec_key=ShotKey("s"),
        output_url=f"s3://AKIAIOSFODNN7EXAMPLE:{PASSWORD}@renders/a.mp4",
        sha256="2" * 64,
        fingerprint={},
        frames=24,
        render_keys=[RenderKey("r")],
        passes={"tracks": f"https://user:{PASSWORD}@renders/a.tracks.json"},
    )
    ledger.shot_failed(
        "b",
        spec_key=ShotKey("t"),
        error=f'render failed: cannot open s3://u:{PASSWORD}@plates/b.mov password="two words"',
    )
    text = _texts(work)
    for secret in (PASSWORD, "p@ss", "w0rd", "SECRET", "AKIAIOSFODNN7EXAMPLE", "two words"):
        assert secret not in text, secret
    assert "memory://work-e18/segments/a/00000.mkv" in text and "s3://renders/a.mp4" in text
    assert "https://renders/a.tracks.json" in text and "s3://***REDACTED***@plates/b.mov" in text
    (render,) = [json.loads(p.read_text()) for p in work.rglob("render-*.json")]
    assert render["segment_url"] == "memory://work-e18/segments/a/00000.mkv"
