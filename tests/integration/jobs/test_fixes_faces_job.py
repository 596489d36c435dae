"""A ``faces:`` fix through a whole job on a local Ray: a finished job resubmitted with render settings
for frames inside one chunk renders that chunk again and nothing else (no analysis), ``summary.json``
says which chunk and why, the fixed frames come out as the settings say (a much wider paste-mask
erosion: the faces much closer to the plate) and every other frame, those of the same chunk around the
fix included, decodes exactly as before.  (The units: ``tests/pipeline/tracking/test_fixes.py`` and
``tests/actors/test_batches.py``; ``test_fixes_job.py`` does the same for ``keep_plate``.)

The output is DNxHR (intra-only, and byte-identical from one run to the next) so that a frame can be
compared on its own: in H.264 the frames after the fix in the re-encoded chunk are predicted from the
changed ones and differ by a few levels (measured: mean 2.1, max 22 on frames 41-47), and prores_ks
output is not the same from one run to the next.  DNxHR needs 256 pixels across: a 320x180 clip.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from cluster.driver import run_job
from cluster.spec.job import parse_spec
from jobs.demo_media import make_face_clip, write_source_image
from tests.faultjobs import CLIP_SECONDS, decode_frames, job_spec, records, rerendered_chunks

pytestmark = pytest.mark.ray

FIX = {"frames": "30-40", "faces": {"mask_erode": 0.3}}
"""Frames 30-40, inside chunk 1 (frames 24-47); the job's erosion is the default 0.05."""
FIXED = range(30, 41)


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, str]:
    root = str(tmp_path_factory.mktemp("faces-fix-media"))
    plate = os.path.join(root, "plate.mp4")
    return {
        "plate": make_face_clip(plate, seconds=CLIP_SECONDS, width=320, height=180, gop=24),
        "source": write_source_image(os.path.join(root, "source.jpg")),
    }


def spec(media: dict[str, str], out: str, fixes: list[dict]):
    data = job_spec(media, out, "faces-fix")
    data["shots"] = [{"name": "plate", "url": media["plate"], "fixes": fixes}]
    data["output"] = {
        "url": os.path.join(out, "{shot}.mov"),
        "codec": "dnxhr_hqx",
        "if_exists": "overwrite",
        "keep_segments": True,
    }
    return parse_spec(data)


def summary_shot(work: str) -> dict:
    """The shot's entry in the job's ``summary.json``."""
    (shot,) = json.loads(Path(work, "summary.json").read_text())["shots"]
    return dict(shot)


def to_plate(frame: np.ndarray, plate: np.ndarray, face: np.ndarray) -> float:
    """Mean absolute difference from the plate over the pixels ``face`` (levels, all channels)."""
    return float(np.mean(np.abs(frame - plate)[face]))


def test_a_faces_fix_changes_its_frames_and_nothing_else(media, tmp_path, ray_local) -> None:
    out = str(tmp_path / "out")
    work = os.path.join(out, ".recast-work", "faces-fix")
    output = os.path.join(out, "plate.mov")
    (first,) = run_job(spec(media, out, [])).shots
    assert first.status == "published" and first.chunks_rendered == 3 and first.analyses_run == 3
    shot = summary_shot(work)
    assert shot.get("fixes_rerendered") is None and shot.get("fixes") is None
    before_frames = decode_frames(output)
    before_renders = records(work, "plate", "render")

    (second,) = run_job(spec(media, out, [FIX])).shots
    assert second.status == "published", second.error
    assert (second.analyses_run, second.analyses_reused) == (0, 3)
    assert (second.chunks_rendered, second.chunks_reused) == (1, 2)
    shot = summary_shot(work)
    assert shot["fixes_rerendered"] == [
        {"chunk": 1, "frames": [24, 47], "reasons": ["fix 0 (frames 30-40) changed"]}
    ]
    label = "fix 0 (frames 30-40): faces: mask_erode"
    assert shot["fixes"] == [{"index": 0, "kind": "faces", "frames": [30, 40], "track": None, "label": label}]
    assert rerendered_chunks(before_renders, records(work, "plate", "render")) == [1]  # 0, 2 byte for byte

    after_frames, plate = decode_frames(output), decode_frames(media["plate"])
    assert len(after_frames) == len(before_frames) == len(plate) == 72
    # Every frame outside the fix, chunk 1's 24-29 and 41-47 among them: the same pixels.
    changed = [f for f in range(72) if not np.array_equal(after_frames[f], before_frames[f])]
    assert changed == list(FIXED), changed
    for f in FIXED:
        # The face: where the first run moved the plate by more than 60 levels (sum of channels);
        # measured 3,548-3,976 pixels on these frames.
        face = np.abs(before_frames[f] - plate[f]).sum(axis=2) > 60
        assert face.sum() > 2000, f
        swapped, fixed = to_plate(before_frames[f], plate[f], face), to_plate(after_frames[f], plate[f], face)
        # Measured without the watermark: the first run 44.3-45.6 levels from the plate there, the fixed
        # frames 10.5-11.3 (the eroded mask pastes only the middle of the face), at least 4.0 times
        # closer.  The watermark (on by default since issue 43) adds its step-32 pattern to every block
        # of the face box, pasted or not: measured 49.5 and 16.6 on frame 40, 3.0 times closer.
        # Thresholds: more than 30, less than 20, at least 2.5 times closer.
        assert swapped > 30.0 and fixed < 20.0 and fixed * 2.5 < swapped, (f, swapped, fixed)
