"""
One name for "this exact source tree": the SHA-256 of the checkout's tracked files as they
are in the working tree (names and bytes).

The compiled wheel takes a minute and a half of CPU to build, and ``./dev test`` needs it
twice: ``tests/test_readme.py`` builds it by the README's commands as written, and the
``tests_compiled`` session installs a compiled wheel to run the suite against.  The README
test leaves the wheel it built under ``$AGUIKIT_WHEEL_CACHE/<digest>/`` and the session
(``noxfile.py``) takes it from there when the digest of the tree it would build is the
same, so the wheel the suite runs against is the one the README's commands produced, built
once.  Any edit changes the digest, and the session then builds its own.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path


def tracked_files(root: Path) -> list[str]:
    """The checkout's tracked files that exist in the working tree (a tracked file deleted
    there is gone), sorted: what a clone of this tree would hold."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True)
    names = filter(None, listed.stdout.decode("utf-8").split("\0"))
    return sorted(name for name in names if (root / name).is_file())


def tree_digest(root: Path) -> str:
    """The hex SHA-256 of ``root``'s tracked files, each as its name and its bytes."""
    digest = hashlib.sha256()
    for name in tracked_files(root):
        data = (root / name).read_bytes()
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()
