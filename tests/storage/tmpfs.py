"""Small size-limited filesystems for disk-full tests: a tmpfs mounted on a directory.

``mounted(path, size_kib)`` mounts a tmpfs of that size on ``path`` (created if missing) and
always unmounts it on the way out (lazily if something still holds it open); it skips the test
with the reason when the process is not root or the mount is refused (no CAP_SYS_ADMIN in a
container). ``resize(path, size_kib)`` remounts it with another size: space returns.
``fill(path)`` writes a filler file until the filesystem is full and returns its path.

tmpfs counts only pages that hold data, so a sparse file (a preallocated index) costs nothing
until an entry lands in one of its pages, exactly the case that needs space later.
"""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=30)


def can_mount() -> str | None:
    """None if tmpfs mounts should work here, else why not."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    if shutil.which("mount") is None or shutil.which("umount") is None:
        return "mount/umount are not installed"
    return None


@contextlib.contextmanager
def mounted(path: str, size_kib: int) -> Iterator[str]:
    reason = can_mount()
    if reason is not None:
        pytest.skip(reason)
    os.makedirs(path, exist_ok=True)
    result = _run("mount", "-t", "tmpfs", "-o", f"size={size_kib}k,mode=0755", "tmpfs", path)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs on {path}: {result.stderr.strip()}")
    try:
        yield path
    finally:
        unmount(path)


def unmount(path: str) -> None:
    if _run("umount", path).returncode != 0:
        _run("umount", "-l", path)


def resize(path: str, size_kib: int) -> None:
    result = _run("mount", "-o", f"remount,size={size_kib}k", path)
    if result.returncode != 0:
        raise RuntimeError(f"cannot resize the tmpfs on {path}: {result.stderr.strip()}")


def fill(path: str, name: str = "filler") -> str:
    """Write ``path/name`` until the filesystem refuses (ENOSPC); returns the file's path."""
    filler = os.path.join(path, name)
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        page = b"\0" * 4096
        while True:
            try:
                os.write(fd, page)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                break
    finally:
        os.close(fd)
    return filler


def copy_into(source: str, target: str) -> None:
    """Copy a directory's contents into another (a formatted data dir into a fresh tmpfs)."""
    for name in os.listdir(source):
        src, dst = os.path.join(source, name), os.path.join(target, name)
        if os.path.isdir(src):
            shutil.copytree(src, dst)
        else:
            shutil.copy2(src, dst)
