"""Routing figures for /metrics: outcomes and failovers as they happen; weights, enablement
and breaker states read from the router at every scrape."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from speechgate.metrics import _LATENCY_BUCKETS
from speechgate.routing.breaker import BreakerState
from speechgate.routing.shadow import ShadowPair
from speechgate.routing.table import RoutingState

_DIFFERENCE_BUCKETS = (0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5)


class _StateCollector(Collector):
    def __init__(self, state: Callable[[], RoutingState]) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        state = self._state()
        breaker = GaugeMetricFamily(
            "speechgate_provider_breaker_state",
            "1 for the state each provider's circuit breaker is in.",
            labels=["provider", "state"],
        )
        enabled = GaugeMetricFamily(
            "speechgate_provider_enabled", "1 if the provider takes requests.", labels=["provider"]
        )
        weight = GaugeMetricFamily(
            "speechgate_route_weight",
            "Each provider's weight (percent) in each route.",
            labels=["route", "provider"],
        )
        for name, provider in state.providers.items():
            for each in BreakerState:
                breaker.add_metric([name, each.value], float(provider.breaker.state is each))
            enabled.add_metric([name], float(provider.enabled))
        for route_name, route in state.routes.items():
            for name, value in route.weights.items():
                weight.add_metric([route_name, name], value)
        yield from (breaker, enabled, weight)


class RoutingMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry
        self.requests = Counter(
            "speechgate_routed_requests",
            "Routed requests by provider and outcome (success, failure, neutral).",
            ["route", "provider", "outcome"],
            registry=registry,
        )
        self.failovers = Counter(
            "speechgate_route_failovers",
            "Failures before any audio, after which the next provider (if any) was tried.",
            ["route", "provider"],
            registry=registry,
        )
        self.shadow_pairs = Counter(
            "speechgate_shadow_pairs",
            "Shadow comparisons by result (identical, different, failed).",
            ["route", "result"],
            registry=registry,
        )
        self.shadow_ttfa = Histogram(
            "speechgate_shadow_time_to_first_audio_seconds",
            "Time to first audio of shadowed requests, by side (primary, shadow).",
            ["route", "side"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.shadow_difference = Histogram(
            "speechgate_shadow_duration_difference_seconds",
            "Absolute difference between the audio durations of the two sides.",
            ["route"],
            buckets=_DIFFERENCE_BUCKETS,
            registry=registry,
        )

    def watch(self, state: Callable[[], RoutingState]) -> None:
        self._registry.register(_StateCollector(state))

    def record_shadow(self, pair: ShadowPair) -> None:
        result = {None: "failed", True: "identical", False: "different"}[pair.identical]
        self.shadow_pairs.labels(pair.route, result).inc()
        self.shadow_ttfa.labels(pair.route, "primary").observe(pair.primary_ttfa)
        if pair.shadow_ttfa is not None:
            self.shadow_ttfa.labels(pair.route, "shadow").observe(pair.shadow_ttfa)
        if pair.duration_difference is not None:
            self.shadow_difference.labels(pair.route).observe(abs(pair.duration_difference))
