"""The benchmark's analysis row: actor time against its parts, recognizer calls per mode."""

from __future__ import annotations

from bench.analysis_pass.analysis import PARTS, analysis_table, measure_analysis
from jobs.demo_media import make_face_clip


def test_analysis_row_has_breakdown_ratio_and_calls_saved(tmp_path) -> None:
    clip = make_face_clip(str(tmp_path / "plate.mp4"), seconds=1.0, width=240, height=160, gop=12)
    row = measure_analysis(clip, "builtin:default", frames=20)
    assert row["frames"] == 20
    every, track = row["every_frame"], row["track"]
    assert every["faces"] == track["faces"] == 20  # one face per frame, found in both modes
    assert every["embedded"] == 20 and track["embedded"] == 3  # frames 0, 8, 16
    assert row["recognizer_calls_saved"] == 17
    for mode in (every, track):
        assert set(mode["breakdown"]) == set(PARTS)
        assert mode["ratio"] > 0 and mode["parts_seconds"] > 0
    assert set(row["alone"]) == {"decode", "detector", "recognizer"}
    sized = row["detect_size"]  # the embedded YuNet on a 4K large face: 640 x 640 against auto's choice
    assert sized["frame"] == "3840x2160" and sized["full"] == "640x640" and sized["face_px"] > 700
    width, height = (int(v) for v in sized["reduced"].split("x"))
    assert 160 <= width == height <= 320 and sized["rewritten"] is True
    assert sized["at_reduced"]["model_ms_per_frame"] < sized["at_full"]["model_ms_per_frame"]
    assert sized["speedup"] > 1 and sized["model_speedup"] > 1
    text = analysis_table([{"label": "default 240p", **row}, {"label": "broken", "error": "boom"}])
    assert "every_frame" in text and "track" in text and "broken" in text and "target <= 1.2" in text
    # The render of the analysed chunk: from the kept pictures (one decode a frame), then decoding again.
    reuse = row["reuse"]
    assert reuse["cache"]["decode_calls_per_frame"] == 1.0 and reuse["cache"]["frames_reused"] == 20
    assert reuse["no_cache"]["decode_calls_per_frame"] == 2.0 and reuse["no_cache"]["frames_reused"] == 0
    assert reuse["identical"] is True
    assert "decode calls/frame 1.0 (no cache 2.0)" in text
    assert "detector, 4K large face" in text and sized["reduced"] in text


def test_decode_options_are_measured_on_the_same_frames(tmp_path) -> None:
    from bench.analysis_pass.decode_options import OPTIONS, measure_decode_options

    clip = make_face_clip(str(tmp_path / "plate.mp4"), seconds=0.5, width=320, height=240, gop=12)
    row = measure_decode_options(clip, frames=6, size=160)
    assert row["frames"] == 6 and row["size"] == "320x240"
    ms = row["ms_per_frame"]
    assert set(ms) == set(OPTIONS) and all(v > 0 for v in ms.values())
    assert ms["rgb"] >= ms["decode"] and ms["rgb_then_letterbox"] >= ms["rgb"]
