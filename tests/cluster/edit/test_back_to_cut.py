"""Back to the cut: the timeline written again with every rendered clip pointing at its output,
read back with OpenTimelineIO and compared clip by clip."""

from __future__ import annotations

import opentimelineio as otio
import pytest

from cluster.edit import EditPlan, with_edit_shots, write_timeline
from cluster.spec.job import parse_spec
from cluster.spec.shot_refs import expand_shots
from tests.cluster.edit.cut_media import RT, Media, job, the_cut, write_otio


def planned(media: Media, tmp_path, **output) -> tuple[EditPlan, dict[str, str], str]:
    data = job(
        media, write_otio(the_cut(media), tmp_path / "ep101_v3.otio"), str(tmp_path), edit={"offline": "skip"}
    )
    data["output"].update(output)
    spec, plan = with_edit_shots(parse_spec(data))
    assert plan is not None
    return plan, {r.name: r.output_url for r in expand_shots(spec)}, data["edit"]["url"]


def items(cut: otio.schema.Timeline) -> list[list[otio.core.Composable]]:
    return [list(t) for t in cut.tracks]


def test_the_written_cut_is_the_cut_relinked_to_the_outputs(media: Media, tmp_path) -> None:
    url = str(tmp_path / "back" / "ep101_v3_recast.otio")
    plan, outputs, source_url = planned(media, tmp_path, timeline_url=url)
    write_timeline(plan, {**outputs, "gone": "/x.mp4"}, include_handles=True, overwrite=False)
    back = otio.adapters.read_from_file(url)
    before = otio.adapters.read_from_file(source_url)
    assert back.name == before.name and back.metadata == before.metadata
    assert back.global_start_time == before.global_start_time
    # Same tracks, items, ranges, transitions, markers and metadata: only media references differ.
    for old_track, new_track in zip(items(before), items(back), strict=True):
        for old, new in zip(old_track, new_track, strict=True):
            assert type(old) is type(new) and old.name == new.name
            if isinstance(old, otio.schema.Transition):
                assert (old.in_offset, old.out_offset, old.transition_type) == (
                    new.in_offset,
                    new.out_offset,
                    new.transition_type,
                )
                continue
            assert old.source_range == new.source_range and old.metadata == new.metadata
            assert [(m.name, m.marked_range) for m in old.markers] == [
                (m.name, m.marked_range) for m in new.markers
            ]
    clips = {(c.where.track_index, c.where.item_index): c for c in plan.clips}
    for t, (old_track, new_track) in enumerate(zip(items(before), items(back), strict=True)):
        for i, (old, new) in enumerate(zip(old_track, new_track, strict=True)):
            if not isinstance(old, otio.schema.Clip) or isinstance(
                old.media_reference, otio.schema.GeneratorReference
            ):
                continue
            shot = clips.get((t, i))
            if shot is None:  # offline, missing, speed effect: untouched
                assert new.media_reference.to_json_string() == old.media_reference.to_json_string(), new.name
                continue
            ref = new.media_reference
            assert ref.metadata["recast"] == {"shot": shot.shot, "source": shot.media.url}
            start = new.source_range.start_time
            if shot.media.sequence:
                # The output sequence, same numbering: the clip's first frame is the same frame number.
                assert isinstance(ref, otio.schema.ImageSequenceReference)
                folder, name = outputs[shot.shot].rsplit("/", 1)
                assert (ref.target_url_base, ref.name_prefix + "####" + ref.name_suffix) == (
                    folder + "/",
                    name,
                )
                assert ref.frame_for_time(start) == shot.media.first
                assert ref.start_frame == shot.media.available[0] and ref.frame_zero_padding == 4
            else:
                # The movie output holds frames 22-67 (30-59 and 8 handles each side): the clip still
                # starts 1 s into the source, 8 frames into the output.
                assert isinstance(ref, otio.schema.ExternalReference)
                assert ref.target_url == outputs["mov30"]
                assert ref.available_range.duration == RT(46, 30)
                assert (start - ref.available_range.start_time).rescaled_to(30).value == pytest.approx(8)
    # The written file is the relinked cut as a whole: the V2 use of sc010 points at sc010's output.
    v2 = next(iter(back.tracks[1].find_clips()))
    assert v2.media_reference.target_url_base.rstrip("/") == outputs["sc010"].rsplit("/", 1)[0]


def test_an_edl_cut_is_written_back_with_the_outputs(media: Media, tmp_path) -> None:
    plan, outputs, _ = planned(media, tmp_path, timeline_url=str(tmp_path / "back.edl"))
    one_track = EditPlan(
        edit=plan.edit,
        timeline_json=_first_track_only(plan.timeline_json),
        clips=tuple(c for c in plan.clips if c.where.track_index == 0),
        skipped=plan.skipped,
        timeline_url=plan.timeline_url,
    )
    write_timeline(one_track, outputs, include_handles=True, overwrite=False)
    text = (tmp_path / "back.edl").read_text()
    assert f"FROM CLIP: {outputs['mov30']}" in text
    # Sequences as the adapter writes them: the output's frames of the event (the dissolve takes 2).
    assert f"FROM CLIP: {outputs['sc010'].replace('####', '[1005-1012]')}" in text, text
    assert f"FROM CLIP: {outputs['sc010_2'].replace('####', '[1015-1018]')}" in text, text
    back = otio.adapters.read_from_string(text, adapter_name="cmx_3600")
    assert [c.name for c in back.find_clips()][:4] == ["sc010", "sc010", "grade dpx", "mov30"]


def _first_track_only(timeline_json: str) -> str:
    cut = otio.schema.Timeline.from_json_string(timeline_json)
    del cut.tracks[1:]
    nested = [i for i, item in enumerate(cut.tracks[0]) if isinstance(item, otio.schema.Stack)]
    for i in reversed(nested):  # the EDL adapter writes no nested stack
        del cut.tracks[0][i]
    return str(cut.to_json_string())
