"""Which local files this process has already hashed: the pack cache's memo.

A cached model file is trusted only once its sha256 has been compared with the
manifest in this process; :class:`VerifiedFiles` remembers the digest of each file
by (path, inode, mtime, size), so a pack loaded again by the same owner is not hashed
again, while a file replaced or rewritten since (new inode or mtime) is.  The memo is
an object its owner holds (an actor, a driver, a benchmark), never module state.
"""

from __future__ import annotations

import os
import threading

from pipeline.store.hashing import sha256_file

FileKey = tuple[str, int, int, int]
"""(real path, inode, mtime in ns, size)."""


class VerifiedFiles:
    """sha256 of local files, computed once per (path, inode, mtime, size)."""

    def __init__(self) -> None:
        self._digests: dict[FileKey, str] = {}
        self._lock = threading.Lock()
        self.hashed = 0
        """Files hashed so far (memo misses)."""

    def __len__(self) -> int:
        return len(self._digests)

    @staticmethod
    def key(path: str) -> FileKey:
        st = os.stat(path)
        return (os.path.realpath(path), st.st_ino, st.st_mtime_ns, st.st_size)

    def sha256(self, path: str) -> str:
        """Hex sha256 of the local file ``path`` (hashed unless this very file version was)."""
        key = self.key(path)
        with self._lock:
            known = self._digests.get(key)
        if known is not None:
            return known
        digest = sha256_file(path)
        with self._lock:
            self.hashed += 1
            if self.key(path) == key:  # not rewritten while it was being read
                self._digests[key] = digest
        return digest

    def matches(self, path: str, expected_sha256: str) -> bool:
        """True if ``path`` is a regular file whose sha256 is ``expected_sha256``."""
        if not os.path.isfile(path):
            return False
        return self.sha256(path) == expected_sha256.lower()
