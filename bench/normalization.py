"""Text normalization's cost: import time, memory added, and time per sentence over the
hard-text set (tests/text/hard_text.yaml), per language.

    PYTHONPATH=src python bench/normalization.py [--rounds 20]

Import time and memory are read in a fresh interpreter (a child process), so nothing already
imported hides them. Figures go to bench/README.md ("Text normalization: library costs").
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

_HARD_TEXT = Path(__file__).resolve().parent.parent / "tests" / "text" / "hard_text.yaml"

_START_UP = """
import json, time
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
before = rss()
start = time.perf_counter()
import speechgate.text.normalize as n
imported = time.perf_counter()
n.warm("en")
warm_en = time.perf_counter()
for tag in ("de", "fr", "es"):
    n.warm(tag)
warm_all = time.perf_counter()
print(json.dumps({
    "import_ms": (imported - start) * 1000,
    "warm_en_ms": (warm_en - imported) * 1000,
    "warm_de_fr_es_ms": (warm_all - warm_en) * 1000,
    "rss_added_mb": rss() - before,
}))
"""


def start_up() -> dict[str, float]:
    # speechgate's package __init__ is imported first, so only the normalizer is counted.
    code = "import speechgate\n" + _START_UP
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return dict(json.loads(out.stdout))


def per_sentence(rounds: int) -> dict[str, dict[str, float]]:
    from speechgate.text.normalize import normalize, warm

    cases = yaml.safe_load(_HARD_TEXT.read_text(encoding="utf-8"))
    figures = {}
    for language, entries in cases.items():
        warm(language)
        times = []
        for _ in range(rounds):
            for case in entries:
                start = time.perf_counter()
                normalize(case["text"], language)
                times.append(time.perf_counter() - start)
        times.sort()
        figures[language] = {
            "sentences": len(entries),
            "p50_us": statistics.median(times) * 1e6,
            "p99_us": times[int(len(times) * 0.99) - 1] * 1e6,
        }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    cold = start_up()
    print(
        f"import {cold['import_ms']:.1f} ms, first use en {cold['warm_en_ms']:.1f} ms, "
        f"de+fr+es {cold['warm_de_fr_es_ms']:.1f} ms, memory added {cold['rss_added_mb']:.1f} MB"
    )
    print(f"{'language':10} {'sentences':>9} {'p50 µs':>8} {'p99 µs':>8}")
    for language, row in per_sentence(args.rounds).items():
        print(f"{language:10} {row['sentences']:>9} {row['p50_us']:>8.0f} {row['p99_us']:>8.0f}")


if __name__ == "__main__":
    main()
