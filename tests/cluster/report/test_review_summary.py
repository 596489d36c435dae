"""A shot's review media in summary.json: listed when written, absent (the format unchanged) otherwise."""

from __future__ import annotations

from cluster.report.summary import ReviewOutputs, ShotSummary


def test_review_outputs_are_serialised_only_when_set() -> None:
    shot = ShotSummary("sh010", "/in/a.mp4", "/out/sh010.mp4", status="published")
    assert "review" not in shot.to_dict()
    shot.review = ReviewOutputs("/r/sh010.mp4", "/r/sh010_contact.png", frames=24, flagged_frames=5)
    assert shot.to_dict()["review"] == {
        "movie_url": "/r/sh010.mp4",
        "contact_url": "/r/sh010_contact.png",
        "frames": 24,
        "flagged_frames": 5,
    }
