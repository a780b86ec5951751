"""Moving a running worker's threads between cores (Linux)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable


def confine(pid: int, cpus: Iterable[int]) -> None:
    """Confine every thread of process `pid` to `cpus`, at once: affinity is per thread, and
    doing it from the gateway frees the cores mid-sentence, not at the job's next chunk."""
    cpus = set(cpus)
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # the process is gone
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(ProcessLookupError, FileNotFoundError):
                os.sched_setaffinity(int(task), cpus)
