"""`speechgate bench`: load a running server, time the engine in-process, compare.

runs = asyncio.run(run_load(LoadConfig(url="http://127.0.0.1:8000", levels=(1, 2, 4))))
single = measure_single(EngineConfig("piper"), "alloy", aliases, seconds=10)
"""

from speechgate.bench.audio import audio_seconds, wav_audio_seconds
from speechgate.bench.inprocess import InProcessRun, measure_ceiling, measure_single
from speechgate.bench.load import LevelRun, LoadConfig, run_level, run_load
from speechgate.bench.report import (
    BenchReport,
    InProcessResult,
    render_report,
    write_json,
    write_plot,
)
from speechgate.bench.runner import InProcessConfig, run_bench
from speechgate.bench.stats import Comparison, Percentiles, RunStats, Sample, percentile, summarize
from speechgate.bench.texts import LONG_TEXTS, TEXTS, Text, text_set

__all__ = [
    "LONG_TEXTS",
    "TEXTS",
    "BenchReport",
    "Comparison",
    "InProcessConfig",
    "InProcessResult",
    "InProcessRun",
    "LevelRun",
    "LoadConfig",
    "Percentiles",
    "RunStats",
    "Sample",
    "Text",
    "audio_seconds",
    "measure_ceiling",
    "measure_single",
    "percentile",
    "render_report",
    "run_bench",
    "run_level",
    "run_load",
    "summarize",
    "text_set",
    "wav_audio_seconds",
    "write_json",
    "write_plot",
]
