"""The pack cache trusts content, not sizes; pack reads are bounded; a full disk is a clear error.

- a cached model file with one byte flipped (same size) is noticed and fetched again;
- sha256 is computed once per process and file version (the caller's ``VerifiedFiles``);
- a model file larger than its manifest ``size`` (or the loader's cap) is refused while reading;
- a FIFO as a model file or as the manifest is refused by type, never opened;
- a full disk while caching (``/dev/full``) is a ModelPackError saying so.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path

import pytest

from bench.models import standins
from pipeline.errors import ModelPackError
from pipeline.models.pack import _fetch_verified, load_pack
from pipeline.models.verified import VerifiedFiles


@pytest.fixture(scope="module")
def tiny_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-pack")
    standins.write_pack(str(folder))
    return folder


def flip_one_byte(path: str) -> None:
    data = bytearray(Path(path).read_bytes())
    data[len(data) // 2] ^= 0xFF
    Path(path).write_bytes(bytes(data))


def test_same_size_corruption_in_the_cache_is_fetched_again(tiny_pack: Path, tmp_path: Path, caplog) -> None:
    cache = tmp_path / "cache"
    pack = load_pack(str(tiny_pack), cache_dir=str(cache))
    cached = pack.path("swapper")
    size = os.path.getsize(cached)
    flip_one_byte(cached)
    assert os.path.getsize(cached) == size
    with caplog.at_level(logging.WARNING, logger="pipeline.models.pack"):
        again = load_pack(str(tiny_pack), cache_dir=str(cache))
    assert Path(again.path("swapper")).read_bytes() == (tiny_pack / "inswapper_128.onnx").read_bytes()
    assert "does not match its sha256" in caplog.text and "fetching it again" in caplog.text


def test_corrupt_cache_without_its_source_is_refused(tiny_pack: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(tiny_pack, src)
    cache = tmp_path / "cache"
    pack = load_pack(str(src), cache_dir=str(cache))
    flip_one_byte(pack.path("recognizer"))
    (src / "w600k_r50.onnx").unlink()  # cannot be fetched again: the job must not run on the bad copy
    with pytest.raises(ModelPackError, match=r"w600k_r50\.onnx: cannot read model file: not found"):
        load_pack(str(src), cache_dir=str(cache))


def test_hashes_are_memoised_per_file_version(tiny_pack: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    load_pack(str(tiny_pack), cache_dir=str(cache))  # fetch
    verified = VerifiedFiles()
    pack = load_pack(str(tiny_pack), cache_dir=str(cache), verified=verified)
    files = sum(1 for e in pack.manifest.models if e.file)
    assert verified.hashed == files == len(verified)
    load_pack(str(tiny_pack), cache_dir=str(cache), verified=verified)
    assert verified.hashed == files  # second use in this process: no file hashed again
    # A flipped byte changes mtime: the same memo hashes that file again and refuses the copy.
    flip_one_byte(pack.path("detector"))
    load_pack(str(tiny_pack), cache_dir=str(cache), verified=verified)
    assert verified.hashed > files
    assert Path(pack.path("detector")).read_bytes() == (tiny_pack / "det_10g.onnx").read_bytes()


def test_builtin_pack_uses_the_memo(tmp_path: Path) -> None:
    verified = VerifiedFiles()
    load_pack("builtin:default", cache_dir=str(tmp_path / "cache"), verified=verified)
    first = verified.hashed
    assert first >= 2
    load_pack("builtin:default", cache_dir=str(tmp_path / "cache"), verified=verified)
    assert verified.hashed == first


def _with_manifest(src: Path, edit) -> None:
    path = src / "manifest.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))


def test_file_larger_than_its_manifest_size_is_refused(tiny_pack: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(tiny_pack, src)
    real = os.path.getsize(src / "xseg.onnx")
    _with_manifest(src, lambda m: m["models"][4].update(size=real - 1))
    cache = tmp_path / "cache"
    with pytest.raises(ModelPackError) as err:
        load_pack(str(src), cache_dir=str(cache))
    assert err.value.where.endswith("xseg.onnx") and f"larger than {real - 1:,} bytes" in err.value.reason
    assert os.listdir(cache) == []
    _with_manifest(src, lambda m: m["models"][4].update(size=real))
    assert load_pack(str(src), cache_dir=str(cache)).entry("occluder").size == real


def test_loader_cap_applies_without_a_manifest_size(tiny_pack: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelPackError, match="larger than 1,000 bytes"):
        load_pack(str(tiny_pack), cache_dir=str(tmp_path / "cache"), max_file_bytes=1000)


@pytest.mark.timeout(30)
def test_fifo_model_file_and_manifest_are_refused_by_type(tiny_pack: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(tiny_pack, src)
    (src / "xseg.onnx").unlink()
    os.mkfifo(src / "xseg.onnx")
    with pytest.raises(ModelPackError, match=r"xseg\.onnx: cannot read model file: is a FIFO"):
        load_pack(str(src), cache_dir=str(tmp_path / "cache"))
    (src / "manifest.json").unlink()
    os.mkfifo(src / "manifest.json")
    with pytest.raises(ModelPackError, match=r"manifest\.json: cannot read pack manifest: is a FIFO"):
        load_pack(str(src), cache_dir=str(tmp_path / "cache"))


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_disk_full_while_caching_is_a_clear_error(tiny_pack: Path) -> None:
    """``/dev/full`` answers every write with ENOSPC, exactly as a full cache disk does."""
    model = tiny_pack / "det_10g.onnx"
    sha = hashlib.sha256(model.read_bytes()).hexdigest()
    with pytest.raises(ModelPackError) as err:
        _fetch_verified(str(model), "/dev/full", sha)
    assert err.value.where == str(model) and "no space left on device" in err.value.reason
