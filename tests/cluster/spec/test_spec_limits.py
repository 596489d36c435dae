"""Bounded job specs: file size and type, the ``limits:`` block, shots per job, chunk range,
``faces.batch_size`` and ``models.cache_dir`` (under the cache root, after resolving links)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from cluster.spec.job import load_spec, parse_spec
from cluster.spec.shot_refs import expand_shots
from pipeline.errors import SpecError
from pipeline.provenance.policy import load_policy


def base() -> dict:
    return {
        "job_id": "ep1",
        "shots": [{"name": "a", "url": "/data/a.mp4"}],
        "identities": {"hero": {"images": ["/refs/hero.jpg"]}},
        "output": {"url": "/out/{shot}.mp4"},
    }


def field_error(data: dict) -> SpecError:
    with pytest.raises(SpecError) as err:
        parse_spec(data)
    return err.value


def test_spec_file_over_1_mib_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(base()) + "# " + "x" * (1 << 20) + "\n")
    with pytest.raises(SpecError) as err:
        load_spec(str(path))
    assert err.value.field == str(path) and "larger than 1 MiB" in err.value.reason


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "folder"])
def test_spec_that_is_not_a_regular_file_is_refused_unread(tmp_path: Path, kind: str) -> None:
    path = {"fifo": tmp_path / "job.yaml", "/dev/zero": Path("/dev/zero"), "folder": tmp_path / "d.yaml"}[
        kind
    ]
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    with pytest.raises(SpecError) as err:
        load_spec(str(path))
    assert err.value.field == str(path) and "expected a regular file" in err.value.reason


@pytest.mark.timeout(30)
def test_policy_file_bounded_and_regular(tmp_path: Path) -> None:
    big = tmp_path / "policy.yaml"
    big.write_text("version: 1\n# " + "x" * (1 << 20) + "\n")
    with pytest.raises(SpecError, match="larger than 1 MiB"):
        load_policy(str(big))
    fifo = tmp_path / "fifo-policy.yaml"
    os.mkfifo(fifo)
    with pytest.raises(SpecError, match="is a FIFO"):
        load_policy(str(fifo))


@pytest.mark.parametrize(
    ("limits", "field"),
    [
        ({"max_width": 0}, "limits.max_width"),
        ({"max_pixels": 1 << 40}, "limits.max_pixels"),
        ({"max_shots": 0}, "limits.max_shots"),
        ({"max_image_pixels": 10**9}, "limits.max_image_pixels"),
        ({"max_image_bytes": -1}, "limits.max_image_bytes"),
        ({"max_frames": 3}, "limits.max_frames"),
    ],
)
def test_limits_are_validated(limits: dict, field: str) -> None:
    assert field_error({**base(), "limits": limits}).field == field


def test_faces_batch_size_is_bounded() -> None:
    err = field_error({**base(), "faces": {"batch_size": 1000}})
    assert err.field == "faces.batch_size" and "256" in err.reason
    assert parse_spec({**base(), "faces": {"batch_size": 256}}).faces.batch_size == 256


def test_chunk_range_cannot_be_widened(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RECAST_MIN_CHUNK_SECONDS", raising=False)
    err = field_error({**base(), "chunking": {"seconds": 2, "min_seconds": 1}})
    assert err.field == "chunking.min_seconds" and "at least 10" in err.reason
    err = field_error({**base(), "chunking": {"seconds": 60, "max_seconds": 120}})
    assert err.field == "chunking.max_seconds" and "30" in err.reason
    # Narrowing is fine; the cluster (or the test suite) may lower the floor, a spec may not.
    assert parse_spec({**base(), "chunking": {"seconds": 15, "min_seconds": 12, "max_seconds": 20}})
    monkeypatch.setenv("RECAST_MIN_CHUNK_SECONDS", "1")
    assert parse_spec({**base(), "chunking": {"seconds": 1, "min_seconds": 1}}).chunking.seconds == 1


def test_cache_dir_must_lie_under_the_cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "root"
    (root / "packs").mkdir(parents=True)
    monkeypatch.setenv("RECAST_CACHE_DIR", str(root))
    assert parse_spec({**base(), "models": {"cache_dir": str(root / "packs")}}).models.cache_dir
    assert parse_spec({**base(), "models": {"cache_dir": str(root / "new" / "sub")}})
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (root / "escape").symlink_to(outside)  # a link inside the root that leads out of it
    for bad in (str(outside), str(root / ".." / "elsewhere"), str(root / "escape"), "/etc", "s3://b/cache"):
        err = field_error({**base(), "models": {"cache_dir": bad}})
        assert err.field == "models.cache_dir", (bad, str(err))
    assert "outside the cache root" in field_error({**base(), "models": {"cache_dir": "/etc"}}).reason


def test_pattern_expansion_is_bounded(tmp_path: Path) -> None:
    for i in range(12):
        (tmp_path / f"sc{i:02d}.mp4").write_bytes(b"x")
    data = {**base(), "shots": [{"pattern": str(tmp_path / "*.mp4")}], "limits": {"max_shots": 10}}
    with pytest.raises(SpecError) as err:
        expand_shots(parse_spec(data))
    assert err.value.field == "shots[0].pattern" and "more than 10 shots" in err.value.reason
    assert "limits.max_shots" in err.value.reason
    data["limits"] = {"max_shots": 12}
    assert len(expand_shots(parse_spec(data))) == 12
    # Listed shots count too: a url shot plus a pattern over the limit.
    data["shots"] = [{"name": "first", "url": "/data/a.mp4"}, {"pattern": str(tmp_path / "*.mp4")}]
    with pytest.raises(SpecError) as err:
        expand_shots(parse_spec(data))
    assert err.value.field == "shots[1].pattern" and "more than 12" in err.value.reason


def test_listed_shots_are_bounded() -> None:
    data = {**base(), "shots": [{"url": f"/data/s{i}.mp4"} for i in range(6)], "limits": {"max_shots": 5}}
    with pytest.raises(SpecError) as err:
        expand_shots(parse_spec(data))
    assert err.value.field == "shots" and "more than 5 shots" in err.value.reason


def test_default_shot_limit_is_ten_thousand() -> None:
    assert parse_spec(base()).limits.max_shots == 10_000


@pytest.mark.parametrize(
    ("frames", "said"),
    [
        ("1-99999999999", "frame numbers must lie between -1,000,000,000 and 1,000,000,000"),
        ([0, 10**12], "frame numbers must lie between"),
        ("9" * 5000, "is not a frame range like 1009-1092 (numbers of at most 12 digits)"),
    ],
)
def test_a_shots_frames_are_bounded(frames, said) -> None:
    """Issue 41: a frame number past +-10^9 (or of thousands of digits) is refused naming the field,
    without echoing thousands of digits."""
    data = {
        "job_id": "frames",
        "shots": [{"name": "a", "url": "/tmp/a.mov", "frames": frames}],
        "identities": {"hero": {"images": ["/tmp/hero.jpg"]}},
        "output": {"url": "/tmp/out/{shot}.mov"},
    }
    with pytest.raises(SpecError) as err:
        parse_spec(data)
    assert err.value.field.startswith("shots[0].frames") and said in err.value.reason
    assert len(str(err.value)) < 400
