"""A lock between the processes that share a data directory, on a file of its own.

Workers of one engine start at the same moment, and each would otherwise assemble or optimize
the same model at once. The lock is advisory (`flock`): only the code that takes it waits for
it. It is released when its holder's file closes, so a worker killed while holding it (SIGKILL,
out of memory) leaves no stale lock behind.
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
    """Hold the lock named `path`: exclusive, or `shared` with the other shared holders. The
    file is made if needed and never removed (removing it would let two holders lock two
    different files). Where it cannot be made (a read-only data directory, where nobody writes
    either, or one not made yet) the caller goes ahead without it."""
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
