"""Moving a running worker's threads between cores (Linux)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable


def confine(pid: int, cpus: Iterable[int]) -> None:
    """Confine every thread of process `pid` to `cpus`, at once.

    A process's affinity is per thread (`sched_setaffinity(pid)` moves only its main thread),
    and an engine computes in threads of its own (onnxruntime's pool, pocket-tts' generation
    threads), so each is moved; threads started afterwards inherit their creator's cores. Done
    from the gateway rather than asked of the worker, so a job that is narrowed mid-sentence
    leaves the other cores at once, not at its next chunk.
    """
    cpus = set(cpus)
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # the process is gone
        for task in os.listdir(f"/proc/{pid}/task"):
            # A thread that ended meanwhile.
            with contextlib.suppress(ProcessLookupError, FileNotFoundError):
                os.sched_setaffinity(int(task), cpus)
