"""Workers of a fresh install starting at once: does every one of them load?

Each round empties a data directory and starts 2, 3 or 4 processes at the same moment. With
`--model kokoro`, each builds the Kokoro engine as a worker does (the embedded model assembled
into the data directory, its optimized copy made there, sessions of two widths; about 15 s a
round on 2 cores). With `--model tiny`, each writes a tiny model in place (the same bytes, as
each Kokoro worker assembled it) and builds sessions of two widths on it, with their optimized
copy (`tests.helpers.onnx.start_on_a_fresh_install`; well under a second a round). A round
fails when any process raises. Run from the repository root with the sources to test first on
the path:

    PYTHONPATH=$PWD/src:$PWD .venv/bin/python bench/fresh_start.py --model tiny --rounds 50
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import tempfile
import traceback
from pathlib import Path
from typing import Any


def _start_kokoro(data_dir: Path, barrier: Any) -> str:
    from speechgate.engines import load_engine
    from speechgate.engines.base import EngineConfig

    barrier.wait()
    try:
        engine = load_engine(EngineConfig("kokoro", data_dir=str(data_dir), max_threads=2))
    except Exception:
        return traceback.format_exc(limit=1).strip().splitlines()[-1]
    engine.close()
    return ""


def _start_tiny(data_dir: Path, barrier: Any) -> str:
    from tests.helpers.onnx import start_on_a_fresh_install

    try:
        start_on_a_fresh_install(data_dir / "models" / "tiny.onnx", data_dir, barrier)
    except Exception:
        return traceback.format_exc(limit=1).strip().splitlines()[-1]
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["kokoro", "tiny"], default="kokoro")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per process count")
    parser.add_argument("--processes", default="2,3,4")
    args = parser.parse_args()
    start = _start_kokoro if args.model == "kokoro" else _start_tiny
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        for count in (int(n) for n in args.processes.split(",")):
            failed = 0
            with context.Pool(count) as pool:
                for _ in range(args.rounds):
                    data_dir = Path(tempfile.mkdtemp(prefix="speechgate-fresh-"))
                    if args.model == "tiny":
                        from tests.helpers.onnx import tiny_model

                        tiny_model(data_dir / "models" / "tiny.onnx")
                    try:
                        barrier = manager.Barrier(count)
                        results = pool.starmap(start, [(data_dir, barrier)] * count)
                    finally:
                        shutil.rmtree(data_dir, ignore_errors=True)
                    errors = [error for error in results if error]
                    failed += bool(errors)
                    for error in errors[:1]:
                        print(f"  {count} processes: {error[:160]}")
            print(f"{count} processes: {failed}/{args.rounds} rounds failed", flush=True)


if __name__ == "__main__":
    main()
