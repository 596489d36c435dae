"""Compositing passes through the whole job: the face layer over the plate with the matte gives the output.

On a BT.709 video shot (ProRes 4444 output, scene-linear EXR passes) and on EXR and DPX
sequences, with two actors and several chunks; the tracks pass's JSON lines and Nuke .chan files; and a
resubmitted job re-renders no pass of a finished chunk.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import OpenImageIO as oiio
import PyOpenColorIO as ocio
import pytest

from cluster.driver import run_job
from cluster.spec.job import parse_spec
from jobs.demo_media import make_face_clip, write_source_image
from pipeline.plates.colour import CHROMATICITIES
from pipeline.plates.probe import timecode_of
from pipeline.video.decode import decode_range
from pipeline.video.probe import probe
from tests.plates import scene_linear, write_sequence

AP1 = CHROMATICITIES["lin_ap1_scene"]

pytestmark = pytest.mark.ray


def _job(source: str, url: str, out: str, **output) -> dict:
    return {
        "job_id": "passes",
        "shots": [{"name": "sc050", "url": url}],
        "identities": {"hero": {"images": [source], "face_index": 1}},
        "output": {"url": out, "passes": ["matte", "face", "tracks"], **output},
        "chunking": {"seconds": 1, "min_seconds": 1, "snap_to_keyframes": False},
        "resources": {"cpus_per_actor": 0.5, "max_actors": 2},
        "faces": {"batch_size": 4},
    }


def _decode(path: str) -> list[np.ndarray]:
    """Frames as the pipeline decodes them (the file's own matrix and range), 16-bit, with alpha if any."""
    info = probe(path)
    frames = []
    for frame in decode_range(path, info, 0, info.frame_count):
        rgb = frame.rgb.astype(np.float64) * (257.0 if frame.rgb.dtype == np.uint8 else 1.0)
        if frame.alpha is not None:
            alpha = frame.alpha.astype(np.float64) * (257.0 if frame.alpha.dtype == np.uint8 else 1.0)
            rgb = np.concatenate([rgb, alpha[..., None]], axis=-1)
        frames.append(rgb)
    return frames


def _sha(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_video_passes_composite_to_the_output(ray_local, tmp_path) -> None:
    """A BT.709 video: the face pass is scene-linear (ACEScg) EXR frames numbered from 0, and the plate
    made linear (the config's own ``Gamma 2.4 Encoded Rec.709``), ``face + plate * (1 - matte)`` is
    the output made linear, within the output codec's own error."""
    clip = make_face_clip(str(tmp_path / "plate.mov"), seconds=2, width=320, height=180, gop=24, audio=False)
    source = write_source_image(str(tmp_path / "source.jpg"))
    out_dir = tmp_path / "out"
    out = str(out_dir / "sc050.mov")
    summary = run_job(parse_spec(_job(source, clip, out, codec="prores_4444xq")))
    assert summary.ok, summary.table()
    config = ocio.Config.CreateFromFile("ocio://default")
    linear = config.getProcessor("Gamma 2.4 Encoded Rec.709", "ACEScg").getDefaultCPUProcessor()

    def linearised(frames: list[np.ndarray]) -> list[np.ndarray]:
        out = []
        for f in frames:
            values = np.ascontiguousarray(f[..., :3] / 65535, np.float32)
            linear.applyRGB(values)
            out.append(values)
        return out

    plate, output = linearised(_decode(clip)), linearised(_decode(out))
    assert len(plate) == len(output) == 48
    assert [p.name for p in out_dir.glob("*.mov")] == ["sc050.mov"]  # the passes are frames, not movies
    covered = 0
    stats: list[tuple[float, ...]] = []
    for n, (p, o) in enumerate(zip(plate, output, strict=True)):
        matte_url, face_url = (str(out_dir / f"sc050_{name}.{n:04d}.exr") for name in ("matte", "face"))
        matte, face = _read(matte_url), _read(face_url)
        assert matte.shape[-1] == 1 and face.shape[-1] == 4
        face_spec, matte_spec = oiio.ImageBuf(face_url).spec(), oiio.ImageBuf(matte_url).spec()
        assert face_spec.getattribute("colorspace") == "ACEScg"
        assert np.allclose(face_spec.getattribute("chromaticities"), AP1)
        for spec in (face_spec, matte_spec):
            assert tuple(spec.getattribute("FramesPerSecond")) == (24, 1)
            assert timecode_of(spec) == f"01:00:{n // 24:02d}:{n % 24:02d}"
        a = matte[..., :1]
        assert np.abs(face[..., 3:4] - a).max() < 1e-3  # premultiplied by the matte it carries
        composite = face[..., :3] + p * (1 - a)
        error = np.abs(composite - o)
        # The output is ProRes (lossy): the composite matches it within the codec's own error, measured
        # where no face is (there the output should be the plate, and differs by just that).
        codec = np.abs(o - p)[(a[..., 0] == 0)]
        stats.append((error.mean(), np.percentile(error, 99), codec.mean(), np.percentile(codec, 99)))
        assert error.mean() <= codec.mean() + 1e-3, stats[-1]
        assert np.percentile(error, 99) <= np.percentile(codec, 99) + 4e-3, stats[-1]
        covered += bool((a > 0.99).sum() > 100)
    assert covered >= 40, f"the matte covers a face in only {covered}/48 frames"
    print(
        "FIGURE composite error (linear) mean, p99; codec error mean, p99:",
        np.mean(stats, axis=0).round(5),
    )
    tracks = [
        json.loads(line) for line in Path(tmp_path / "out" / "sc050_tracks.jsonl").read_text().splitlines()
    ]
    assert {r["frame"] for r in tracks} == set(range(48)) and all(r["identity"] == "hero" for r in tracks)
    chans = sorted(Path(tmp_path / "out").glob("sc050_tracks.track*.chan"))
    assert chans
    rows = [line.split() for line in chans[0].read_text().splitlines()]
    assert len(rows) >= 40 and all(len(r) == 10 for r in rows)


def test_video_passes_of_delivered_frames_and_resume(ray_local, tmp_path) -> None:
    """Part of a video delivered (``frames: 10-37``, two frames of handles analysed, not delivered): pass
    frames 10-37 only; a
    resubmitted job renders nothing again; a pass frame lost after the publish has its chunk rendered
    again and the set is whole once more."""
    clip = make_face_clip(str(tmp_path / "plate.mp4"), seconds=2, width=320, height=180, gop=24, audio=False)
    source = write_source_image(str(tmp_path / "source.jpg"))
    out_dir = tmp_path / "out"
    spec = _job(
        source,
        clip,
        str(out_dir / "sc050.mp4"),
        passes=["matte", "face"],
        include_handles=False,
        if_exists="overwrite",
    )
    spec["shots"][0].update(frames="10-37", handles=2)
    summary = run_job(parse_spec(spec))
    assert summary.ok, summary.table()
    names = sorted(p.name for p in out_dir.iterdir() if p.is_file())
    assert names == sorted(
        ["sc050.mp4", *(f"sc050_{pass_}.{n:04d}.exr" for pass_ in ("face", "matte") for n in range(10, 38))]
    )
    assert probe(str(out_dir / "sc050.mp4")).frame_count == 28
    hashes = {name: _sha(str(out_dir / name)) for name in names}
    # Resubmitted: the shot is found published, nothing is rendered or written again.
    again = run_job(parse_spec(spec))
    assert again.ok and again.shots[0].chunks_rendered == 0, again.table()
    assert {name: _sha(str(out_dir / name)) for name in names} == hashes
    # A pass frame removed after the publish: that chunk is rendered again, the set is whole again.
    (out_dir / "sc050_face.0020.exr").unlink()
    third = run_job(parse_spec(spec))
    assert third.ok and third.shots[0].chunks_rendered == 1, third.table()
    assert sorted(p.name for p in out_dir.iterdir() if p.is_file()) == names


@pytest.mark.parametrize("fmt", ["exr", "dpx"])
def test_sequence_passes_and_resume(fmt: str, ray_local, tmp_path) -> None:
    """An ACEScg EXR plate, and a 10-bit ACEScct DPX plate whose face pass is written in ACEScg: the
    plate made scene-linear, ``face + plate * (1 - matte)`` is the output made scene-linear."""
    space = {"exr": "ACEScg", "dpx": "ACEScct"}[fmt]
    pixel = {"exr": "half", "dpx": "uint10"}[fmt]
    plate = write_sequence(
        tmp_path / "plates",
        "sc050_plate",
        fmt=fmt,
        pixel=pixel,
        colour_space=space,
        count=48,
        size=(480, 270),
    )
    source = write_source_image(str(tmp_path / "source.jpg"))
    out_dir = tmp_path / "out"
    out = str(out_dir / f"sc050.####.{plate.rpartition('.')[2]}")
    spec = {**_job(source, plate, out), "colour": {"plate": space}}
    summary = run_job(parse_spec(spec))
    assert summary.ok, summary.table()
    covered = 0
    for number in range(1001, 1049):
        src = scene_linear(_read(plate.replace("####", f"{number:04d}"))[..., :3], space)
        dst = scene_linear(_read(out.replace("####", f"{number:04d}"))[..., :3], space)
        matte = _read(str(out_dir / f"sc050_matte.{number:04d}.exr"))
        face_url = str(out_dir / f"sc050_face.{number:04d}.exr")
        face = _read(face_url)
        assert matte.shape[-1] == 1 and face.shape[-1] == 4
        assert oiio.ImageBuf(face_url).spec().getattribute("colorspace") == "ACEScg"
        a = matte[..., :1]
        composite = face[..., :3] + src * (1 - a)
        tolerance = 2e-3 * np.maximum(1.0, np.abs(dst))
        assert (np.abs(composite - dst) <= tolerance).all(), np.abs(composite - dst).max()
        covered += bool((a > 0.99).sum() > 100)
    assert covered >= 40, covered
    passes = sorted(p.name for p in out_dir.iterdir() if p.is_file())
    hashes = {name: _sha(str(out_dir / name)) for name in passes}
    # Resubmitted after its shot record is lost: no chunk (so no pass) is rendered again.
    (out_dir / ".recast-work" / "passes" / "manifest" / "sc050" / "shot.json").unlink()
    again = run_job(parse_spec(spec))
    assert again.ok and again.shots[0].chunks_rendered == 0 and again.shots[0].chunks_reused == 2
    # Every frame the same bytes; the sequence's signed sidecar is made again (a fresh signature) and
    # still binds those frames.
    sidecars = [name for name in passes if name.endswith(".credentials.json")]
    assert sidecars == ["sc050.credentials.json"], passes
    assert {n: _sha(str(out_dir / n)) for n in passes if n not in sidecars} == {
        n: h for n, h in hashes.items() if n not in sidecars
    }
    from pipeline.provenance.sidecar import verify_sidecar_url

    assert verify_sidecar_url(str(out_dir / sidecars[0]))[1].status == "valid"


def _read(path: str) -> np.ndarray:
    """The frame's pixels as floats (a DPX's integer codes scaled to 0-1 by OIIO, as the pipeline does)."""
    image = oiio.ImageInput.open(path)
    assert image is not None, oiio.geterror()
    spec = image.spec()
    pixels = image.read_image(0, 0, 0, spec.nchannels, "float")
    image.close()
    return np.asarray(pixels).reshape(spec.height, spec.width, spec.nchannels)
