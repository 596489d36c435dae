"""The pack cache keeps no credential of the pack's URL (the record of what was fetched is informational)."""

from __future__ import annotations

import shutil
from pathlib import Path

from bench.models import standins
from pipeline.models.pack import load_pack

TOKEN = "tok3n-e18-SECRET"


def test_cache_record_has_no_token(tmp_path: Path) -> None:
    # A local folder whose name carries a signed-URL token, as a copied presigned URL would.
    src = tmp_path / f"pack?token={TOKEN}&X-Amz-Signature=f00dfeed{TOKEN}"
    standins.write_pack(str(src))
    cache = tmp_path / "cache"
    pack = load_pack(str(src), cache_dir=str(cache))
    assert pack.url == str(src)  # the caller still has the URL it gave
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert any(p.name == ".recast-pack.json" for p in files)
    for path in files:
        assert TOKEN.encode() not in path.read_bytes(), path
        assert TOKEN not in str(path.relative_to(cache)), path
    # The cache is still found on the next load (its key is the URL's hash, not the stored URL).
    again = load_pack(str(src), cache_dir=str(cache))
    assert again.local_dir == pack.local_dir
    shutil.rmtree(cache)
