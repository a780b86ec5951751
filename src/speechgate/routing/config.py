"""The routes file (YAML or TOML), validated when it is loaded: a bad file fails the start-up
(or the reload, which then keeps the routes in force).

    providers:
      local:    {kind: local, model: espeak}
      upstream: {kind: remote, base_url: "https://tts.example/v1", api_key: "sk-...",
                 model: tts-1, voices: {alloy: nova}, timeout: 30}
      eleven:   {kind: elevenlabs, api_key: "...", models: {tts-1: eleven_flash_v2_5},
                 voices: {alloy: "21m00Tcm4TlvDq8ikWAM"}}
    breaker: {error_rate: 0.02, window: 60, min_requests: 20, open_for: 30}
    routes:
      tts-1:
        providers: {local: 95, upstream: 5}    # weights, in percent
        fallback: [local]
        shadow: {provider: upstream, percent: 10}
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Literal, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, FilePath, SecretStr, model_validator

from speechgate.routing.breaker import BreakerSettings


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LocalProviderConfig(_Strict):
    """This server's own engine pools."""

    kind: Literal["local"]
    model: str | None = None
    """Local model (or engine) name to synthesize with; default: the public name asked for."""
    voices: dict[str, str] = Field(default_factory=dict)
    """Voice names clients send -> local voice names; others pass unchanged."""


class _UpstreamConfig(_Strict):
    """What every provider reached over HTTP has."""

    voices: dict[str, str] = Field(default_factory=dict)
    """Voice names clients send -> the upstream's voice names; others pass unchanged."""
    timeout: float = Field(default=30.0, gt=0)
    """Seconds to wait for the upstream's first audio, or for its next bytes."""
    connect_timeout: float = Field(default=5.0, gt=0)
    """Seconds to wait for a connection: a dead upstream should fail over fast."""
    ca_bundle: FilePath | None = None
    """PEM file of the CA certificates that verify the upstream's TLS certificate."""
    max_connections: int = Field(default=100, ge=1)
    """Connections kept to the upstream at most (they are pooled and reused)."""


class RemoteProviderConfig(_UpstreamConfig):
    """An OpenAI-compatible server: another speechgate, OpenAI, or any compatible one."""

    kind: Literal["remote"]
    base_url: Annotated[str, Field(pattern=r"^https?://")]
    """Up to and including the API version, e.g. "https://api.openai.com/v1"."""
    api_key: SecretStr | None = None
    """Sent as `Authorization: Bearer <key>`; never logged. Clients' own keys are not sent."""
    model: str | None = None
    """Model name the upstream knows; default: the public name asked for."""


class ElevenLabsProviderConfig(_UpstreamConfig):
    """ElevenLabs' API: ElevenLabs itself, or a server speaking it (speechgate does)."""

    kind: Literal["elevenlabs"]
    base_url: Annotated[str, Field(pattern=r"^https?://")] = "https://api.elevenlabs.io"
    """Without the API version, as ElevenLabs' SDKs take it."""
    api_key: SecretStr | None = None
    """Sent as `xi-api-key`; never logged. Clients' own keys are not sent."""
    models: dict[str, str] = Field(default_factory=dict)
    """Public model names -> ElevenLabs `model_id`s."""
    model: str | None = None
    """The `model_id` for a model `models` does not list; default: the public name asked for."""
    # `voices` (inherited): speechgate voice names -> ElevenLabs `voice_id`s.


ProviderConfig = Annotated[
    LocalProviderConfig | RemoteProviderConfig | ElevenLabsProviderConfig,
    Field(discriminator="kind"),
]


class ShadowConfig(_Strict):
    provider: str
    """Provider that also gets a sampled copy of the route's requests."""
    percent: float = Field(ge=0, le=100)
    """Share of the requests copied to it."""


class RouteConfig(_Strict):
    providers: dict[str, float] = Field(min_length=1)
    """Provider -> weight in percent (weights need not sum to 100; 0 keeps a provider warm)."""
    fallback: list[str] = Field(default_factory=list)
    """Providers tried, in order, when the chosen one fails before sending anything."""
    shadow: ShadowConfig | None = None

    @model_validator(mode="after")
    def _check(self) -> Self:
        negative = [name for name, weight in self.providers.items() if weight < 0]
        if negative:
            raise ValueError(f"negative weights for {negative}")
        return self


class RoutesConfig(_Strict):
    providers: dict[str, ProviderConfig] = Field(min_length=1)
    breaker: BreakerSettings = BreakerSettings()
    """Breaker thresholds, the same for every provider."""
    routes: dict[str, RouteConfig] = Field(min_length=1)
    """Public model name (what clients send as `model`) -> its providers."""

    @model_validator(mode="after")
    def _check_names(self) -> Self:
        for model, route in self.routes.items():
            named = [*route.providers, *route.fallback]
            if route.shadow is not None:
                named.append(route.shadow.provider)
            unknown = sorted(set(named) - set(self.providers))
            if unknown:
                raise ValueError(f"route {model!r} names unknown providers {unknown}")
        return self


def load_routes(path: Path) -> RoutesConfig:
    """Read and validate a routes file; `.toml` is TOML, anything else YAML. Raises ValueError
    (pydantic's ValidationError is one) naming what is wrong."""
    text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as error:
        raise ValueError(f"{path}: not valid {path.suffix or 'YAML'}: {error}") from error
    return RoutesConfig.model_validate(data)
