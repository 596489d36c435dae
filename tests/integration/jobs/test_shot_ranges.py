"""Per-shot frame ranges, handles and settings on video shots, through the whole job on a local Ray."""

from __future__ import annotations

import hashlib
import os

import av
import pytest

from cluster.driver import run_job
from cluster.spec.job import parse_spec
from jobs.demo_media import make_face_clip, write_source_image
from tests.clips import ClipSpec, read_index, write_clip

pytestmark = pytest.mark.ray


def _sha(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def _job(shots: list[dict], source: str, out: str, **extra) -> dict:
    data = {
        "job_id": "ranges",
        "shots": shots,
        "identities": {
            "hero": {"images": [source], "face_index": 0},
            "lead": {"images": [source], "face_index": 3},
        },
        "selection": {"mode": "all", "source": "hero"},
        "output": {"url": os.path.join(out, "{shot}.mp4"), "preset": "ultrafast"},
        "chunking": {"seconds": 1, "min_seconds": 1, "snap_to_keyframes": False},
        "resources": {"cpus_per_actor": 0.5, "max_actors": 2},
        "faces": {"batch_size": 4},
    }
    data.update(extra)
    return data


def test_video_frame_range_with_handles(ray_local, tmp_path) -> None:
    """frames 20-60 with 6 handles, handles not delivered: frames 20-60 out, timecode and audio moved with them."""
    clip = write_clip(str(tmp_path / "clip.mp4"), ClipSpec(frames=100, rate=25, gop=10))
    source = write_source_image(str(tmp_path / "source.jpg"))
    out = str(tmp_path / "out")
    shots = [{"name": "cut", "url": clip, "frames": "20-60", "handles": 6}, {"name": "whole", "url": clip}]
    data = _job(shots, source, out)
    data["output"]["include_handles"] = False
    summary = run_job(parse_spec(data))
    assert summary.ok, summary.table()
    by_name = {s.name: s for s in summary.shots}
    assert by_name["cut"].frames == 41 and by_name["whole"].frames == 100
    with av.open(os.path.join(out, "cut.mp4")) as container:
        video = container.streams.video[0]
        assert video.metadata.get("timecode") == "01:00:00:20"
        frames = list(container.decode(video=0))
        assert [read_index(f.to_ndarray(format="rgb24")) for f in frames] == list(range(20, 61))
        assert frames[0].time == pytest.approx(0.0, abs=1e-6)
    with av.open(os.path.join(out, "cut.mp4")) as container:
        audio = container.streams.audio[0]
        packets = [p for p in container.demux(audio) if p.size]
        span = float((packets[-1].pts + packets[-1].duration - packets[0].pts) * audio.time_base)
        assert span == pytest.approx(41 / 25, abs=0.05)
    with av.open(os.path.join(out, "whole.mp4")) as container:
        assert container.streams.video[0].metadata.get("timecode") == "01:00:00:00"
        assert container.streams.video[0].frames == 100


def test_per_shot_selection_and_faces(ray_local, tmp_path) -> None:
    """Three shots of one clip: the one that overrides ``selection`` gets another face; the others are equal."""
    clip = make_face_clip(str(tmp_path / "face.mp4"), seconds=2, width=320, height=180, gop=24, audio=False)
    source = write_source_image(str(tmp_path / "source.jpg"))
    out = str(tmp_path / "out")
    shots = [
        {"name": "a", "url": clip},
        {"name": "b", "url": clip, "selection": {"source": "lead"}},
        {"name": "c", "url": clip, "faces": {"mask_blur": 0.08}},  # the job's own value: no change
    ]
    summary = run_job(parse_spec(_job(shots, source, out)))
    assert summary.ok, summary.table()
    assert all(s.faces_swapped > 0 for s in summary.shots)
    # The renderings before their Content Credentials (each file's own signature differs).
    content = {s.name: s.content_sha256 for s in summary.shots}
    assert content["a"] == content["c"] != content["b"]
    assert all(_sha(os.path.join(out, f"{s.name}.mp4")) == s.output_sha256 for s in summary.shots)
