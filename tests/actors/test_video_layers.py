"""A video's matte and face passes as a render actor writes them: scene-linear EXR frames.

Real decoded frames of a BT.709 H.264 clip (and of a 10-bit one), a face region changed the
way the renderer changes it (blended in the video's own values by a soft matte), the frames
written by :class:`actors.segments.VideoLayers` to real EXR files and read back with OIIO.
The reference linearisation is the OCIO config's own named spaces, not the code under test.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import OpenImageIO as oiio
import PyOpenColorIO as ocio
import pytest

from actors.results import VideoLayersPlan
from actors.segments import PassLayers
from jobs.demo_media import make_face_clip
from pipeline.colour import ColourTags
from pipeline.passes.video import VideoPassConverter
from pipeline.plates.colour import CHROMATICITIES
from pipeline.plates.probe import timecode_of
from pipeline.video.decode import decode_range
from pipeline.video.probe import probe
from pipeline.video.timecode import smpte_packed

AP1 = CHROMATICITIES["lin_ap1_scene"]
CONFIG = "ocio://default"


def _read(path: str) -> tuple[np.ndarray, oiio.ImageSpec]:
    image = oiio.ImageInput.open(path)
    assert image is not None, oiio.geterror()
    spec = oiio.ImageSpec(image.spec())
    pixels = np.asarray(image.read_image(0, 0, 0, spec.nchannels, "float"))
    image.close()
    return pixels.reshape(spec.height, spec.width, spec.nchannels), spec


def _reference(config: ocio.Config, space: str, codes: np.ndarray) -> np.ndarray:
    values = np.ascontiguousarray(codes / float(np.iinfo(codes.dtype).max), np.float32)
    config.getProcessor(space, "ACEScg").getDefaultCPUProcessor().applyRGB(values)
    return values


def _rendered(rgb: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A changed face and the soft matte that blended it, in the video's own code values."""
    h, w = rgb.shape[:2]
    yy, xx = np.mgrid[0:h, 0:w]
    r = np.hypot((yy - h / 2) / (h / 4), (xx - w / 2 - n) / (w / 5))
    matte = np.clip(1.5 - r, 0.0, 1.0).astype(np.float32)  # 1 inside, a soft edge, 0 outside
    top = float(np.iinfo(rgb.dtype).max)
    face = np.clip(rgb.astype(np.float32) * 0.6 + top * 0.3, 0, top)
    out = rgb * (1 - matte[..., None]) + face * matte[..., None]
    return np.rint(out).astype(rgb.dtype), matte


@pytest.mark.parametrize("deep", [False, True], ids=["8-bit", "10-bit"])
def test_video_face_pass_is_scene_linear_and_composites_to_the_output(tmp_path, deep: bool) -> None:
    clip = make_face_clip(
        str(tmp_path / "plate.mp4"), seconds=1.5, width=192, height=108, audio=False, timecode="01:00:59:20"
    )
    if deep:  # re-encoded 10-bit: the decoder gives 16-bit codes
        import av

        deep_clip = str(tmp_path / "plate10.mov")
        with av.open(clip) as src, av.open(deep_clip, "w") as dst:
            stream = dst.add_stream("prores_ks", rate=24, options={"profile": "3"})
            stream.width, stream.height, stream.pix_fmt = 192, 108, "yuv422p10le"
            stream.metadata["timecode"] = "01:00:59:20"
            for frame in src.decode(video=0):
                for packet in stream.encode(frame.reformat(format="yuv422p10le")):
                    dst.mux(packet)
            for packet in stream.encode():
                dst.mux(packet)
        clip = deep_clip
    info = probe(clip)
    urls = {name: str(tmp_path / "out" / f"sc_{name}.####.exr") for name in ("matte", "face")}
    plan = VideoLayersPlan(urls=urls, config=CONFIG, delivered=(4, 30))  # frames 4-29 delivered
    layers = PassLayers().layers(info, plan, 2)
    frames = list(decode_range(clip, info, 0, 36))
    assert frames[0].rgb.dtype == (np.uint16 if deep else np.uint8)
    rendered = [_rendered(f.rgb, f.index) for f in frames]
    for frame, (out, matte) in zip(frames, rendered, strict=True):
        layers.write(frame, out, matte)
    written = layers.finish()
    layers.close()
    assert [f.number for f in written["face"].frames] == list(range(4, 30))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        f"sc_{name}.{n:04d}.exr" for name in ("matte", "face") for n in range(4, 30)
    )
    config = ocio.Config.CreateFromFile(CONFIG)
    worst = 0.0
    for frame, (out, matte) in zip(frames[4:30], rendered[4:30], strict=True):
        n = frame.index
        face, face_spec = _read(urls["face"].replace("####", f"{n:04d}"))
        alpha, matte_spec = _read(urls["matte"].replace("####", f"{n:04d}"))
        # The BT.709 video read as the config's Gamma 2.4 Encoded Rec.709, made ACEScg.
        plate_lin = _reference(config, "Gamma 2.4 Encoded Rec.709", frame.rgb)
        out_lin = _reference(config, "Gamma 2.4 Encoded Rec.709", out)
        composite = face[..., :3] + plate_lin * (1 - alpha)
        error = np.abs(composite - out_lin)
        assert (error <= 2.0**-10 * np.maximum(1.0, np.abs(out_lin))).all(), error.max()  # half precision
        worst = max(worst, float(error.max()))
        assert np.abs(alpha[..., 0] - matte).max() <= 2.0**-11
        assert np.abs(face[..., 3] - alpha[..., 0]).max() == 0.0
        # Tagged: ACEScg with AP1 chromaticities; both at the video's rate and this frame's timecode.
        assert face_spec.getattribute("colorspace") == "ACEScg"
        assert np.allclose(face_spec.getattribute("chromaticities"), AP1)
        assert matte_spec.getattribute("colorspace") is None and matte_spec.nchannels == 1
        seconds, ff = divmod(20 + n, 24)
        minutes, seconds = divmod(59 + seconds, 60)
        for spec in (face_spec, matte_spec):
            assert tuple(spec.getattribute("FramesPerSecond")) == (24, 1)
            assert timecode_of(spec) == f"01:{minutes:02d}:{seconds:02d}:{ff:02d}"
        assert face_spec.format == oiio.HALF and face_spec.getattribute("compression") == "zip"
    print(f"FIGURE video face pass composite error, max over 26 frames: {worst:.2e}")


@pytest.mark.parametrize(
    ("tags", "space"),
    [
        (("bt709", "bt709"), "Gamma 2.4 Encoded Rec.709"),
        (("unknown", "unknown"), "Gamma 2.4 Encoded Rec.709"),  # untagged video is read as BT.709
        (("bt709", "iec61966-2-1"), "sRGB Encoded Rec.709 (sRGB)"),
        (("bt709", "gamma22"), "Gamma 2.2 Encoded Rec.709"),
        (("bt709", "linear"), "Linear Rec.709 (sRGB)"),
        (("smpte432", "iec61966-2-1"), "sRGB Encoded P3-D65"),
    ],
)
def test_video_transfer_and_primaries_follow_the_configs_spaces(tags, space) -> None:
    codes = np.arange(0, 65536, 257, dtype=np.uint16).reshape(-1, 1, 1).repeat(3, axis=2)
    codes[:, 0, 1] = codes[::-1, 0, 1]
    converter = VideoPassConverter(CONFIG, ColourTags(tags[0], tags[1], "bt709", "tv"), Fraction(25))
    expected = _reference(ocio.Config.CreateFromFile(CONFIG), space, codes)
    assert converter.space == "ACEScg" and converter.header.frame_rate == Fraction(25)
    assert np.allclose(converter.to_pass(codes), expected, atol=1e-6)


def test_bt2020_and_a_config_without_scene_linear(tmp_path) -> None:
    codes = np.array([[[0, 32768, 65535]]], np.uint16)
    config = ocio.Config.CreateFromFile(CONFIG)
    # BT.2020 primaries, BT.1886 gamma: linear Rec.2020 made ACEScg.
    expected = (codes / 65535.0).astype(np.float32) ** 2.4
    config.getProcessor("Linear Rec.2020", "ACEScg").getDefaultCPUProcessor().applyRGB(expected)
    got = VideoPassConverter(CONFIG, ColourTags("bt2020", "bt2020-10", "bt2020nc", "tv"), None).to_pass(codes)
    assert np.allclose(got, expected, atol=1e-4)  # OCIO's fast pow against numpy's
    # A studio config with no scene_linear role: linear in the video's own primaries, tagged by interop ID.
    bare = ocio.Config.CreateRaw()
    path = tmp_path / "raw.ocio"
    path.write_text(bare.serialize())
    fallback = VideoPassConverter(str(path), ColourTags("bt709", "bt709", "bt709", "tv"), Fraction(24))
    assert fallback.space == "lin_rec709_scene"
    assert fallback.header.chromaticities == CHROMATICITIES["lin_rec709_scene"]
    assert np.allclose(fallback.to_pass(codes), (codes / 65535.0) ** 2.4, atol=1e-4)  # OCIO's fast pow


def test_smpte_timecode_words() -> None:
    assert smpte_packed("01:00:59:20") == 0x01005920
    assert smpte_packed("23:59:59;29") == 0x23595929 | 0x40  # drop-frame flag in the frames byte
    with pytest.raises(ValueError, match="not HH:MM:SS:FF"):
        smpte_packed("1:00")
