"""Contract tests for every role with tiny stand-ins carrying the production I/O:
the right graph is accepted and behaves as the contract says (normalisation,
layout, batching), a wrong one is rejected with a ModelPackError naming it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import skimage.data
from onnx import numpy_helper

from bench.models import standins
from pipeline.errors import FaceError, ModelPackError
from pipeline.geometry.align import estimate_similarity, template_points, warp_crops
from pipeline.geometry.blend import paste_back
from pipeline.geometry.types import Face, Identity
from pipeline.models.arcface import ArcFaceRecognizer
from pipeline.models.contracts import check_model_contract
from pipeline.models.detectors.scrfd import ScrfdDetector
from pipeline.models.gfpgan import GfpganEnhancer
from pipeline.models.inswapper import InSwapper
from pipeline.models.loader import load_face_models
from pipeline.models.pack import ModelEntry, load_pack
from pipeline.models.runtime import make_runner
from pipeline.models.runtime.settings import ExecutionConfig
from pipeline.models.xseg import XsegOccluder

CPU = ExecutionConfig()


def entry(role: str, **contract: object) -> ModelEntry:
    kind, file = standins.PRODUCTION_FILES[role]
    return ModelEntry(
        role=role, kind=kind, file=file, sha256="0" * 64, contract={**standins.CONTRACTS[role], **contract}
    )


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("standins")
    standins.write_pack(str(folder))
    standins.scrfd(str(folder / "scrfd_batched.onnx"), batched=True)
    standins.inswapper(str(folder / "inswapper_batched.onnx"), batched=True)
    return folder


def rewrite(src: Path, dest: Path, edit) -> str:
    model = onnx.load(str(src))
    edit(model)
    onnx.save(model, str(dest))
    return str(dest)


# --------------------------------------------------------------------------- contract checks
@pytest.mark.parametrize("role", ["detector", "recognizer", "swapper", "enhancer", "occluder"])
def test_standins_meet_their_contract(models_dir: Path, role: str) -> None:
    kind, file = standins.PRODUCTION_FILES[role]
    io = check_model_contract(kind, str(models_dir / file), standins.CONTRACTS[role])
    assert io.inputs and io.outputs


def test_scrfd_without_keypoints_is_rejected(models_dir: Path, tmp_path: Path) -> None:
    def drop_kps(model: onnx.ModelProto) -> None:
        del model.graph.output[6:]

    path = rewrite(models_dir / "det_10g.onnx", tmp_path / "det_6.onnx", drop_kps)
    with pytest.raises(ModelPackError, match=r"det_6\.onnx: has 6 outputs .*kind scrfd needs 9"):
        check_model_contract("scrfd", path, {})


def test_arcface_with_wrong_embedding_size_is_rejected(tmp_path: Path) -> None:
    standins.arcface(str(tmp_path / "r128.onnx"), embedding_dim=128)
    with pytest.raises(
        ModelPackError, match=r"output '683' has shape \[\?, 128\], kind arcface needs \[N, 512\]"
    ):
        check_model_contract("arcface", str(tmp_path / "r128.onnx"), {"input_size": [112, 112]})


def test_inswapper_contract_violations(models_dir: Path, tmp_path: Path) -> None:
    standins.inswapper(str(tmp_path / "s256.onnx"), source_dim=256)
    with pytest.raises(
        ModelPackError, match=r"input 'source' has shape \[1, 256\], kind inswapper needs \[N, 512\]"
    ):
        check_model_contract("inswapper", str(tmp_path / "s256.onnx"), {})

    def emap_first(model: onnx.ModelProto) -> None:
        emap = model.graph.initializer.pop()
        model.graph.initializer.insert(0, emap)

    path = rewrite(models_dir / "inswapper_128.onnx", tmp_path / "noemap.onnx", emap_first)
    with pytest.raises(ModelPackError, match=r"noemap\.onnx: last initializer has shape .*512x512 'emap'"):
        check_model_contract("inswapper", path, {})

    def rename_target(model: onnx.ModelProto) -> None:
        model.graph.input[0].name = "img"
        for node in model.graph.node:
            node.input[:] = ["img" if n == "target" else n for n in node.input]

    path = rewrite(models_dir / "inswapper_128.onnx", tmp_path / "img.onnx", rename_target)
    with pytest.raises(ModelPackError, match=r"has no input named 'target'"):
        check_model_contract("inswapper", path, {})


def test_gfpgan_and_xseg_layouts_are_checked(tmp_path: Path) -> None:
    standins.gfpgan(str(tmp_path / "g256.onnx"), input_size=256)
    with pytest.raises(
        ModelPackError,
        match=r"input 'input' has shape \[1, 3, 256, 256\], kind gfpgan needs \[N, 3, 512, 512\]",
    ):
        check_model_contract("gfpgan", str(tmp_path / "g256.onnx"), {"input_size": [512, 512]})
    standins.xseg(str(tmp_path / "nchw.onnx"), channels_last=False)
    with pytest.raises(ModelPackError, match=r"kind xseg needs \[N, 256, 256, 3\]"):
        check_model_contract("xseg", str(tmp_path / "nchw.onnx"), {})


def test_unreadable_model_file(tmp_path: Path) -> None:
    (tmp_path / "junk.onnx").write_bytes(b"\x00not onnx")
    with pytest.raises(ModelPackError, match=r"junk\.onnx: not a readable ONNX model"):
        check_model_contract("arcface", str(tmp_path / "junk.onnx"), {})


# --------------------------------------------------------------------------- detector
def white_square_frame(height: int, width: int, x: int, y: int, side: int) -> np.ndarray:
    frame = np.zeros((height, width, 3), np.uint8)
    frame[y : y + side, x : x + side] = 255
    return frame


def test_scrfd_letterbox_decode_and_landmarks(models_dir: Path) -> None:
    det = ScrfdDetector(make_runner(str(models_dir / "det_10g.onnx"), CPU), entry("detector"))
    # 1280x720 letterboxes into 640x640 at scale 0.5, top-left: the 64 px square lands
    # on exactly one 32 px cell of stride 32, so one face whose box is the square.
    faces = det.detect(white_square_frame(720, 1280, 640, 320, 64))
    assert len(faces) == 1
    face = faces[0]
    np.testing.assert_allclose(face.box, [640, 320, 704, 384], atol=1e-3)
    assert face.score > 0.99 and face.embedding is None
    expected = np.array([640, 320]) + standins.SCRFD_TINY_KPS * 64
    np.testing.assert_allclose(face.landmarks, expected, atol=1e-3)
    lm = face.landmarks
    assert (
        (lm[:, 0] > 640).all()
        and (lm[:, 0] < 704).all()
        and (lm[:, 1] > 320).all()
        and (lm[:, 1] < 384).all()
    )
    assert lm[0, 0] < lm[1, 0] and lm[3, 0] < lm[4, 0]  # left before right
    assert lm[0, 1] < lm[2, 1] < lm[3, 1]  # eyes above nose above mouth
    assert det.detect(np.zeros((480, 640, 3), np.uint8)) == []


def test_scrfd_batched_model_matches_single_frames(models_dir: Path) -> None:
    single = ScrfdDetector(make_runner(str(models_dir / "det_10g.onnx"), CPU), entry("detector"))
    batched = ScrfdDetector(make_runner(str(models_dir / "scrfd_batched.onnx"), CPU), entry("detector"))
    assert batched.batched and not single.batched
    frames = [white_square_frame(640, 640, 64 * i, 96, 32) for i in range(1, 4)] + [
        np.zeros((360, 640, 3), np.uint8)
    ]
    got = batched.detect_batch(frames)
    want = single.detect_batch(frames)
    assert [len(f) for f in got] == [1, 1, 1, 0]
    for a, b in zip(got, want, strict=True):
        for fa, fb in zip(a, b, strict=True):
            np.testing.assert_allclose(fa.box, fb.box)
            np.testing.assert_allclose(fa.landmarks, fb.landmarks)


@pytest.mark.parametrize("shape", [(720, 1280), (800, 600)])
def test_scrfd_decoding_matches_insightface(tmp_path: Path, shape: tuple[int, int]) -> None:
    """Letterbox, anchor decoding and NMS agree with insightface's own SCRFD class."""
    from insightface.model_zoo.scrfd import SCRFD

    path = str(tmp_path / "det_overlap.onnx")
    # 3x3-cell boxes: neighbouring detections overlap (IoU 0.5) and NMS has work to do.
    standins.scrfd(path, score_gain=4.0, box=(1.0, 1.0, 2.0, 2.0))
    rng = np.random.default_rng(shape[0])
    frame = np.zeros((*shape, 3), np.uint8)
    for _ in range(12):
        x, y, side = rng.integers(0, shape[1] - 200), rng.integers(0, shape[0] - 200), rng.integers(40, 200)
        frame[y : y + side, x : x + side] = rng.integers(190, 256, (side, side, 3))  # no score ties
    ours = ScrfdDetector(make_runner(path, CPU), entry("detector")).detect(frame)
    ref = SCRFD(model_file=path)
    ref_det, ref_kps = ref.detect(
        np.ascontiguousarray(frame[..., ::-1]), input_size=(640, 640)
    )  # it takes BGR
    assert len(ours) == len(ref_det) >= 3
    np.testing.assert_allclose([f.box for f in ours], ref_det[:, :4], atol=1e-2)
    np.testing.assert_allclose([f.score for f in ours], ref_det[:, 4], atol=1e-5)
    np.testing.assert_allclose([f.landmarks for f in ours], ref_kps, atol=1e-2)


def test_scrfd_rejects_non_uint8(models_dir: Path) -> None:
    det = ScrfdDetector(make_runner(str(models_dir / "det_10g.onnx"), CPU), entry("detector"))
    with pytest.raises(ValueError, match="RGB uint8"):
        det.detect(np.zeros((64, 64, 3), np.uint16))


# --------------------------------------------------------------------------- recognizer
def test_arcface_normalisation_alignment_and_batching(models_dir: Path) -> None:
    path = str(models_dir / "w600k_r50.onnx")
    rec = ArcFaceRecognizer(make_runner(path, CPU), entry("recognizer"))
    assert rec.dim == 512
    rng = np.random.default_rng(3)
    image = rng.integers(0, 256, (112, 112, 3), dtype=np.uint8)
    # Landmarks on the template: the aligned crop is the image itself.
    faces = [
        Face(
            box=np.array([0, 0, 112, 112], np.float32),
            landmarks=template_points(112).astype(np.float32),
            score=1.0,
        )
    ]
    got = rec.embed(image, faces * 3)
    # The stand-in is AveragePool(8) -> Flatten -> Gemm: recompute it in numpy from its weights.
    inits = {i.name: numpy_helper.to_array(i) for i in onnx.load(path).graph.initializer}
    weight = next(v for v in inits.values() if v.shape == (3 * 14 * 14, 512))
    bias = next(v for k, v in inits.items() if v.shape == (512,) and k != "emap")
    x = ((image.astype(np.float64) - 127.5) / 127.5).transpose(2, 0, 1)
    pooled = x.reshape(3, 14, 8, 14, 8).mean(axis=(2, 4)).reshape(-1)
    want = pooled @ weight + bias
    want /= np.linalg.norm(want)
    assert got.shape == (3, 512) and got.dtype == np.float32
    np.testing.assert_allclose(got, np.tile(want, (3, 1)), atol=2e-5)
    assert rec.embed(image, []).shape == (0, 512)


# --------------------------------------------------------------------------- swapper
def test_inswapper_latent_and_identity_like_swap(models_dir: Path) -> None:
    path = str(models_dir / "inswapper_128.onnx")
    swapper = InSwapper(make_runner(path, CPU), entry("swapper"))
    assert swapper.crop_size == 128 and swapper.template == "arcface"
    emap = numpy_helper.to_array(onnx.load(path).graph.initializer[-1])
    rng = np.random.default_rng(4)
    emb = rng.standard_normal(512).astype(np.float32)
    ident = Identity(
        name="alice",
        embedding=emb / np.linalg.norm(emb),
        source_rgb=np.zeros((8, 8, 3), np.uint8),
        source_landmarks=np.zeros((5, 2), np.float32),
        source_box=np.zeros(4, np.float32),
    )
    latent = swapper.prepare(ident)
    want = (emb / np.linalg.norm(emb)) @ emap
    np.testing.assert_allclose(latent, want / np.linalg.norm(want), atol=1e-5)
    assert abs(np.linalg.norm(latent) - 1) < 1e-5
    crops = rng.integers(0, 256, (3, 128, 128, 3), dtype=np.uint8)
    out = swapper.swap(crops, [latent] * 3)  # fixed batch 1: looped on one session
    assert out.dtype == np.uint8 and np.array_equal(out, crops)
    batched = InSwapper(make_runner(str(models_dir / "inswapper_batched.onnx"), CPU), entry("swapper"))
    assert np.array_equal(batched.swap(crops, [latent] * 3), crops)

    short = Identity(
        "bob", np.ones(128, np.float32), ident.source_rgb, ident.source_landmarks, ident.source_box
    )
    with pytest.raises(FaceError, match=r"bob: inswapper needs 512-d ArcFace embeddings, got 128-d"):
        swapper.prepare(short)
    with pytest.raises(ValueError, match="2 prepared"):
        swapper.swap(crops, [latent] * 2)


def test_identity_like_swap_leaves_frame_unchanged_after_paste_back(models_dir: Path) -> None:
    swapper = InSwapper(make_runner(str(models_dir / "inswapper_128.onnx"), CPU), entry("swapper"))
    frame = skimage.data.astronaut()  # real face, public domain, bundled with scikit-image
    # The astronaut's face at about 1:1 scale of the 128 px crop, slightly rotated.
    angle = np.deg2rad(8)
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    landmarks = (template_points(128, "arcface") - 64) @ rot.T * 1.1 + [230, 130]
    crops, affines = warp_crops(frame, [landmarks], 128, "arcface")
    np.testing.assert_allclose(affines[0], estimate_similarity(landmarks, 128, "arcface"))
    swapped = swapper.swap(crops, [swapper.latent_from_embedding(np.ones(512, np.float32))])
    out = paste_back(frame.copy(), swapped[0], affines[0], box=np.array([160, 60, 300, 220], np.float32))
    diff = np.abs(out.astype(np.int16) - frame.astype(np.int16))
    assert diff.mean() < 0.5 and np.percentile(diff, 99) <= 12, (diff.mean(), np.percentile(diff, 99))


# --------------------------------------------------------------------------- enhancer, occluder
def test_gfpgan_round_trip_and_blend(models_dir: Path) -> None:
    enhancer = GfpganEnhancer(
        make_runner(str(models_dir / "GFPGANv1.4.onnx"), CPU), entry("enhancer", blend=0.6)
    )
    assert enhancer.crop_size == 512 and enhancer.template == "ffhq" and enhancer.blend == 0.6
    crops = np.random.default_rng(5).integers(0, 256, (2, 512, 512, 3), dtype=np.uint8)
    # The stand-in returns its normalised input: pre- and post-processing must invert each other.
    assert np.array_equal(enhancer.enhance(crops), crops)
    with pytest.raises(ValueError, match="512, 512, 3"):
        enhancer.enhance(crops[:, :256, :256])


def test_xseg_layout_and_range(models_dir: Path) -> None:
    occluder = XsegOccluder(make_runner(str(models_dir / "xseg.onnx"), CPU), entry("occluder"))
    crops = np.random.default_rng(6).integers(0, 256, (3, 256, 256, 3), dtype=np.uint8)
    mask = occluder.mask(crops)
    assert mask.shape == (3, 256, 256) and mask.dtype == np.float32
    np.testing.assert_allclose(mask, crops.mean(axis=-1) / 255.0, atol=1e-6)


# --------------------------------------------------------------------------- loader
def test_loader_builds_every_role_by_kind(models_dir: Path, tmp_path: Path) -> None:
    models = load_face_models(load_pack(str(models_dir), cache_dir=str(tmp_path)), CPU)
    assert isinstance(models.detector, ScrfdDetector) and isinstance(models.recognizer, ArcFaceRecognizer)
    assert isinstance(models.swapper, InSwapper) and isinstance(models.enhancer, GfpganEnhancer)
    assert isinstance(models.occluder, XsegOccluder)
    assert models.providers == {
        r: ["CPUExecutionProvider"] for r in ("detector", "recognizer", "swapper", "enhancer", "occluder")
    }
    assert models.warnings == []


def test_loader_rejects_inswapper_with_a_128d_recognizer(tmp_path: Path) -> None:
    folder = tmp_path / "pack"
    standins.write_pack(str(folder), roles=("detector", "swapper"))
    standins.arcface(str(folder / "r128.onnx"), embedding_dim=128)
    entries = [
        {
            "role": "detector",
            "kind": "scrfd",
            "file": "det_10g.onnx",
            "contract": standins.CONTRACTS["detector"],
        },
        {
            "role": "recognizer",
            "kind": "arcface",
            "file": "r128.onnx",
            "contract": {"input_size": [112, 112], "embedding_dim": 128},
        },
        {
            "role": "swapper",
            "kind": "inswapper",
            "file": "inswapper_128.onnx",
            "contract": standins.CONTRACTS["swapper"],
        },
    ]
    standins.write_manifest(str(folder), entries)
    pack = load_pack(str(folder), cache_dir=str(tmp_path / "cache"))
    with pytest.raises(
        ModelPackError, match=r"inswapper needs 512-d ArcFace embeddings, but recognizer arcface gives 128-d"
    ):
        load_face_models(pack, CPU)
