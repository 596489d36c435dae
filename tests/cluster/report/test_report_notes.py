"""The report's notes (issue 31): a shot's fixes on its timeline, the chunks they rendered again, and the
"Frames to review" form that writes notes as fixes and downloads them, driven in a real headless
Chromium; the download is read back as ``jobs.render --fixes`` reads it and validated by the spec."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from cluster.report.build import NoteChoices, build_report, write_report
from cluster.report.notes import faces_inputs
from cluster.report.summary import RerenderedChunk, fix_marks
from cluster.spec.fixes import BoxFix, FacesFix, IdentityFix, KeepPlateFix
from cluster.spec.fixes_file import merge_fixes, read_fixes_file
from cluster.spec.job import parse_spec
from pipeline.faces.config import FaceConfig
from pipeline.thumbnails import boundary_frames, thumbnails
from pipeline.tracking.fixes import RENDER_FACE_FIELDS
from pipeline.video.probe import VideoInfo, probe
from tests.clips import ClipSpec, write_clip
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

# Evaluated in the page: a note on each of the three flagged ranges (keep the plate on 5-7, a box dragged
# on frame 23's picture, another identity on 11-12), render settings typed for 13-14 (first with a value out
# of its range, refused), then the download.
NOTES_PROBE = """JSON.stringify((() => {
  const card = document.querySelector('.card.qc');
  const form = card.querySelector('form.notes'), rows = card.querySelectorAll('tr.flag');
  const set = (name, value) => { form.elements.namedItem(name).value = value; };
  const add = () => form.querySelector('button[name=add]').click();
  rows[0].querySelector('button.note').click();
  set('action', 'keep_plate'); add();
  const img = rows[1].querySelector('.pick img'), r = img.getBoundingClientRect();
  const mouse = (type, fx, fy) => img.dispatchEvent(new MouseEvent(type,
    {bubbles: true, clientX: r.left + fx * r.width, clientY: r.top + fy * r.height}));
  mouse('mousedown', 0.25, 0.25); mouse('mousemove', 0.5, 0.4); mouse('mouseup', 0.75, 0.5);
  set('identity', 'bob'); add();
  rows[2].querySelector('button.note').click();
  set('action', 'identity'); set('identity', 'anna'); add();
  const settings = form.querySelector('fieldset.faces'), hidden = settings.hidden;
  set('frames', '13-14'); set('action', 'faces');
  form.elements.namedItem('action').dispatchEvent(new Event('change'));
  set('faces.mask_blur', '0.9'); add();
  const refused = form.querySelector('.err').textContent;
  set('faces.mask_blur', '0.12'); set('faces.enhance', 'true'); add();
  form.elements.namedItem('download').click();
  return {yaml: form.querySelector('pre').textContent, error: form.querySelector('.err').textContent,
    faces: {hidden: hidden, shown: !settings.hidden, refused: refused},
    picture: [r.width, r.height, img.dataset.frame],
    marks: Array.from(card.querySelectorAll('svg rect.fix')).map(m => [m.dataset.fix, m.textContent]),
    listed: Array.from(card.querySelectorAll('.fixlist li')).map(li => li.textContent)};
})())"""


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, VideoInfo]:
    root = tmp_path_factory.mktemp("report-notes")
    source = write_clip(
        str(root / "src.mp4"), ClipSpec(width=640, height=480, frames=FRAMES, rate=Fraction(25))
    )
    info = probe(source)
    output = str(root / "out.mp4")
    fake_render(source, output, info)
    return source, output, info


def _spec(source: str, out: Path) -> dict:
    """A spec whose shot ``sc010`` the downloaded fixes are for."""
    return {
        "job_id": "notes",
        "shots": [
            {"name": "sc010", "url": source, "fixes": [{"frames": "0-2", "track": 0, "action": "keep_plate"}]}
        ],
        "identities": {"anna": {"images": [source]}, "bob": {"images": [source]}},
        "selection": {"mode": "all", "source": "anna"},
        "output": {"url": str(out / "{shot}.mp4")},
    }


# The box dragged from a quarter to three quarters across and a quarter to a half down the picture, in the
# plate's stored pixels as fractions of its width and height: as it is, and for a plate shown turned 90
# degrees counter-clockwise (across its picture is up the plate; the picture here is not turned itself, only
# the geometry counts: fractions of the picture's box).
BOXES = {0: (0.25, 0.25, 0.75, 0.5), 90: (0.5, 0.25, 0.75, 0.75)}


@pytest.mark.parametrize("rotation", sorted(BOXES))
def test_notes_are_written_as_fixes_and_downloaded(
    clip: tuple[str, str, VideoInfo], tmp_path: Path, rotation: int
) -> None:
    source, output, info = clip
    spec = parse_spec(_spec(source, tmp_path))
    summary = job_summary(output)
    shot = summary.shots[0]
    shot.qc = shot_qc()
    shot.fixes = fix_marks(spec.shots[0].fixes)
    shot.fixes_rerendered = [RerenderedChunk(0, (0, 11), ("fix 0 (frames 0-2, track 0) changed",))]
    thumbs = {"sc010": thumbnails(source, output, info, boundary_frames(plan_of(info, BOUNDS)))}
    notes = NoteChoices(
        identities=("anna", "bob"),
        frame_sizes={"sc010": (info.width, info.height)},
        rotations={"sc010": rotation},
    )
    report, page = build_report(summary, thumbs=thumbs, timeline=TIMELINE, notes=notes)
    assert report["identities"] == ["anna", "bob"]
    assert report["shots"][0]["frame_size"] == [info.width, info.height]
    assert report["shots"][0]["fixes"] == [
        {
            "index": 0,
            "kind": "keep_plate",
            "frames": [0, 2],
            "track": 0,
            "label": "fix 0 (frames 0-2, track 0): keep the plate",
        }
    ]
    # summary.json without fixes has no key for them, as before.
    assert "fixes" not in summary.shots[1].to_dict()
    _, html_url = write_report(str(tmp_path / "job"), report, page)
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium on PATH (Debian package: chromium)")
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    check = check_page(html_url, chromium=chromium, probe=NOTES_PROBE, downloads=downloads)
    assert check.errors == [] and check.requests == []
    got = check.probe
    assert got["error"] == ""
    assert got["faces"] == {"hidden": True, "shown": True, "refused": "mask_blur: a number from 0 to 0.5"}
    assert got["marks"] == [["0", "fix 0 (frames 0-2, track 0): keep the plate"]]
    assert got["listed"] == [
        "fix 0 (frames 0-2, track 0): keep the plate",
        "chunk 0 (frames 0–11): fix 0 (frames 0-2, track 0) changed",
    ]
    assert [p.name for p in check.downloads] == ["sc010_fixes.yaml"]
    text = check.downloads[0].read_text()
    assert text == got["yaml"]
    width, height, frame = got["picture"]
    assert frame == "23" and 0 < width < info.width
    loaded = yaml.safe_load(text)
    box = loaded["fixes"][1].pop("box")
    assert list(box) == [23]
    step = max(info.width, info.height) / min(width, height) + 1  # a CSS pixel of the picture, in the plate's
    fx0, fy0, fx1, fy1 = BOXES[rotation]
    expected = (fx0 * info.width, fy0 * info.height, fx1 * info.width, fy1 * info.height)
    assert all(abs(a - b) <= step for a, b in zip(box[23], expected, strict=True)), box
    assert loaded == {
        "shot": "sc010",
        "fixes": [
            {"frames": "5-7", "track": 0, "action": "keep_plate"},
            {"frames": "23-23", "identity": "bob"},
            {"frames": "11-12", "track": 0, "identity": "anna"},
            {"frames": "13-14", "faces": {"enhance": True, "mask_blur": 0.12}},
        ],
    }
    # The download is what `jobs.render --fixes FILE` reads, and the spec accepts it.
    merged_data, merged = merge_fixes(_spec(source, tmp_path), [read_fixes_file(str(check.downloads[0]))])
    fixes = parse_spec(merged_data).shots[0].fixes
    assert [type(f) for f in fixes] == [KeepPlateFix, KeepPlateFix, BoxFix, IdentityFix, FacesFix]
    assert isinstance(fixes[4], FacesFix) and str(fixes[4].frames) == "13-14"
    assert fixes[4].faces.model_fields_set == {"enhance", "mask_blur"}
    assert fixes[4].faces.enhance is True and fixes[4].faces.mask_blur == 0.12
    assert isinstance(fixes[2], BoxFix) and fixes[2].box == {23: tuple(float(v) for v in box[23])}
    assert str(fixes[1].frames) == "5-7" and str(fixes[3].frames) == "11-12"
    assert merged.origins["shots[0].fixes[3]"] == (str(check.downloads[0]), "sc010", 2)
    json.dumps(report)


def test_the_faces_note_offers_the_keys_and_ranges_a_fix_may_set() -> None:
    """One input per ``faces`` key a fix may carry, each number input bounded as the spec bounds it."""
    form = faces_inputs()
    for key in RENDER_FACE_FIELDS:
        info = FaceConfig.model_fields[key]
        assert f'data-face="{key}"' in form, key
        if info.annotation is not bool:
            low = next(m.ge for m in info.metadata if hasattr(m, "ge"))
            high = next(m.le for m in info.metadata if hasattr(m, "le"))
            assert (
                f'name="faces.{key}" data-face="{key}" data-kind="number" type="number" step="any" ' in form
            )
            assert f'min="{low}" max="{high}"' in form.split(f'data-face="{key}"')[1].split(">")[0], key
    assert form.count("data-face=") == len(RENDER_FACE_FIELDS)
