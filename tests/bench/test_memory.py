"""Resident memory of a process tree, children included."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

from speechgate.bench.memory import MemoryMeter, tree_rss

HOLD = 200_000_000


def hold(size: int) -> subprocess.Popen[str]:
    """A child that holds `size` bytes resident (every page touched) until its stdin closes."""
    script = f"import sys; b = bytearray({size}); print('ready', flush=True); sys.stdin.read()"
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    return child


def release(child: subprocess.Popen[str]) -> None:
    assert child.stdin is not None and child.stdout is not None
    child.stdin.close()
    child.wait()
    child.stdout.close()


def test_a_child_counts_in_its_parents_tree() -> None:
    before = tree_rss(os.getpid())
    child = hold(HOLD)
    try:
        assert tree_rss(os.getpid()) - before > HOLD
    finally:
        release(child)


def test_the_meter_samples_at_the_start_and_at_the_end() -> None:
    meter = MemoryMeter(os.getpid(), interval=60.0)  # no periodic sample within this test

    async def run() -> None:
        async with meter.sampling():
            assert meter.last > 0  # the first sample is taken on entry
            held = bytearray(HOLD)
            assert held  # still referenced at the block's end, so the last sample sees it

    asyncio.run(run())
    assert meter.peak >= meter.last > HOLD


def test_a_child_that_replaces_an_exited_one_counts_before_the_next_listing() -> None:
    # As a pool restarts a worker: the tree the meter listed has lost a process and gained one.
    before = tree_rss(os.getpid())
    meter = MemoryMeter(os.getpid(), relist=3600.0)
    first = hold(1)
    meter.sample()
    release(first)
    second = hold(HOLD)
    try:
        assert meter.sample() - before > HOLD
    finally:
        release(second)
