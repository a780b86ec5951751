"""Workers of a fresh install starting at once: does every one of them load?

Each round empties a data directory and starts 2, 3 or 4 processes at the same moment, each
building the Kokoro engine as a worker does (the embedded model assembled into the data
directory, its optimized copy made there, sessions of two widths). A round fails when any
process raises. Run from the repository root with the sources to test first on the path:

    PYTHONPATH=$PWD/src .venv/bin/python bench/fresh_start.py --rounds 5
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import tempfile
import traceback
from pathlib import Path
from typing import Any


def _start(data_dir: Path, barrier: Any) -> str:
    from speechgate.engines import load_engine
    from speechgate.engines.base import EngineConfig

    barrier.wait()
    try:
        engine = load_engine(
            EngineConfig("kokoro", data_dir=str(data_dir), threads=1, max_threads=2)
        )
    except Exception:
        return traceback.format_exc(limit=1).strip().splitlines()[-1]
    engine.close()
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds per process count")
    parser.add_argument("--processes", default="2,3,4")
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        for count in (int(n) for n in args.processes.split(",")):
            failed = 0
            for _ in range(args.rounds):
                data_dir = Path(tempfile.mkdtemp(prefix="speechgate-fresh-"))
                try:
                    barrier = manager.Barrier(count)
                    with context.Pool(count) as pool:
                        errors = [
                            e for e in pool.starmap(_start, [(data_dir, barrier)] * count) if e
                        ]
                finally:
                    shutil.rmtree(data_dir, ignore_errors=True)
                failed += bool(errors)
                for error in errors:
                    print(f"  {count} processes: {error[:160]}")
            print(f"{count} processes: {failed}/{args.rounds} rounds failed", flush=True)


if __name__ == "__main__":
    main()
