"""Frame ranges and handles: which frames are analysed, rendered and delivered; per-shot settings."""

from __future__ import annotations

import pytest

from cluster.spec.job import parse_spec
from cluster.spec.shot_refs import expand_shots
from cluster.spec.windows import render_chunks, shot_window
from pipeline.errors import SpecError
from pipeline.video.chunking import plan_chunks
from tests.clips import info_from_timestamps


def spec(tmp_path, shots: list[dict], **extra) -> dict:
    data = {
        "job_id": "w",
        "shots": shots,
        "identities": {"hero": {"images": [str(tmp_path / "hero.jpg")]}, "lead": {"images": ["x.jpg"]}},
        "selection": {"mode": "all", "source": "hero"},
        "output": {"url": str(tmp_path / "{shot}.mov")},
    }
    data.update(extra)
    return data


def test_frame_range_parsing(tmp_path) -> None:
    shots = [
        {"name": "a", "url": "/p/a.mov", "frames": "10-40", "handles": 5},
        {"name": "b", "url": "/p/b.mov", "frames": 7},
        {"name": "c", "url": "/p/c.mov", "frames": [3, 9]},
    ]
    job = parse_spec(spec(tmp_path, shots))
    assert [(s.frames.first, s.frames.last) for s in job.shots if s.frames] == [(10, 40), (7, 7), (3, 9)]
    for bad, message in (("40-10", "before first frame"), ("ten", "not a frame range")):
        with pytest.raises(SpecError, match=message) as err:
            parse_spec(spec(tmp_path, [{"url": "/p/a.mov", "frames": bad}]))
        assert err.value.field.startswith("shots[0].frames")
    with pytest.raises(SpecError) as err:
        parse_spec(spec(tmp_path, [{"url": "/p/a.mov", "handles": -1}]))
    assert err.value.field == "shots[0].handles"


def test_window_with_and_without_handles(tmp_path) -> None:
    info = info_from_timestamps([i * 40 for i in range(100)], [0, 25, 50, 75])
    job = parse_spec(spec(tmp_path, [{"url": "/p/a.mov", "frames": "10-40", "handles": 5}]))
    (ref,) = expand_shots(job)
    assert ref.settings is not None
    window = shot_window(info, ref.settings, include_handles=True)
    assert window.analysed == (5, 46) and window.delivered == (5, 46) and not window.whole
    window = shot_window(info, ref.settings, include_handles=False)
    assert window.analysed == (5, 46) and window.delivered == (10, 41) and window.delivered_count == 31
    plan = plan_chunks(info, 1.0, min_seconds=1.0, snap_to_keyframes=False, start=5, end=46)
    assert plan.first_frame == 5 and plan.chunks[0].start_frame == 5 and plan.chunks[-1].end_frame == 46
    renders = render_chunks(info, plan, window)
    assert renders[0].start_frame == 10 and renders[-1].end_frame == 41
    assert [c.index for c in renders] == [c.index for c in plan.chunks]
    assert all(c.start_pts == info.pts[c.start_frame] for c in renders)
    # Handles beyond the source are clamped; a range outside it is refused by field.
    edge = parse_spec(spec(tmp_path, [{"url": "/p/a.mov", "frames": "0-3", "handles": 8}]))
    (ref,) = expand_shots(edge)
    assert ref.settings is not None
    assert shot_window(info, ref.settings, include_handles=True).analysed == (0, 12)
    outside = parse_spec(spec(tmp_path, [{"url": "/p/a.mov", "frames": "90-120"}]))
    (ref,) = expand_shots(outside)
    assert ref.settings is not None
    with pytest.raises(SpecError, match="has frames 0-99") as err:
        shot_window(info, ref.settings, include_handles=True)
    assert err.value.field == "shots[0].frames"


def test_per_shot_overrides_merge_with_job_defaults(tmp_path) -> None:
    shots = [
        {"name": "a", "url": "/p/a.mov"},
        {"name": "b", "url": "/p/b.mov", "selection": {"source": "lead"}, "faces": {"enhance": True}},
    ]
    job = parse_spec(spec(tmp_path, shots, faces={"mask_blur": 0.1, "batch_size": 2}))
    a, b = expand_shots(job)
    assert a.settings is not None and b.settings is not None
    assert a.settings.selection.source == "hero" and b.settings.selection.source == "lead"
    assert b.settings.selection.mode == "all"
    assert not a.settings.faces.enhance and b.settings.faces.enhance
    assert b.settings.faces.mask_blur == 0.1 and b.settings.faces.batch_size == 2  # the job's, kept
    with pytest.raises(SpecError) as err:
        parse_spec(spec(tmp_path, [{"url": "/p/a.mov", "selection": {"source": "nobody"}}]))
    assert err.value.field == "shots[0].selection.source"


def test_sequence_urls_and_kinds(tmp_path) -> None:
    job = parse_spec(
        spec(
            tmp_path,
            [{"url": "/p/sc010_plate.####.exr", "output": "/o/sc010.####.exr"}, {"url": "/p/sc020.%04d.dpx"}],
            output={"url": "/o/{shot}/{shot}_recast.@@@@.dpx"},
        )
    )
    a, b = expand_shots(job)
    assert a.name == "sc010_plate" and a.is_sequence and b.name == "sc020"
    assert b.output_url == "/o/sc020/sc020_recast.@@@@.dpx"
    mixed_formats = parse_spec(
        spec(
            tmp_path,
            [{"url": "/p/sc010.####.exr"}, {"url": "/p/sc020.####.dpx"}, {"url": "/p/sc030.mov"}],
            output={"url": "/o/{shot}/{shot}_recast.####.{ext}"},
        )
    )
    with pytest.raises(SpecError, match="sc030.mov is a video but its output"):
        expand_shots(mixed_formats)
    plates_only = parse_spec(
        spec(
            tmp_path,
            [{"url": "/p/sc010.####.exr"}, {"url": "/p/sc020.####.dpx"}],
            output={"url": "/o/{shot}/{shot}_recast.####.{ext}"},
        )
    )
    assert [r.output_url for r in expand_shots(plates_only)] == [
        "/o/sc010/sc010_recast.####.exr",
        "/o/sc020/sc020_recast.####.dpx",
    ]
    with pytest.raises(SpecError, match="single image") as err:
        parse_spec(spec(tmp_path, [{"url": "/p/still.exr"}]))
    assert err.value.field == "shots[0].url"
    mixed = parse_spec(spec(tmp_path, [{"url": "/p/sc010.####.exr"}]))  # output is a .mov
    with pytest.raises(SpecError, match="is an image sequence but its output") as err:
        expand_shots(mixed)
    other = parse_spec(spec(tmp_path, [{"url": "/p/sc010.####.exr", "output": "/o/sc010.####.dpx"}]))
    with pytest.raises(SpecError, match="source's format"):
        expand_shots(other)
    with pytest.raises(SpecError) as err:
        parse_spec(spec(tmp_path, [{"url": "/p/a.mov", "fps": 0}]))
    assert err.value.field == "shots[0].fps"
