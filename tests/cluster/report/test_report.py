"""Thumbnails and the job report, checked on real clips and in a real headless Chromium."""

from __future__ import annotations

import json
import os
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np
import pytest

from actors.results import ActorInfo, ChunkWatermark, PackInfo
from cluster.report.build import actor_busy_ratios, build_report, write_report
from cluster.report.summary import ShotSummary
from pipeline.errors import MediaError
from pipeline.store import storage
from pipeline.store.redact import redact
from pipeline.thumbnails import Thumb, boundary_frames, thumbnails
from pipeline.video.chunking import Chunk, ChunkPlan
from pipeline.video.probe import VideoInfo, probe
from tests.clips import ClipSpec, read_index, write_clip
from tests.cluster.report.browser import check_page, find_chromium
from tests.cluster.report.sample_report import (
    BOUNDS,
    FRAMES,
    TIMELINE,
    fake_render,
    job_summary,
    plan_of,
    shot_qc,
)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, VideoInfo]:
    root = tmp_path_factory.mktemp("report")
    source = write_clip(str(root / "src.mp4"), ClipSpec(frames=FRAMES, rate=Fraction(25)))
    info = probe(source)
    output = str(root / "out.mp4")
    fake_render(source, output, info)
    return source, output, info


def _decode_jpeg(data: bytes) -> np.ndarray:
    bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    assert bgr is not None
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def test_boundary_frames() -> None:
    plan = ChunkPlan(30, (Chunk(0, 0, 12), Chunk(1, 12, 24), Chunk(2, 24, 30)))
    assert boundary_frames(plan) == [0, 11, 12, 23, 24]
    assert boundary_frames(ChunkPlan(5, (Chunk(0, 0, 5),))) == [0]
    # A one-frame chunk shares its frame between two boundaries; no duplicates.
    assert boundary_frames(ChunkPlan(4, (Chunk(0, 0, 2), Chunk(1, 2, 3), Chunk(2, 3, 4)))) == [0, 1, 2, 3]


def test_thumbnails_are_the_exact_frames_before_and_after(rendered: tuple[str, str, VideoInfo]) -> None:
    source, output, info = rendered
    frames = boundary_frames(plan_of(info, BOUNDS))
    thumbs = thumbnails(source, output, info, frames, width=320)
    assert [t.frame for t in thumbs] == [0, 11, 12, 23, 24]
    for t in thumbs:
        before, after = _decode_jpeg(t.before_jpeg), _decode_jpeg(t.after_jpeg)
        assert before.shape == after.shape == (240, 320, 3)
        # The frame code drawn into each picture says which frame it is: both sides, exact.
        assert read_index(before) == read_index(after) == t.frame
        # Colour order survived (RGB -> BGR for OpenCV): the painted box is magenta in "after" only.
        box_after = after[140:220, 40:120].reshape(-1, 3).mean(axis=0)
        box_before = before[140:220, 40:120].reshape(-1, 3).mean(axis=0)
        assert box_after[0] > 180 and box_after[2] > 180 and box_after[1] < 60, box_after
        assert abs(box_before - box_after).max() > 60


def test_thumbnails_reject_frames_outside_the_output(rendered: tuple[str, str, VideoInfo]) -> None:
    source, output, info = rendered
    with pytest.raises(MediaError, match="outside"):
        thumbnails(source, output, info, [0, FRAMES])


def test_ten_bit_and_rotated_sources_make_8_bit_upright_thumbnails(tmp_path: Path) -> None:
    ten = write_clip(
        str(tmp_path / "ten.mp4"), ClipSpec(codec="libx265", pix_fmt="yuv420p10le", frames=6, audio=False)
    )
    info = probe(ten)
    assert info.bit_depth == 10
    (thumb,) = thumbnails(ten, ten, info, [4], width=160)
    rgb = _decode_jpeg(thumb.before_jpeg)
    assert rgb.dtype == np.uint8 and read_index(rgb) == 4
    rotated = write_clip(str(tmp_path / "rot.mp4"), ClipSpec(rotation=90, frames=4, audio=False))
    rinfo = probe(rotated)
    (rthumb,) = thumbnails(rotated, rotated, rinfo, [0], width=90)
    assert _decode_jpeg(rthumb.after_jpeg).shape == (120, 90, 3)  # 160x120 shown as portrait


def test_the_report_reads_a_redacted_copy_of_the_summary() -> None:
    """``JobSummary.redacted()`` is what the report thread reads: a copy whose ``to_dict()`` is the
    summary's redacted the way summary.json is, typed parts (actor info, QC, watermark) included."""
    secret = "s3://AKIAIOSFODNN7EXAMPLE:pw@bucket/plates/a.mov"
    summary = job_summary("out.mp4")
    summary.shots[0].url = secret
    summary.shots[0].qc = shot_qc()
    summary.shots[0].add_watermark(ChunkWatermark(payload="0badf00d", step=32.0, frames=((0, 4), (6, 9))))
    summary.actor_info.append(
        ActorInfo(
            label="actor-0",
            host="h",
            pid=1,
            providers={"swapper": ["CPUExecutionProvider"]},
            warnings=(f"could not read {secret}",),
            nvdec=False,
            pack=PackInfo(url="builtin:default", name="default", hash="0" * 64),
            identities=("hero",),
            encoders_built_in=("libx264",),
            setup_seconds=1.0,
            models_id=5,
            chunks_done=0,
            node_id="n0",
        )
    )
    copy = summary.redacted()
    assert copy.to_dict() == redact(summary.to_dict())
    assert "AKIAIOSFODNN7EXAMPLE" not in json.dumps(copy.to_dict()) and summary.shots[0].url == secret
    info = copy.to_dict()["actor_info"][0]
    assert list(info)[-1] == "node_id" and info["pack"] == {
        "url": "builtin:default",
        "name": "default",
        "hash": "0" * 64,
    }
    assert copy.to_dict()["shots"][0]["watermark"]["frame_ranges"] == [[0, 4], [6, 9]]


def test_report_json_collects_warnings_retries_and_stages(rendered: tuple[str, str, VideoInfo]) -> None:
    report, page = build_report(job_summary("out.mp4"), thumbs={}, timeline=TIMELINE)
    shot, failed = report["shots"]
    assert shot["retries"] == 1 and report["retries"] == 1
    text = " | ".join(shot["warnings"])
    assert "faces not found" in text
    assert "CPU fallback: swapper" in text
    assert "render of chunk 1 failed on a1 (attempt 1)" in text
    assert failed["warnings"][0] == "failed: render of chunk 1 failed: <boom>"
    # Sub-stages (swap.model) are inside their parent and not counted twice.
    assert report["stage_seconds"] == {"decode": 1.7, "detect": 3.4, "encode": 0.8, "swap": 5.0}
    assert len(report["timeline"]) == len(TIMELINE)
    json.dumps(report)  # serialisable as is
    # Every piece of text is escaped: nothing from the summary can become markup.
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;boom&gt;" in page and "job-&lt;7&gt;&amp;&quot;x&quot;" in page


def test_report_published_and_opens_cleanly_in_chromium(
    rendered: tuple[str, str, VideoInfo], tmp_path: Path
) -> None:
    source, output, info = rendered
    thumbs = {"sc010": thumbnails(source, output, info, boundary_frames(plan_of(info, BOUNDS)))}
    report, page = build_report(job_summary(output), thumbs=thumbs, timeline=TIMELINE, retries={"sc010": 1})
    json_url, html_url = write_report(str(tmp_path / "job"), report, page)
    assert json.loads(storage.read_bytes(json_url))["shots"][0]["thumbnails"] == [0, 11, 12, 23, 24]
    # Self-contained: no URL the browser could fetch, pictures inline.
    assert "http://" not in page and "https://" not in page and 'src="data:image/jpeg;base64,' in page
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium on PATH (Debian package: chromium)")
    check = check_page(html_url, chromium=chromium)
    assert check.errors == []
    assert check.requests == []
    assert check.title.startswith("Recast job")
    assert len(check.images) == 2 * 5
    for img in check.images:
        assert img["complete"] and img["naturalWidth"] == 320 and img["naturalHeight"] == 240, img
        assert img["width"] > 0 and img["height"] > 0, img


def test_browser_check_catches_broken_pages(tmp_path: Path) -> None:
    """The browser check can fail: a script error, a broken image and an outside URL are all seen."""
    if find_chromium() is None:
        pytest.skip("no Chromium on PATH (Debian package: chromium)")
    good = Thumb(0, b"", b"")
    _, page = build_report(job_summary("out.mp4"), thumbs={"sc010": [good]})
    page = page.replace("</main>", '<img src="http://127.0.0.1:9/x.png"></main>')
    (tmp_path / "bad.html").write_text(page)
    check = check_page(tmp_path / "bad.html")
    assert any("Content Security Policy" in e for e in check.errors), check.errors
    assert check.images and [i["naturalWidth"] for i in check.images] == [0, 0, 0]
    (tmp_path / "script.html").write_text(
        "<!DOCTYPE html><title>s</title><script>console.error('boom');x()</script>"
    )
    errors = check_page(tmp_path / "script.html").errors
    assert any("boom" in e for e in errors) and any("ReferenceError" in e for e in errors), errors


def test_write_report_to_s3(s3_bucket: str) -> None:
    report, page = build_report(job_summary("out.mp4"), running=True)
    json_url, html_url = write_report(f"{s3_bucket}/jobs/j1", report, page)
    assert json_url == f"{s3_bucket}/jobs/j1/report.json"
    assert json.loads(storage.read_bytes(json_url))["running"] is True
    assert b'http-equiv="refresh"' in storage.read_bytes(html_url)
    assert not os.path.exists("report.html")


def test_actor_busy_ratios_merge_overlapping_work() -> None:
    ratios = actor_busy_ratios(TIMELINE)
    # a0: 3.2-4.6 (two overlapping-free items), 4.7-6.2, 6.9-8.8 over 3.2-8.8 -> 4.8 / 5.6
    assert ratios["a0"] == pytest.approx((1.4 + 1.5 + 1.9) / 5.6)
    # a1: 3.2-4.1, 4.7-6.9, 7.0-8.5 over 3.2-8.8
    assert ratios["a1"] == pytest.approx((0.9 + 2.2 + 1.5) / 5.6)
    overlapping = [
        {"actor": "x", "start": 0, "end": 4},
        {"actor": "x", "start": 1, "end": 3},
        {"actor": "x", "start": 6, "end": 8},
    ]
    assert actor_busy_ratios(overlapping, until=10) == {"x": pytest.approx(0.6)}
    assert actor_busy_ratios([]) == {}


# Evaluated in the page: the QC card, whether it is displayed, its review rows and its chart.
QC_PROBE = """JSON.stringify((() => {
  const card = document.querySelector('.card.qc');
  if (!card) return null;
  const box = card.getBoundingClientRect(), svg = card.querySelector('svg').getBoundingClientRect();
  return {shot: card.dataset.shot, width: box.width, height: box.height,
    visible: getComputedStyle(card).visibility === 'visible' && getComputedStyle(card).display !== 'none',
    rows: Array.from(card.querySelectorAll('tr.flag')).map(r => [r.cells[0].textContent,
      r.cells[2].textContent, r.querySelectorAll('img').length]),
    svgWidth: svg.width, svgHeight: svg.height, line: card.querySelectorAll('polyline').length,
    bands: card.querySelectorAll('svg rect[fill="#d62728"]').length};
})())"""


def test_report_qc_section_lists_frames_to_review_in_chromium(
    rendered: tuple[str, str, VideoInfo], tmp_path: Path
) -> None:
    source, output, info = rendered
    thumbs = {"sc010": thumbnails(source, output, info, boundary_frames(plan_of(info, BOUNDS)))}
    summary = job_summary(output)
    qc = shot_qc()
    # The summary carries the QC as it is (summary.json, then report.json).
    shot_summary = ShotSummary(name="sc010", url="u", output_url=output, qc=qc)
    assert json.loads(json.dumps(shot_summary.to_dict()))["qc"] == qc.to_dict()
    summary.shots[0].qc = qc
    report, page = build_report(summary, thumbs=thumbs, timeline=TIMELINE)
    json_url, html_url = write_report(str(tmp_path / "job"), report, page)
    shot = json.loads(storage.read_bytes(json_url))["shots"][0]
    assert shot["qc"] == json.loads(json.dumps(qc.to_dict()))
    # Worst first; a thumbnail where the report has one inside the flag's frames.
    assert [(r["reason"], r["thumbnail"]) for r in shot["review"]] == [
        ("unreplaced", None),
        ("low_identity", 23),
        ("flicker", 11),
    ]
    assert "&lt;across&gt;" in page and "<across>" not in page
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium on PATH (Debian package: chromium)")
    check = check_page(html_url, chromium=chromium, probe=QC_PROBE)
    assert check.errors == [] and check.requests == []
    card = check.probe
    assert card is not None and card["shot"] == "sc010" and card["visible"]
    assert card["width"] > 300 and card["height"] > 100
    assert card["rows"] == [
        ["5–7", "unreplaced", 0],
        ["23", "low_identity", 2],
        ["11–12", "flicker (chunk boundary)", 2],
    ]
    assert card["svgWidth"] > 300 and card["svgHeight"] > 50 and card["line"] == 2
    assert card["bands"] >= 4  # unreplaced coverage band + three shaded flags
    # The review thumbnails are decoded and shown like the before/after section's.
    assert len(check.images) == 2 * 5 + 2 * 2
    assert all(img["complete"] and img["naturalWidth"] == 320 and img["width"] > 0 for img in check.images)
