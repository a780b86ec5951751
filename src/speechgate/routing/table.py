"""The routing table in force: an immutable snapshot that each request reads once.

Runtime changes (weights, enable/disable, promote, a reloaded file) build a new snapshot and
swap it in, so the next request sees them and requests already running keep theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from speechgate.catalog import normalize
from speechgate.errors import InvalidRequest, NotFound
from speechgate.routing.breaker import CircuitBreaker
from speechgate.routing.config import ProviderConfig, RoutesConfig, ShadowConfig
from speechgate.routing.providers import Provider

MakeProvider = Callable[[str, ProviderConfig], Provider]
MakeBreaker = Callable[[], CircuitBreaker]


@dataclass(frozen=True)
class ProviderEntry:
    provider: Provider
    config: ProviderConfig
    breaker: CircuitBreaker
    enabled: bool = True


@dataclass(frozen=True)
class RouteEntry:
    weights: Mapping[str, float]
    fallback: tuple[str, ...]
    shadow: ShadowConfig | None


@dataclass(frozen=True)
class RoutingState:
    providers: Mapping[str, ProviderEntry]
    routes: Mapping[str, RouteEntry]
    """By public model name, as configured."""

    @classmethod
    def build(
        cls,
        config: RoutesConfig,
        make_provider: MakeProvider,
        make_breaker: MakeBreaker,
        previous: RoutingState | None = None,
    ) -> tuple[RoutingState, list[Provider]]:
        """The state `config` describes, and the previous state's providers it no longer uses.
        A provider whose configuration is unchanged is kept, with its connections and its
        breaker; runtime changes (weights, disabled providers) are dropped: the file rules."""
        old = previous.providers if previous is not None else {}
        providers = {}
        for name, provider_config in config.providers.items():
            kept = old.get(name)
            if kept is not None and kept.config == provider_config:
                providers[name] = ProviderEntry(kept.provider, provider_config, kept.breaker)
            else:
                providers[name] = ProviderEntry(
                    make_provider(name, provider_config), provider_config, make_breaker()
                )
        routes = {
            model: RouteEntry(dict(route.providers), tuple(route.fallback), route.shadow)
            for model, route in config.routes.items()
        }
        kept_ids = {id(entry.provider) for entry in providers.values()}
        retired = [entry.provider for entry in old.values() if id(entry.provider) not in kept_ids]
        return cls(providers, routes), retired

    def route(self, model: str) -> tuple[str, RouteEntry] | None:
        """The route for a model name as a client sent it (case and -/_ ignored)."""
        wanted = normalize(model)
        for name, route in self.routes.items():
            if normalize(name) == wanted:
                return name, route
        return None

    @property
    def disabled(self) -> frozenset[str]:
        return frozenset(name for name, entry in self.providers.items() if not entry.enabled)

    def with_weights(self, model: str, weights: Mapping[str, float]) -> RoutingState:
        """New weights for a route's providers (those not named keep theirs)."""
        name, route = self._route(model)
        unknown = sorted(set(weights) - set(self.providers))
        if unknown:
            raise InvalidRequest(f"Unknown providers {unknown}.", param="weights")
        if any(weight < 0 for weight in weights.values()):
            raise InvalidRequest("Weights must not be negative.", param="weights")
        changed = replace(route, weights={**route.weights, **weights})
        return replace(self, routes={**self.routes, name: changed})

    def promoted(self, model: str, provider: str) -> RoutingState:
        """All of a route's traffic to `provider`; the others stay at 0 %, warm for a rollback
        and last in its failover order."""
        _, route = self._route(model)
        self._provider(provider)
        return self.with_weights(
            model, {name: 100.0 if name == provider else 0.0 for name in {*route.weights, provider}}
        )

    def with_enabled(self, provider: str, enabled: bool) -> RoutingState:
        entry = replace(self._provider(provider), enabled=enabled)
        return replace(self, providers={**self.providers, provider: entry})

    def describe(self) -> dict[str, Any]:
        """What the admin endpoint shows: routes, and each provider's health."""
        providers = {}
        for name, entry in self.providers.items():
            status = entry.breaker.status()
            providers[name] = {
                "kind": entry.config.kind,
                "enabled": entry.enabled,
                "breaker": {
                    "state": status.state.value,
                    "window_requests": status.requests,
                    "window_failures": status.failures,
                    "ttfa_p99": status.ttfa_p99,
                    "times_opened": status.opened,
                },
            }
        routes = {
            model: {
                "weights": dict(route.weights),
                "fallback": list(route.fallback),
                "shadow": route.shadow.model_dump() if route.shadow else None,
            }
            for model, route in self.routes.items()
        }
        return {"routes": routes, "providers": providers}

    def _route(self, model: str) -> tuple[str, RouteEntry]:
        found = self.route(model)
        if found is None:
            raise NotFound(f"No route for model {model!r}.", param="model")
        return found

    def _provider(self, name: str) -> ProviderEntry:
        entry = self.providers.get(name)
        if entry is None:
            raise NotFound(f"No provider {name!r}.", param="provider")
        return entry
