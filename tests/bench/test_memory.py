"""Resident memory of a process tree, children included."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

from speechgate.bench.memory import MemoryMeter, tree_rss

HOLD = 200_000_000


def test_a_child_counts_in_its_parents_tree() -> None:
    before = tree_rss(os.getpid())
    # The child touches every page of its buffer (so it is resident), says so, then waits.
    script = f"b = bytearray({HOLD}); print('ready', flush=True); input()"
    with subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline() == "ready\n"
        assert tree_rss(os.getpid()) - before > HOLD
        child.stdin.write("\n")
        child.stdin.close()


def test_the_meter_samples_at_the_start_and_at_the_end() -> None:
    meter = MemoryMeter(os.getpid(), interval=60.0)  # no periodic sample within this test

    async def run() -> None:
        async with meter.sampling():
            assert meter.last > 0  # the first sample is taken on entry
            held = bytearray(HOLD)
            assert held  # still referenced at the block's end, so the last sample sees it

    asyncio.run(run())
    assert meter.peak >= meter.last > HOLD
