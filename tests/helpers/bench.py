"""A benchmark report from synthetic numbers, for the report and comparison tests."""

from __future__ import annotations

from speechgate.bench.report import BenchReport, InProcessResult
from speechgate.bench.stats import Sample, compare, summarize


def make_report(*, in_process: bool = True) -> BenchReport:
    samples = [
        [Sample("short", 200, 0.4, 0.12, 1.5), Sample("medium", 200, 1.2, 0.2, 6.0)],
        [
            Sample("short", 200, 0.6, 0.3, 1.5),
            Sample("medium", 429, 0.01),
            Sample("short", 503, 0.1),
        ],
    ]
    levels = [summarize(c, s, 2.0, 90.0) for c, s in zip((1, 2), samples, strict=True)]
    result = None
    if in_process:
        single = summarize(1, [Sample("short", 200, 0.3, 0.1, 1.5)], 1.0, None)
        ceiling = summarize(2, [Sample("short", 200, 0.3, 0.1, 1.5)] * 3, 1.0, None)
        result = InProcessResult(
            single=single,
            single_threads=1,
            ceiling=ceiling,
            ceiling_slices=[4.4, 4.6, 4.2],
            ceiling_beside={1: 4.5, 2: 4.4},
            comparison=compare(levels, single, {1: 4.5, 2: 4.4}),
        )
    return BenchReport(
        url="http://127.0.0.1:1",
        model="piper",
        voice="alloy",
        format="wav",
        cpu_source="whole machine",
        levels=levels,
        samples=samples,
        in_process=result,
    )
