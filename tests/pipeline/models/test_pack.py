"""Model packs: fetch once into the cache with sha256 checks, from local, file:// and
loopback S3; bad packs (wrong checksum, missing file, wrong contract) fail with a
ModelPackError naming the file, before any session exists."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path

import fsspec
import pytest

from bench.models import standins
from pipeline.errors import ModelPackError
from pipeline.models.pack import BUILTIN_DEFAULT, load_pack


@pytest.fixture(scope="module")
def tiny_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A complete tiny stand-in pack (all five roles); tests copy it before damaging it."""
    folder = tmp_path_factory.mktemp("tiny-pack")
    standins.write_pack(str(folder))
    return folder


def copy_pack(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def rewrite_manifest(folder: Path, edit) -> None:
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))


def leftovers(cache: Path) -> list[str]:
    return [p.name for p in cache.iterdir()] if cache.exists() else []


def test_local_pack_is_verified_and_cached_once(tiny_pack: Path, tmp_path: Path) -> None:
    src = copy_pack(tiny_pack, tmp_path / "src")
    cache = tmp_path / "cache"
    pack = load_pack(str(src), cache_dir=str(cache))
    manifest_bytes = (src / "manifest.json").read_bytes()
    assert pack.hash == hashlib.sha256(manifest_bytes).hexdigest()
    assert pack.manifest.name == "standin-pack"
    assert [e.role for e in pack.manifest.models] == [
        "detector",
        "recognizer",
        "swapper",
        "enhancer",
        "occluder",
    ]
    assert Path(pack.local_dir).parent == cache
    swapper = pack.entry("swapper")
    assert swapper is not None and swapper.kind == "inswapper"
    assert pack.path("swapper") == os.path.join(pack.local_dir, "inswapper_128.onnx")
    assert (src / "inswapper_128.onnx").read_bytes() == Path(pack.path("swapper")).read_bytes()
    assert pack.entry("nonexistent") is None
    # Fetched once: with the source files gone, the cache still serves the same pack.
    for model in src.glob("*.onnx"):
        model.unlink()
    again = load_pack(str(src), cache_dir=str(cache))
    assert again.local_dir == pack.local_dir and again.hash == pack.hash
    assert sorted(leftovers(cache)) == [os.path.basename(pack.local_dir)]


def test_concurrent_loads_share_one_cache_folder(tiny_pack: Path, tmp_path: Path, caplog) -> None:
    """Loaders racing on one cache (actors starting together on a node): each gets the complete pack,
    one folder stays, and a folder another loader published meanwhile is never taken for damaged
    (and removed under the others' feet)."""
    from concurrent.futures import ThreadPoolExecutor

    for round_ in range(6):
        cache = tmp_path / f"cache{round_}"
        with caplog.at_level(logging.WARNING, logger="pipeline.models.pack"), ThreadPoolExecutor(8) as pool:
            packs = list(pool.map(lambda _, c=cache: load_pack(str(tiny_pack), cache_dir=str(c)), range(8)))
        assert len({p.local_dir for p in packs}) == 1
        assert leftovers(cache) == [os.path.basename(packs[0].local_dir)]
        assert (Path(packs[0].local_dir) / "manifest.json").read_bytes() == (
            tiny_pack / "manifest.json"
        ).read_bytes()
    assert not [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]


def test_concurrent_loads_mend_a_damaged_cache(tiny_pack: Path, tmp_path: Path) -> None:
    """A cached model file damaged on disk, then loaders racing: each gets a verified pack, one whole
    folder stays, nothing set aside is left behind."""
    from concurrent.futures import ThreadPoolExecutor

    cache = tmp_path / "cache"
    pack = load_pack(str(tiny_pack), cache_dir=str(cache))
    model = Path(pack.path("swapper"))
    model.write_bytes(b"\0" * model.stat().st_size)  # same size, other bytes
    with ThreadPoolExecutor(4) as pool:
        packs = list(pool.map(lambda _: load_pack(str(tiny_pack), cache_dir=str(cache)), range(4)))
    assert {p.local_dir for p in packs} == {pack.local_dir}
    assert leftovers(cache) == [os.path.basename(pack.local_dir)]
    assert model.read_bytes() == (tiny_pack / model.name).read_bytes()


def test_file_url_and_env_cache_dir(tiny_pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECAST_CACHE_DIR", str(tmp_path / "root"))
    pack = load_pack(f"file://{tiny_pack}")
    assert Path(pack.local_dir).parent == tmp_path / "root" / "packs"
    assert os.path.isfile(pack.path("detector"))


def test_damaged_cache_is_fetched_again(tiny_pack: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    pack = load_pack(str(tiny_pack), cache_dir=str(cache))
    Path(pack.path("swapper")).write_bytes(b"truncated")
    again = load_pack(str(tiny_pack), cache_dir=str(cache))
    assert Path(again.path("swapper")).read_bytes() == (tiny_pack / "inswapper_128.onnx").read_bytes()


def test_s3_pack(tiny_pack: Path, s3_bucket: str, tmp_path: Path) -> None:
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    url = f"{s3_bucket}/packs/studio"
    for file in tiny_pack.iterdir():
        fs.put_file(str(file), f"{url}/{file.name}".removeprefix("s3://"))
    pack = load_pack(url, cache_dir=str(tmp_path / "cache"))
    assert pack.url == url
    assert Path(pack.path("recognizer")).read_bytes() == (tiny_pack / "w600k_r50.onnx").read_bytes()
    # A checksum mismatch on the store is reported with the object's URL.
    fs.pipe_file(f"{url}/xseg.onnx".removeprefix("s3://"), b"not the model")
    with pytest.raises(ModelPackError, match=r"xseg\.onnx.*sha256 mismatch"):
        load_pack(url + "/", cache_dir=str(tmp_path / "cache2"))


def test_wrong_checksum(tiny_pack: Path, tmp_path: Path) -> None:
    src = copy_pack(tiny_pack, tmp_path / "src")
    rewrite_manifest(src, lambda m: m["models"][1].update(sha256="ab" * 32))
    cache = tmp_path / "cache"
    with pytest.raises(ModelPackError) as err:
        load_pack(str(src), cache_dir=str(cache))
    assert "w600k_r50.onnx" in err.value.where
    assert "sha256 mismatch" in err.value.reason and "ab" * 32 in err.value.reason
    assert leftovers(cache) == []  # nothing half-fetched stays in the cache


def test_missing_file(tiny_pack: Path, tmp_path: Path) -> None:
    src = copy_pack(tiny_pack, tmp_path / "src")
    (src / "GFPGANv1.4.onnx").unlink()
    cache = tmp_path / "cache"
    with pytest.raises(ModelPackError, match=r"GFPGANv1\.4\.onnx: cannot read model file: not found"):
        load_pack(str(src), cache_dir=str(cache))
    assert leftovers(cache) == []


def test_missing_manifest(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelPackError, match=r"manifest\.json: cannot read pack manifest"):
        load_pack(str(tmp_path / "empty"), cache_dir=str(tmp_path / "cache"))


def test_wrong_contract_swapper(tiny_pack: Path, tmp_path: Path) -> None:
    """A swapper whose source is not [1, 512] is rejected before any session is made."""
    src = copy_pack(tiny_pack, tmp_path / "src")
    standins.inswapper(str(src / "inswapper_128.onnx"), source_dim=256)
    standins.write_manifest(
        src,
        [
            {k: v for k, v in e.items() if k != "sha256"}
            for e in json.loads((src / "manifest.json").read_text())["models"]
        ],
    )
    with pytest.raises(ModelPackError) as err:
        load_pack(str(src), cache_dir=str(tmp_path / "cache"))
    assert err.value.where.endswith("inswapper_128.onnx")
    assert "input 'source' has shape [1, 256]" in err.value.reason and "[N, 512]" in err.value.reason
    assert leftovers(tmp_path / "cache") == []


def test_wrong_contract_model_under_another_role(tiny_pack: Path, tmp_path: Path) -> None:
    """The GFPGAN file declared as the recognizer: kind arcface, but the graph is not."""
    src = copy_pack(tiny_pack, tmp_path / "src")

    def swap_files(m: dict) -> None:
        enhancer = m["models"][3]
        m["models"][1].update(file=enhancer["file"], sha256=enhancer["sha256"])

    rewrite_manifest(src, swap_files)
    with pytest.raises(
        ModelPackError,
        match=r"GFPGANv1\.4\.onnx: input 'input' has shape \[1, 3, 512, 512\], kind arcface needs \[N, 3, 112, 112\]",
    ):
        load_pack(str(src), cache_dir=str(tmp_path / "cache"))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda m: m["models"][0].update(kind="gfpgan"), r"kind 'gfpgan' is not a detector kind"),
        (lambda m: m["models"].pop(2), r"pack has no swapper"),
        (lambda m: m["models"][4].update(file="../xseg.onnx"), r"relative path inside the pack"),
        (lambda m: m["models"][4].pop("sha256"), r"xseg\.onnx: needs a 64-hex-digit 'sha256'"),
        (lambda m: m["models"].append(dict(m["models"][4])), r"role 'occluder' appears more than once"),
        (lambda m: m["models"][0].update(role="painter"), r"models\.0\.role"),
        (
            lambda m: m["models"][0]["contract"].update(score_threshold=3),
            r"score_threshold must be a number in \[0, 1\]",
        ),
    ],
)
def test_bad_manifest(tiny_pack: Path, tmp_path: Path, edit, message: str) -> None:
    src = copy_pack(tiny_pack, tmp_path / "src")
    rewrite_manifest(src, edit)
    with pytest.raises(ModelPackError, match=message):
        load_pack(str(src), cache_dir=str(tmp_path / "cache"))


def test_builtin_default_pack_is_built_once(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    pack = load_pack(BUILTIN_DEFAULT, cache_dir=str(cache))
    kinds = {e.role: e.kind for e in pack.manifest.models}
    assert kinds["swapper"] == "builtin" and kinds["recognizer"] == "sface"
    assert os.path.isfile(pack.path("detector"))
    again = load_pack(BUILTIN_DEFAULT, cache_dir=str(cache))
    assert again.local_dir == pack.local_dir and again.hash == pack.hash
    assert [p.name for p in cache.iterdir()] == [os.path.basename(pack.local_dir)]
    with pytest.raises(ModelPackError, match="unknown embedded pack"):
        load_pack("builtin:other", cache_dir=str(cache))
