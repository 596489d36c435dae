"""One spelling per place: the canonical form of every URL Recast reads or writes.

fsspec reaches the local disk through several spellings: a plain path (absolute
or relative), ``file://``, ``file:``, ``local://`` and ``local:`` (the protocols
of its ``LocalFileSystem``), and through chained URLs (``simplecache::file://x``,
``dir::/x``) that end in a local file.  A guard written for one spelling while
the library accepts another is a way past it, so every URL is brought to one
form here, once, and everything after compares, authorises and opens only that
form:

* a local place is an absolute POSIX path, ``.`` and ``..`` collapsed, repeated
  slashes folded, no trailing slash: ``local://out//./a.mp4`` relative to
  ``/jobs`` is ``/jobs/out/a.mp4`` (symbolic links are left in place here; the
  comparisons that need them resolved do so with ``os.path.realpath``);
* an object-store place is ``<scheme>://<bucket>/<key>`` with the scheme
  lower-cased and its aliases folded (``S3A://`` is ``s3://``, ``gcs://`` is
  ``gs://``), empty and ``.`` segments dropped; a ``..`` segment is refused
  (object stores do not collapse it, and proxies differ);
* chained URLs (a ``::``) and stores other than :data:`REMOTE_SCHEMES` are refused.

``memory://`` (fsspec's store inside one process) is a store here, for tests and tools that run in
one process; a job spec may not name it (:func:`unshared`): its actors run in other processes.

Nothing here touches the disk or the network.
"""

from __future__ import annotations

import os
import posixpath
import re

from pipeline.errors import InputRefused

LOCAL_SCHEMES = ("file", "local")
"""fsspec's ``LocalFileSystem`` protocols: ``<scheme>://`` and ``<scheme>:`` both reach the disk."""
REMOTE_SCHEMES = {"s3": "s3", "s3a": "s3", "gs": "gs", "gcs": "gs", "memory": "memory"}
"""Object stores Recast reads and writes, each alias mapped to its canonical scheme."""
SUPPORTED = "local paths, file://, s3://, gs:// and memory://"
PROCESS_SCHEMES = ("memory",)
"""Stores that live inside one process: no other process (a Ray actor, another node) sees them."""

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


def scheme(url: str) -> str | None:
    """The lower-cased scheme of ``url`` when it has ``<scheme>://`` (None: a path)."""
    match = _SCHEME.match(url)
    return match.group(1).lower() if match else None


def is_chained(url: str) -> bool:
    """Whether ``url`` chains filesystems (``simplecache::s3://b/x``)."""
    return "::" in url


def is_local(url: str) -> bool:
    """Whether ``url`` names the local disk (a path, ``file:``, ``local:`` in either form)."""
    if is_chained(url):
        return False
    found = scheme(url)
    return found is None or found in LOCAL_SCHEMES


def local_path(url: str) -> str:
    """The path of a local ``url`` as fsspec's ``LocalFileSystem`` reads it (relative stays relative)."""
    found = scheme(url)
    if found in LOCAL_SCHEMES:
        return url[len(found) + 3 :]
    for prefix in ("file:", "local:"):  # fsspec strips these as written (case-sensitive)
        if url.startswith(prefix):
            return url[len(prefix) :]
    return url


def problem(url: str) -> str | None:
    """Why ``url`` cannot be used as a storage URL (None: it can)."""
    if not url:
        return "is empty"
    if is_chained(url):
        return "chained URLs ('::') are not supported: name the store and path directly"
    if any(ord(c) < 32 for c in url):
        return "contains a control character (a newline or tab)"
    if url[:5].lower() == "data:":  # fsspec reads 'data:' as inline content, the disk as a file name
        return "a 'data:' URL names no stored file"
    found = scheme(url)
    if found is None or found in LOCAL_SCHEMES:
        return None if local_path(url) else "names no path"
    if found not in REMOTE_SCHEMES:
        return f"unsupported scheme '{found}://' (Recast reads and writes {SUPPORTED})"
    rest = url[len(found) + 3 :].split("?", 1)[0]
    if ".." in rest.replace("\\", "/").split("/"):
        return "a '..' segment in an object-store URL is not allowed"
    if not [p for p in rest.split("/") if p not in ("", ".")]:
        return "names no bucket"
    return None


def unshared(url: str) -> str | None:
    """Why ``url`` names a place that the other processes of a job cannot reach (None: they can)."""
    found = scheme(url)
    if found in PROCESS_SCHEMES:
        return (
            f"{found}:// is a store inside one process: the job's actors (other processes, other "
            "nodes) cannot reach it; give a local path every node shares, s3:// or gs://"
        )
    return None


def canonical(url: str, base_dir: str | None = None) -> str:
    """The one spelling of the place ``url`` names (see the module docstring).

    A relative local path is taken against ``base_dir`` (the current folder when
    None).  Raises :class:`~pipeline.errors.InputRefused` naming ``url`` for a
    chained URL, an unsupported scheme, or a ``..`` in an object-store URL.
    """
    reason = problem(url)
    if reason is not None:
        raise InputRefused(url, reason)
    if is_local(url):
        return canonical_path(local_path(url), base_dir)
    found = scheme(url)
    assert found is not None
    rest, sep, query = url[len(found) + 3 :].partition("?")
    parts = [p for p in rest.split("/") if p not in ("", ".")]
    return f"{REMOTE_SCHEMES[found]}://{'/'.join(parts)}{sep}{query}"


def canonical_path(path: str, base_dir: str | None = None) -> str:
    """``path`` absolute (against ``base_dir`` or the current folder), collapsed, with one leading slash.

    An absolute path never asks for the current folder, which may be gone: a job submitted with a
    working directory can outlive its copy (Ray removes it once no worker on the node uses it)."""
    expanded = os.path.expanduser(path)
    if os.path.isabs(expanded):
        joined = expanded
    else:
        joined = os.path.join(base_dir if base_dir is not None else os.getcwd(), expanded)
    normal = posixpath.normpath(joined)
    return "/" + normal.lstrip("/") if normal.startswith("//") else normal


def has_dotdot(url: str) -> bool:
    """Whether any segment of ``url`` (after its scheme; ``/`` or ``\\`` separated) is ``..``."""
    rest = url.split("://", 1)[-1] if scheme(url) else local_path(url)
    return ".." in rest.replace("\\", "/").split("/")
