"""Prometheus metrics, in a registry of the app's own (so several apps can live in one
process); pool state is read from the pools when scraped."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from speechgate.workers.interface import Pool

_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1, 1.5, 2.5, 5, 10, 30, 60)
_DURATION_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120, 300)
_RTF_BUCKETS = (0.5, 1, 1.5, 2, 3, 5, 10, 20, 50, 100, 500, 1000)


class _PoolCollector(Collector):
    def __init__(self, pools: Mapping[str, Pool]) -> None:
        self._pools = pools

    def collect(self) -> Iterator[Metric]:
        queued = GaugeMetricFamily(
            "speechgate_queue_depth", "Requests waiting for a worker.", labels=["engine"]
        )
        in_flight = GaugeMetricFamily(
            "speechgate_in_flight", "Jobs running on workers.", labels=["engine"]
        )
        workers = GaugeMetricFamily(
            "speechgate_workers", "Worker processes by state.", labels=["engine", "state"]
        )
        restarts = CounterMetricFamily(
            "speechgate_worker_restarts", "Workers restarted after dying.", labels=["engine"]
        )
        rejected = CounterMetricFamily(
            "speechgate_admission_rejections",
            "Requests turned away by admission control.",
            labels=["engine", "reason"],
        )
        jobs = CounterMetricFamily(
            "speechgate_jobs", "Jobs ended, by outcome.", labels=["engine", "outcome"]
        )
        for name, pool in self._pools.items():
            stats = pool.stats()
            queued.add_metric([name], stats.queued)
            in_flight.add_metric([name], stats.in_flight)
            for state, count in stats.workers.items():
                workers.add_metric([name, state.value], count)
            restarts.add_metric([name], stats.restarts)
            for reason, count in stats.rejected.items():
                rejected.add_metric([name, reason], count)
            for outcome, count in stats.jobs.items():
                jobs.add_metric([name, outcome], count)
        yield from (queued, in_flight, workers, restarts, rejected, jobs)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.responses = Counter(
            "speechgate_responses",
            "HTTP responses by route and status.",
            ["route", "status"],
            registry=self.registry,
        )
        self.time_to_first_audio = Histogram(
            "speechgate_time_to_first_audio_seconds",
            "From request admission to the first encoded audio.",
            ["engine"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.speech_duration = Histogram(
            "speechgate_speech_duration_seconds",
            "Whole speech requests, from admission to the last byte.",
            ["engine"],
            buckets=_DURATION_BUCKETS,
            registry=self.registry,
        )
        self.real_time_factor = Histogram(
            "speechgate_real_time_factor",
            "Seconds of audio delivered per second of request, per completed request.",
            ["engine"],
            buckets=_RTF_BUCKETS,
            registry=self.registry,
        )
        self.phrase_cache = Counter(
            "speechgate_phrase_cache",
            "Speech requests the phrase cache could answer, by outcome: hit or miss.",
            ["engine", "outcome"],
            registry=self.registry,
        )
        self.audio_seconds = Counter(
            "speechgate_audio_seconds",
            "Seconds of speech delivered.",
            ["engine"],
            registry=self.registry,
        )
        self.input_characters = Counter(
            "speechgate_input_characters",
            "Characters of input accepted for synthesis.",
            ["engine"],
            registry=self.registry,
        )

    def watch(self, pools: Mapping[str, Pool]) -> None:
        self.registry.register(_PoolCollector(pools))

    def record_speech(
        self,
        engine: str,
        characters: int,
        time_to_first_audio: float,
        elapsed: float,
        audio_seconds: float,
        completed: bool,
    ) -> None:
        self.input_characters.labels(engine).inc(characters)
        self.time_to_first_audio.labels(engine).observe(time_to_first_audio)
        self.audio_seconds.labels(engine).inc(audio_seconds)
        if completed:
            self.speech_duration.labels(engine).observe(elapsed)
            if elapsed > 0:
                self.real_time_factor.labels(engine).observe(audio_seconds / elapsed)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
