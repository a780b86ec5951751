"""A lock between the processes that share a data directory, on a file of its own.

Workers of one engine start at once and would each assemble or optimize the same model. An
advisory `flock` is released when its holder's file closes, so a killed worker leaves no stale
lock.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # not on POSIX: every holder goes ahead, as without a lock
    fcntl = None  # type: ignore[assignment]


@contextlib.contextmanager
def file_lock(path: Path, *, shared: bool = False) -> Iterator[None]:
    """Hold the lock named `path`, exclusive or `shared`. The file is never removed (two holders
    would lock two files); where it cannot be made the caller goes ahead without it."""
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        yield
        return
    try:
        if fcntl is not None:
            fcntl.flock(descriptor, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)
