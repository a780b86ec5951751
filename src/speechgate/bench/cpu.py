"""CPU use over an interval: of a server's process tree, or of the whole machine."""

from __future__ import annotations

import time

import psutil

_Key = tuple[int, float]  # (pid, create time): a pid alone may be reused by a new process


def _tree_times(pid: int) -> dict[_Key, float]:
    root = psutil.Process(pid)
    times: dict[_Key, float] = {}
    for process in [root, *root.children(recursive=True)]:
        try:
            cpu = process.cpu_times()
            times[(process.pid, process.create_time())] = cpu.user + cpu.system
        except psutil.NoSuchProcess:  # exited between listing and reading
            continue
    return times


class CpuMeter:
    """Top-style CPU percent (100 = one core) between `start()` and `stop()`, of `pid`'s
    process tree (a child that exits meanwhile is lost) or else the whole machine."""

    def __init__(self, pid: int | None = None) -> None:
        self.pid = pid
        self._started = 0.0
        self._tree: dict[_Key, float] = {}

    @property
    def source(self) -> str:
        return f"server pid {self.pid} + children" if self.pid else "whole machine"

    def start(self) -> None:
        self._started = time.monotonic()
        if self.pid:
            self._tree = _tree_times(self.pid)
        else:
            psutil.cpu_percent(interval=None)  # resets psutil's reference point

    def stop(self) -> float:
        wall = time.monotonic() - self._started
        if not self.pid:
            return float(psutil.cpu_percent(interval=None)) * (psutil.cpu_count() or 1)
        used = sum(t - self._tree.get(key, 0.0) for key, t in _tree_times(self.pid).items())
        return 100.0 * used / wall if wall > 0 else 0.0
