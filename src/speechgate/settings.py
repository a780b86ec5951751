"""All configuration, read once from the environment (prefix `SPEECHGATE_`).

Only this module reads the environment. Build `Settings` once and pass it down; tests build
their own. Settings are grouped by concern in nested models (`settings.pool`,
`settings.wyoming`, ...), each set in the environment as `SPEECHGATE_<GROUP>__<NAME>`, so a
module can be handed the one group it needs. Deprecated flat names
(`SPEECHGATE_RAY_ADDRESS`, `Settings(max_input_chars=...)`) are still read, into their
group, with a warning naming the new name (see `MOVED`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from importlib.util import find_spec
from pathlib import Path
from typing import Annotated, Any, Literal, Self, get_origin

from pydantic import BaseModel, ConfigDict, Field, FilePath, SecretStr, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from speechgate.engines.plugin import discover

OPENAI_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")

ENV_PREFIX = "SPEECHGATE_"
NESTED_DELIMITER = "__"

log = logging.getLogger(__name__)


def known_engines() -> list[str]:
    """The engines whose plugins are installed (`speechgate.engines` entry points), those
    loaded by default first."""
    return list(discover())


def installed_engines() -> list[str]:
    """The engines loaded by default: those installed whose plugin says so, in plugin order
    (the fake engine, a tone for tests, is never one: only naming it loads it)."""
    return [plugin.id for plugin in discover().values() if plugin.default and plugin.installed()]


def engine_model_aliases() -> dict[str, str]:
    """Model names that clients of other servers send (pocket-tts' own server, Kokoro-FastAPI),
    each meaning one engine, as its plugin declares; a name applies only when its engine is
    loaded."""
    return {alias: plugin.id for plugin in discover().values() for alias in plugin.model_aliases}


def _default_voice_aliases() -> dict[str, dict[str, str]]:
    return {plugin.id: dict(plugin.voice_aliases) for plugin in discover().values()}


def usable_cores() -> int:
    """Cores this process may run on (respects taskset/cgroup affinity, unlike os.cpu_count)."""
    return len(os.sched_getaffinity(0))


def _importable(module: str) -> bool:
    try:
        return find_spec(module) is not None
    except ModuleNotFoundError:  # a dotted name whose parent package is missing
        return False


def _comma_list(value: object) -> object:
    return (
        [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, str)
        else value
    )


class _Group(BaseModel):
    # The docstrings under the fields become their descriptions (the generated reference).
    model_config = ConfigDict(use_attribute_docstrings=True, extra="ignore")


class ServerSettings(_Group):
    """The HTTP server: where it listens, how it bounds connections and requests, what it
    serves besides the API."""

    host: str = "127.0.0.1"
    """Address the HTTP server listens on."""

    port: int = Field(default=8000, ge=0, le=65535)
    """Port the HTTP server listens on."""

    max_connections: int | None = Field(default=None, ge=1)
    """Open HTTP, WebSocket and Wyoming connections allowed at once (Wyoming's share is
    `wyoming.max_connections`). Beyond it a new HTTP connection pushes out the oldest one that
    has not finished sending a request head (so half-sent requests cannot lock real clients
    out); when every connection is busy it is closed at once. Default: three quarters of this
    process's file-descriptor limit."""

    max_body_bytes: int = Field(default=1_048_576, ge=1024)
    """Largest request body accepted; larger ones are answered 413."""

    max_header_bytes: int = Field(default=16384, ge=1024)
    """Largest request line plus headers accepted; larger ones are answered 431 and closed."""

    header_timeout: float = Field(default=10.0, gt=0)
    """Seconds a connection may take to send a request's line and headers, from its first
    byte (or from connecting); then it is closed. Bounds half-sent requests (slowloris)."""

    body_timeout: float = Field(default=30.0, gt=0)
    """Seconds a request body may stop arriving before the request is answered 408 and its
    connection closed (a slow upload is fine as long as it keeps coming)."""

    shutdown_grace: float = Field(default=30.0, ge=0)
    """Seconds a shutdown (SIGTERM, Ctrl-C) waits for requests under way, a slow client's
    included, before cutting them off."""

    playground: bool = True
    """Serve the web playground and live operator view at `/` (its JSON, `GET /v1/status`, is
    served either way)."""


class LogSettings(_Group):
    """What the logs look like and how much they say."""

    format: Literal["text", "json"] = "text"
    """`text`: readable lines; `json`: one JSON object a line (`time`, `level`, `logger`,
    `message` and the record's own fields, the start-up summary's included), for a log
    collector."""

    level: Literal["debug", "info", "warning", "error"] = "info"
    """The lowest level logged; `debug` adds the libraries' start-up lines (the store's
    migrations, uvicorn's own)."""


class PoolSettings(_Group):
    """The engines' workers: where they run, how many, on which cores, how many jobs each, and
    the queue in front of them."""

    backend: Literal["local", "ray"] = "local"
    """Where engines run: "local" worker processes on this machine, or "ray" replicas of a Ray
    Serve deployment per engine, on any node of a Ray cluster (needs the `ray` extra)."""

    workers: int | None = Field(default=None, ge=1)
    """Worker processes per engine; default: usable cores // cores_per_worker (at least 1)."""

    cores_per_worker: int = Field(default=1, ge=1)
    """Cores each worker is pinned to; also its engine's thread count."""

    worker_cores: Annotated[list[int] | None, NoDecode] = None
    """Cores to pin workers to (comma-separated), e.g. to keep one core for the gateway;
    default: every core this process may use."""

    elastic_threads: bool = True
    """A job that runs alone in its engine's pool computes on every worker core (and is
    narrowed to its worker's own cores as soon as another job starts); off: every job keeps
    to its worker's `pool.cores_per_worker` cores, whatever the load."""

    jobs_per_worker: int = Field(default=4, ge=1)
    """Jobs one local worker runs at once, a segment (sentence) at a time each, a new job's
    first segment first: so a short request starts speaking while long ones are under way,
    instead of waiting for a whole job to end. The default lets 8 clients on 2 workers all be
    speaking at once; throughput is the same (one engine, one segment at a time). A worker
    takes a second job only once its engine has been timed at more than twice real time per
    job it would hold, so every stream stays faster than real time: Piper and espeak-ng share,
    pocket-tts and Kokoro on one core do not. 1: one job at a time, the rest wait in the
    queue. Keep `pool.loaded_voices` at least this large, or jobs
    in different voices on one worker reload their models in turn. Not used by the Ray
    backend."""

    loaded_voices: int = Field(default=4, ge=1)
    """Voice models one worker keeps loaded (least recently used first out); a request for
    another loads it on the spot. Bounds a worker's memory: a Piper voice is ~60-120 MB."""

    queue_size: int = Field(default=16, ge=0)
    """Requests allowed to wait for a worker, per engine: a hard cap whatever their predicted
    wait. Beyond it: 429 with Retry-After."""

    max_queue_wait: float = Field(default=30.0, gt=0)
    """Longest predicted wait for a worker a request is admitted with (the work queued ahead
    over the workers' measured speed); one predicted to wait longer is answered 429 at once,
    with that prediction as Retry-After. Admitted requests wait their turn: only a pool that
    serves nobody for `pool.job_timeout` + 10 x this answers them 503 `queue_stalled`."""

    max_retry_after: float = Field(default=30.0, ge=1)
    """Longest Retry-After a request refused for capacity is told (429 `queue_full`): a
    prediction further out is mostly error, and a client told minutes goes elsewhere. The
    workers are shared fairly between callers (an API key; an unauthenticated client's
    address; Wyoming's connections together), so one caller's flood delays its own requests,
    not others' (docs/admission.md)."""

    stall_timeout: float = Field(default=15.0, gt=0)
    """Seconds a local worker may send nothing, not even the heartbeat it sends every fifth of
    this while it lives (whatever its engine computes), before it is taken for wedged: killed
    and replaced, its clients answered 503 `worker_stalled` with Retry-After."""

    job_timeout: float = Field(default=300.0, gt=0)
    """Seconds of synthesis one job may take before its worker is killed and restarted. Time
    its worker spends paused for a slow reader does not count (see `pool.slow_reader_timeout`)."""

    slow_reader_timeout: float = Field(default=60.0, gt=0)
    """Seconds a client may read nothing while its job's audio waits for it; then the job is
    cancelled (its worker freed) and its connection dropped."""

    @model_validator(mode="before")
    @classmethod
    def _split_cores(cls, data: object) -> object:
        if isinstance(data, dict) and "worker_cores" in data:
            data = {**data, "worker_cores": _comma_list(data["worker_cores"])}
        return data

    @property
    def worker_count(self) -> int:
        """Worker processes per engine: `workers`, or as many as the cores allow."""
        return self.workers or max(1, self.pool_cores // self.cores_per_worker)

    @property
    def pool_cores(self) -> int:
        """The cores an engine's workers share out."""
        return len(self.worker_cores) if self.worker_cores else usable_cores()


class RaySettings(_Group):
    """The Ray backend (`pool.backend` `ray`): the cluster and its replicas."""

    address: str | None = None
    """Ray cluster to join: "head:6379" (what `ray start --head` prints), or "auto" for the one
    `ray start` runs on this machine; unset: start a local Ray instance with this machine's
    cores."""

    replicas: int | None = Field(default=None, ge=1)
    """Replicas per engine on Ray, each running one job at a time on `pool.cores_per_worker` cores;
    default: as many as local `pool.workers`. With `ray.max_replicas`, the fewest the autoscaler
    keeps."""

    max_replicas: int | None = Field(default=None, ge=1)
    """Autoscale each engine between `ray.replicas` and this many replicas, aiming at one job
    per replica; unset: a fixed replica count."""

    health_check_period: float = Field(default=10.0, gt=0)
    """Seconds between Ray Serve's health checks of each replica. A replica whose process died
    is replaced only once a check finds it gone, so this bounds how long jobs queue behind a
    dead one (Serve's own default is 10)."""


class TextSettings(_Group):
    """How a request's input is bounded and read before an engine speaks it."""

    max_input_chars: int = Field(default=4096, ge=1)
    """Longest `input` accepted (OpenAI's limit is 4096)."""

    normalization: bool = True
    """Read text as meant before speaking it ("$5.20" as "five dollars and twenty cents",
    dates, times, units, abbreviations; see docs/text.md) when a request leaves it to the
    server (`apply_text_normalization` absent or `auto`); off: as written."""

    lexicon_path: FilePath | None = None
    """Pronunciation lexicon applied to every request: a PLS file (`.pls`, `.xml`, what
    ElevenLabs' add-from-file takes) or JSON/YAML rules in ElevenLabs' shape (`[{"type":
    "alias", "string_to_replace": "nginx", "alias": "engine x"}, ...]`). A key's and a
    request's dictionaries override its rules for the same word. Checked at start-up (invalid
    IPA, looping aliases, over 1 MB or 5,000 rules are refused). See docs/text.md."""

    @model_validator(mode="after")
    def _check_lexicon(self) -> Self:
        if self.lexicon_path is not None:
            from speechgate.text.lexicon import InvalidLexicon, load_lexicon

            try:
                load_lexicon(self.lexicon_path)
            except InvalidLexicon as error:
                raise ValueError(f"text.lexicon_path: {error}") from None
        return self


class AudioSettings(_Group):
    """The audio answered: its default rate and loudness."""

    default_sample_rate: int = Field(default=24000, ge=8000, le=48000)
    """Output rate when a request does not ask for one (OpenAI clients assume 24 kHz)."""

    loudness_target_lufs: float | None = Field(default=None, ge=-40.0, le=-5.0)
    """Integrated loudness (LUFS, EBU R128) toward which each segment of speech is normalized,
    so sentences and voices come out evenly loud (e.g. -18; -16 is common for podcasts). Each
    segment's gain is bounded to +/-12 dB and keeps its peaks at or below -1 dBFS; a segment's
    audio is held until all of it exists. Needs the `loudness` extra (pyloudnorm). None: each
    engine's own level."""


class PhraseCacheSettings(_Group):
    """The phrase cache (`speechgate.phrase_cache`): repeated phrases answered without a
    worker."""

    max_bytes: int = Field(default=64 * 1024 * 1024, ge=0)
    """Bytes of rendered PCM kept in memory for repeated phrases, answered without a worker;
    0: no cache."""

    persist: bool = False
    """Also keep the cached phrases' PCM under `<data_dir>/phrase-cache/` (within `max_bytes`
    there too), read back at start-up: a restarted server answers them from its first
    request."""

    random: bool = False
    """Also cache engines that sample randomly (pocket-tts) for requests without a seed: a
    repeat then sounds the same instead of differing as a fresh take would."""

    preload: Annotated[list[str], NoDecode] = Field(default_factory=list)
    """Phrases rendered into the cache at start-up, pinned (never evicted), with the default
    model and each voice of `phrase_cache.preload_voices`: one per line (a newline-separated list in
    the environment)."""

    preload_voices: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["alloy"])
    """The voices `phrase_cache.preload` is rendered with (comma-separated in the environment)."""

    @model_validator(mode="before")
    @classmethod
    def _split_lists(cls, data: object) -> object:
        if isinstance(data, dict):
            if "preload_voices" in data:
                data = {**data, "preload_voices": _comma_list(data["preload_voices"])}
            if isinstance(data.get("preload"), str):
                lines = data["preload"].splitlines()
                data = {**data, "preload": [line for line in lines if line.strip()]}
        return data


class HubSettings(_Group):
    """Voices and models pulled by name from the Hugging Face hub (`speechgate voices pull`)."""

    auto_pull: bool = False
    """Pull a voice or model that is asked for by name but not installed, on first request
    (from the Hugging Face hub); off: such a request is refused with how to pull it."""

    endpoint: str | None = None
    """The Hugging Face hub (or a mirror) pulls download from, e.g. `https://hf-mirror.com`;
    unset: huggingface_hub's own default (`HF_ENDPOINT`, else https://huggingface.co)."""


class CloningSettings(_Group):
    """Voice cloning: the samples voices are cloned from."""

    min_speech_seconds: float = Field(default=3.0, ge=0.5)
    """Seconds of speech (20 ms frames louder than -40 dBFS) a clip needs to be cloned."""

    max_upload_bytes: int = Field(default=10 * 1024 * 1024, ge=1024)
    """Largest audio file `POST /v1/audio/voices` accepts (OpenAI's limit is 10 MiB)."""

    max_decodes: int = Field(default=2, ge=1)
    """Voice samples (uploads and `reference_audio`) decoded at once, each in a thread; more
    wait their turn. Each holds at most the engine's longest prompt plus 5 s of PCM."""


class LlmSettings(_Group):
    """The LLM server `POST /v1/chat/completions` is relayed to."""

    base_url: str | None = None
    """Base URL of an OpenAI-compatible LLM server that `POST /v1/chat/completions` is relayed
    to, e.g. "http://127.0.0.1:11434/v1" (Ollama). Unset, that route answers 404."""

    api_key: SecretStr | None = None
    """Sent to the LLM server as `Authorization: Bearer <key>`; never logged. Clients' own keys
    are never forwarded."""

    ca_bundle: FilePath | None = None
    """PEM file of the CA certificates that verify the LLM server's TLS certificate (a private
    CA, say), trusted instead of httpx's default bundle."""

    timeout: float = Field(default=120.0, gt=0)
    """Seconds to wait for the LLM server to connect or to send its next bytes. A streamed
    completion may take longer in all, as long as tokens keep coming."""

    @model_validator(mode="after")
    def _check_llm(self) -> Self:
        if self.base_url is None:
            if self.api_key is not None or self.ca_bundle is not None:
                raise ValueError("llm.api_key and llm.ca_bundle need llm.base_url")
        elif not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"llm.base_url must be an http(s) URL, not {self.base_url!r}")
        return self


class AuthSettings(_Group):
    """Who may call: API keys, the admin key, and how long a key looked up is trusted."""

    mode: Literal["none", "keys"] = "none"
    """`none`: every /v1 route is open (a laptop). `keys`: /v1 routes need
    `Authorization: Bearer sk-sg-...`, a key made with `speechgate keys create`."""

    admin_key: SecretStr | None = None
    """Bearer token for the admin API (/v1/admin/...) and the all-keys usage report; at least
    32 characters. Unset, the admin API answers 404."""

    key_cache_ttl: float = Field(default=5.0, ge=0)
    """Seconds a key looked up in the store is trusted before it is read again: how long a
    `speechgate keys revoke|update` from another process takes to reach a running server
    (the admin API's changes apply at once)."""

    @model_validator(mode="after")
    def _check_admin_key(self) -> Self:
        if self.admin_key is not None and len(self.admin_key.get_secret_value()) < 32:
            raise ValueError("auth.admin_key must be at least 32 characters long")
        return self


class StoreSettings(_Group):
    """Where keys, usage and per-key limit counters are kept."""

    database_url: str | None = None
    """SQLAlchemy URL of the key and usage store, e.g.
    `postgresql://user:pass@host/speechgate`; default: the SQLite file
    `<data_dir>/speechgate.db`."""

    limits_url: str | None = None
    """Redis URL where per-key limits are kept, e.g. `redis://127.0.0.1:6379/0` (needs the
    `redis` extra): every gateway pointed at it shares each key's request rate, concurrency cap
    and monthly quota, exactly. Unset, each server process counts its own, in memory."""

    @model_validator(mode="after")
    def _check_limits_url(self) -> Self:
        if self.limits_url is not None and not self.limits_url.startswith(
            ("redis://", "rediss://", "unix://")
        ):
            raise ValueError(
                "store.limits_url must be a redis://, rediss:// or unix:// URL, "
                f"not {self.limits_url!r}"
            )
        return self


class UsageSettings(_Group):
    """Usage records and what they cost."""

    metering: bool = True
    """Record one usage row per speech request (also with auth_mode `none`)."""

    flush_interval: float = Field(default=1.0, gt=0)
    """Seconds between batched writes of usage records; a crash loses at most this much."""

    prices: dict[str, float] = Field(default_factory=dict)
    """USD per 1M input characters, by `provider/model` or `model` (JSON in the environment),
    e.g. `{"local/tts-1": 0.5}`; unlisted models cost 0 (local engines)."""

    compute_cost_per_hour: float = Field(default=0.0, ge=0)
    """USD per hour of synthesis (request time), added to the cost of every request."""

    reference_prices: dict[str, float] = Field(
        default_factory=lambda: {
            "OpenAI tts-1": 15.0,
            "OpenAI tts-1-hd": 30.0,
            "ElevenLabs Creator": 300.0,
        }
    )
    """USD per 1M characters of other services, for "what this would have cost there" in
    usage reports (defaults: public list prices)."""


class SessionSettings(_Group):
    """Streaming sessions (`WS /v1/audio/speech/stream`, a Wyoming stream)."""

    check_interval: float = Field(default=1.0, gt=0, le=60)
    """Seconds between re-checks of the key of an open streaming session
    (`WS /v1/audio/speech/stream`; a Wyoming stream's `wyoming.principal`): a key revoked,
    expired or no longer allowed the session's model closes the session at the next check. A
    change made by another process reaches it within `auth.key_cache_ttl` more."""

    max_seconds: float = Field(default=3600.0, gt=0)
    """Longest a streaming session (or Wyoming stream) stays open; then it is closed with a
    `session_expired` error event (close code 1000), and the client may open a new one."""

    max_lead_seconds: float = Field(default=2.0, ge=0)
    """Seconds of audio a streaming session sends ahead of real time at most (as if the client
    played each piece as it came): a client reading faster gets the rest at real time. This
    bounds the audio in flight, which is what a client still hears after the server closes its
    session (a key revoked, the maximum length reached) and before the close reaches it.
    0: as fast as the client reads."""


class WyomingSettings(_Group):
    """Home Assistant's Wyoming protocol, served beside HTTP (docs/wyoming.md)."""

    uri: str | None = Field(default=None, pattern=r"^tcp://[^/:]+:\d+$")
    """Also serve Home Assistant's Wyoming protocol here, e.g. `tcp://127.0.0.1:10200` (None:
    off). Wyoming has no authentication: anyone who can reach this address can synthesize, as
    `wyoming.principal` (see docs/wyoming.md)."""

    zeroconf: bool = False
    """Advertise the Wyoming server over zeroconf (mDNS, `_wyoming._tcp.local.`) so Home
    Assistant discovers it; announced only on the interface of `wyoming.uri`'s address (on
    every interface for 0.0.0.0)."""

    principal: str | None = None
    """The id of the key (`speechgate keys create`) that Wyoming connections act for, since
    the protocol carries no key: its limits (rate, concurrency, quota, models) apply to them,
    its stored voices are theirs, and its usage is theirs. None: they act for no key, with no
    key's limits, and see no key's stored voices (with `auth.mode` `keys`, only the engines'
    own voices; with `none`, every voice, as an HTTP request does)."""

    max_connections: int | None = Field(default=None, ge=1)
    """Wyoming connections open at once, taken out of `server.max_connections` (HTTP gets the rest).
    Beyond it a new connection pushes out the oldest idle one (one with no synthesis to
    answer), or is closed at once when every one is busy. Default: a quarter of the budget."""

    idle_timeout: float = Field(default=60.0, gt=0)
    """Seconds a Wyoming connection may stay open with nothing received and nothing sent
    (and no synthesis to answer); then it is closed."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        given = [
            f"wyoming.{name}"
            for name in ("principal", "max_connections")
            if getattr(self, name) is not None
        ]
        if self.uri is None and given:
            raise ValueError(f"{', '.join(given)} need wyoming.uri")
        if self.zeroconf:
            if self.uri is None:
                raise ValueError("wyoming.zeroconf needs wyoming.uri")
            if int(self.uri.rsplit(":", 1)[1]) == 0:
                raise ValueError("wyoming.zeroconf needs a fixed port in wyoming.uri, not 0")
        return self


class RoutingSettings(_Group):
    """Provider routing (`speechgate.routing`): public model names served by local or remote
    providers."""

    routes_file: FilePath | None = None
    """YAML (or `.toml`) file of providers and routes: public model names served by weighted
    local or remote providers, with failover, circuit breakers and shadow traffic (format in
    `speechgate/routing/config.py`). Validated at start-up, re-read on SIGHUP. Unset, every
    model is served by this server's engines. `/v1/admin/routing` (the admin key) and
    `speechgate routing` change the routes at run time."""


class TracingSettings(_Group):
    """OpenTelemetry traces of speech requests (docs/tracing.md)."""

    otlp_endpoint: str | None = Field(
        default_factory=lambda: os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None
    )
    """OpenTelemetry collector to send a trace of every speech request to, over OTLP/HTTP
    (protobuf): its base URL, e.g. `http://127.0.0.1:4318` (traces go to `/v1/traces` under
    it), as in the standard `OTEL_EXPORTER_OTLP_ENDPOINT`, which is the default. Unset: no
    tracing. Needs the `otel` extra (docs/tracing.md)."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.otlp_endpoint is not None and not self.otlp_endpoint.startswith(
            ("http://", "https://")
        ):
            raise ValueError(
                "tracing.otlp_endpoint must be an http(s) URL (OTLP/HTTP), "
                f"not {self.otlp_endpoint!r}"
            )
        return self


MOVED: dict[str, tuple[str, str]] = {
    "host": ("server", "host"),
    "port": ("server", "port"),
    "max_connections": ("server", "max_connections"),
    "max_body_bytes": ("server", "max_body_bytes"),
    "max_header_bytes": ("server", "max_header_bytes"),
    "header_timeout": ("server", "header_timeout"),
    "body_timeout": ("server", "body_timeout"),
    "shutdown_grace": ("server", "shutdown_grace"),
    "playground": ("server", "playground"),
    "log_format": ("log", "format"),
    "log_level": ("log", "level"),
    "backend": ("pool", "backend"),
    "workers": ("pool", "workers"),
    "cores_per_worker": ("pool", "cores_per_worker"),
    "worker_cores": ("pool", "worker_cores"),
    "elastic_threads": ("pool", "elastic_threads"),
    "jobs_per_worker": ("pool", "jobs_per_worker"),
    "loaded_voices": ("pool", "loaded_voices"),
    "queue_size": ("pool", "queue_size"),
    "max_queue_wait": ("pool", "max_queue_wait"),
    "max_retry_after": ("pool", "max_retry_after"),
    "stall_timeout": ("pool", "stall_timeout"),
    "job_timeout": ("pool", "job_timeout"),
    "slow_reader_timeout": ("pool", "slow_reader_timeout"),
    "ray_address": ("ray", "address"),
    "ray_replicas": ("ray", "replicas"),
    "ray_max_replicas": ("ray", "max_replicas"),
    "ray_health_check_period": ("ray", "health_check_period"),
    "max_input_chars": ("text", "max_input_chars"),
    "text_normalization": ("text", "normalization"),
    "lexicon_path": ("text", "lexicon_path"),
    "default_sample_rate": ("audio", "default_sample_rate"),
    "loudness_target_lufs": ("audio", "loudness_target_lufs"),
    "phrase_cache_bytes": ("phrase_cache", "max_bytes"),
    "phrase_cache_random": ("phrase_cache", "random"),
    "phrase_preload": ("phrase_cache", "preload"),
    "phrase_preload_voices": ("phrase_cache", "preload_voices"),
    "auto_pull": ("hub", "auto_pull"),
    "hub_endpoint": ("hub", "endpoint"),
    "clone_min_speech_seconds": ("cloning", "min_speech_seconds"),
    "clone_max_upload_bytes": ("cloning", "max_upload_bytes"),
    "clone_max_decodes": ("cloning", "max_decodes"),
    "llm_base_url": ("llm", "base_url"),
    "llm_api_key": ("llm", "api_key"),
    "llm_ca_bundle": ("llm", "ca_bundle"),
    "llm_timeout": ("llm", "timeout"),
    "auth_mode": ("auth", "mode"),
    "admin_key": ("auth", "admin_key"),
    "key_cache_ttl": ("auth", "key_cache_ttl"),
    "database_url": ("store", "database_url"),
    "limits_url": ("store", "limits_url"),
    "usage_metering": ("usage", "metering"),
    "usage_flush_interval": ("usage", "flush_interval"),
    "prices": ("usage", "prices"),
    "compute_cost_per_hour": ("usage", "compute_cost_per_hour"),
    "reference_prices": ("usage", "reference_prices"),
    "session_check_interval": ("sessions", "check_interval"),
    "max_session_seconds": ("sessions", "max_seconds"),
    "session_max_lead_seconds": ("sessions", "max_lead_seconds"),
    "wyoming_uri": ("wyoming", "uri"),
    "wyoming_zeroconf": ("wyoming", "zeroconf"),
    "wyoming_principal": ("wyoming", "principal"),
    "wyoming_max_connections": ("wyoming", "max_connections"),
    "wyoming_idle_timeout": ("wyoming", "idle_timeout"),
    "routes_file": ("routing", "routes_file"),
    "otel_endpoint": ("tracing", "otlp_endpoint"),
}
"""Deprecated flat names -> (group, name in it). They are still read, as keyword arguments
and as `SPEECHGATE_<FLAT NAME>` variables, so that existing deployments keep working; each
logs one warning per process, naming its replacement."""

_warned: set[str] = set()


def new_variable(group: str, name: str) -> str:
    """The environment variable of `settings.<group>.<name>`."""
    return f"{ENV_PREFIX}{group.upper()}{NESTED_DELIMITER}{name.upper()}"


def _warn_moved(old: str, new: str) -> None:
    if old not in _warned:
        _warned.add(old)
        log.warning("setting %s is deprecated: use %s", old, new)


def _merged(group: object, name: str, value: object) -> dict[str, Any]:
    """`group` (a dict of values or a group model given whole) with `name` set to `value`."""
    values = group.model_dump(exclude_unset=True) if isinstance(group, BaseModel) else group
    return {**(values if isinstance(values, dict) else {}), name: value}


class _MovedEnvironment(PydanticBaseSettingsSource):
    """The `SPEECHGATE_<FLAT NAME>` variables of `MOVED`, read into their groups. It ranks
    below the environment's own source, so that a group's new variable wins over its old
    name."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # unused: __call__ reads every moved name itself

    def __call__(self) -> dict[str, Any]:
        # Case-insensitive, as pydantic-settings reads the others.
        environment = {key.upper(): value for key, value in os.environ.items()}
        found: dict[str, dict[str, Any]] = {}
        for old, (group, name) in MOVED.items():
            variable = f"{ENV_PREFIX}{old.upper()}"
            value: Any = environment.get(variable)
            if value is None:
                continue
            _warn_moved(variable, new_variable(group, name))
            if _is_table(group_model(group).model_fields[name]):
                # An invalid one is left to validation, which names the setting.
                with contextlib.suppress(ValueError):
                    value = json.loads(value)
            found.setdefault(group, {})[name] = value
        return found


def group_model(group: str) -> type[BaseModel]:
    """The model of `settings.<group>`."""
    model = Settings.model_fields[group].annotation
    assert isinstance(model, type) and issubclass(model, BaseModel), group
    return model


def _is_table(field: FieldInfo) -> bool:
    """Whether the field is a dict, which the environment spells as JSON."""
    return get_origin(field.annotation) is dict


class Settings(BaseSettings):
    """speechgate's settings. A top-level field is set as `SPEECHGATE_<FIELD>` in the
    environment, a group's as `SPEECHGATE_<GROUP>__<FIELD>`."""

    # The docstrings under the fields become their descriptions: the settings reference in
    # docs/ is generated from them (scripts/docs_hooks.py).
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=NESTED_DELIMITER,
        extra="ignore",
        use_attribute_docstrings=True,
    )

    engines: Annotated[list[str], NoDecode] = Field(default_factory=lambda: installed_engines())
    """Engines to load, comma-separated in the environment. Each gets its own worker pool.
    Default: every installed engine (the base install has piper and espeak; kokoro and pocket
    come with their extras), pocket only once it has a model (pulled, or in `engine_options`)."""

    default_engine: str = ""
    """Engine that OpenAI model names (tts-1, ...) resolve to, unless `model_aliases` remaps.
    Empty: the first of `engines`."""

    model_aliases: dict[str, str] = Field(default_factory=dict)
    """Extra or overriding model names, mapped to an engine id (JSON in the environment)."""

    voice_aliases: dict[str, dict[str, str]] = Field(default_factory=_default_voice_aliases)
    """Per engine: voice name clients may send (e.g. OpenAI's "alloy", or "en_us_female": a
    generic `<language>_<gender>`) -> the engine's voice id. Replaces the whole default table."""

    engine_options: dict[str, dict[str, str]] = Field(default_factory=dict)
    """Per engine, options passed to it when it loads (JSON in the environment), e.g.
    `{"piper": {"model": "/voices/en_GB-alan.onnx"}, "pocket": {"config": "/m/pocket.yaml",
    "quantize": "true"}, "kokoro": {"model": "...", "voices": "..."}}`. Each engine's plugin
    lists the options it takes (`EnginePlugin.options`); others are refused here."""

    data_dir: Path = Path.home() / ".local" / "share" / "speechgate"
    """Where speechgate keeps its state (cloned voices in `voices/`, assembled models in
    `engines/`)."""

    server: ServerSettings = Field(default_factory=ServerSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    pool: PoolSettings = Field(default_factory=PoolSettings)
    ray: RaySettings = Field(default_factory=RaySettings)
    text: TextSettings = Field(default_factory=TextSettings)
    audio: AudioSettings = Field(default_factory=AudioSettings)
    phrase_cache: PhraseCacheSettings = Field(default_factory=PhraseCacheSettings)
    hub: HubSettings = Field(default_factory=HubSettings)
    cloning: CloningSettings = Field(default_factory=CloningSettings)
    llm: LlmSettings = Field(default_factory=LlmSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    store: StoreSettings = Field(default_factory=StoreSettings)
    usage: UsageSettings = Field(default_factory=UsageSettings)
    sessions: SessionSettings = Field(default_factory=SessionSettings)
    wyoming: WyomingSettings = Field(default_factory=WyomingSettings)
    routing: RoutingSettings = Field(default_factory=RoutingSettings)
    tracing: TracingSettings = Field(default_factory=TracingSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        moved = _MovedEnvironment(settings_cls)
        return init_settings, env_settings, moved, dotenv_settings, file_secret_settings

    @model_validator(mode="before")
    @classmethod
    def _move_old_names(cls, data: object) -> object:
        # Old names given as keyword arguments (or to model_validate) outrank any value their
        # group got from the environment, as every keyword argument does.
        if isinstance(data, dict) and not MOVED.keys().isdisjoint(data):
            data = dict(data)
            for old in [key for key in data if key in MOVED]:
                group, name = MOVED[old]
                _warn_moved(f"Settings({old}=...)", f"Settings({group}={{{name!r}: ...}})")
                data[group] = _merged(data.get(group, {}), name, data.pop(old))
        return data

    @model_validator(mode="before")
    @classmethod
    def _split_lists(cls, data: object) -> object:
        if isinstance(data, dict) and "engines" in data:
            data = {**data, "engines": _comma_list(data["engines"])}
        return data

    @model_validator(mode="after")
    def _check(self) -> Self:
        plugins = discover()
        if not plugins:
            raise ValueError(
                "no engine plugin is installed (entry points `speechgate.engines`): reinstall "
                "speechgate (`make setup`, or `pip install -e .` in a checkout)"
            )
        unknown = [name for name in self.engines if name not in plugins]
        if unknown:
            raise ValueError(f"unknown engines {unknown}; installed: {list(plugins)}")
        chosen = "engines" in self.model_fields_set
        if not chosen:
            # An engine that is installed but cannot load yet (pocket-tts without weights)
            # could only fail to start.
            self.engines = [name for name in self.engines if self._ready(name)]
        if not self.engines:
            raise ValueError(
                "at least one engine must be configured"
                if chosen
                else "no engine is installed: speechgate's own dependencies bring piper and "
                "espeak (reinstall it), its extras [kokoro] and [pocket] the others"
            )
        if not self.default_engine:
            self.default_engine = self.engines[0]
        elif self.default_engine not in self.engines:
            raise ValueError(
                f"default_engine {self.default_engine!r} is not in engines {self.engines}"
            )
        unknown_options = set(self.engine_options) - set(plugins)
        if unknown_options:
            raise ValueError(
                f"engine_options name unknown engines: {sorted(unknown_options)}; "
                f"installed: {list(plugins)}"
            )
        for name, options in self.engine_options.items():
            plugins[name].check_options(options)
        bad_targets = {m: e for m, e in self.model_aliases.items() if e not in self.engines}
        if bad_targets:
            raise ValueError(f"model_aliases point at engines that are not loaded: {bad_targets}")
        return self

    def _ready(self, name: str) -> bool:
        ready = discover()[name].ready
        return ready is None or ready(self.models_dir, self.engine_options.get(name))

    @model_validator(mode="after")
    def _check_extras(self) -> Self:
        # Settings that need an optional package say which extra, before anything starts.
        needs = [
            (
                "audio.loudness_target_lufs",
                self.audio.loudness_target_lufs is not None,
                "pyloudnorm",
                "loudness",
            ),
            ("wyoming.uri", self.wyoming.uri is not None, "wyoming", "wyoming"),
            (
                "tracing.otlp_endpoint",
                self.tracing.otlp_endpoint is not None,
                "opentelemetry.exporter.otlp.proto.http",
                "otel",
            ),
            (
                "store.database_url",
                (self.store.database_url or "").startswith("postgresql"),
                "psycopg",
                "postgres",
            ),
        ]
        for name, used, module, extra in needs:
            if used and not _importable(module):
                raise ValueError(f"{name} needs {module}: install speechgate[{extra}]")
        return self

    @model_validator(mode="after")
    def _check_wyoming(self) -> Self:
        cap, budget = self.wyoming.max_connections, self.server.max_connections
        if cap is not None and budget is not None and cap >= budget:
            raise ValueError(
                f"wyoming.max_connections ({cap}) must be below server.max_connections "
                f"({budget}): it is Wyoming's share of them, and HTTP needs the rest"
            )
        return self

    @model_validator(mode="after")
    def _check_ray(self) -> Self:
        ray_fields = ("address", "replicas", "max_replicas")
        given = [f"ray.{name}" for name in ray_fields if getattr(self.ray, name) is not None]
        if self.pool.backend != "ray" and given:
            raise ValueError(f"{', '.join(given)} need pool.backend 'ray'")
        if self.pool.backend == "ray" and self.pool.queue_size < 1:
            raise ValueError(
                "pool.backend 'ray' needs pool.queue_size >= 1 (Ray Serve cannot queue none)"
            )
        if self.ray.max_replicas is not None and self.ray.max_replicas < self.replica_count:
            raise ValueError(
                f"ray.max_replicas ({self.ray.max_replicas}) is below ray.replicas "
                f"({self.replica_count})"
            )
        return self

    @property
    def store_url(self) -> str:
        """The key and usage store: `store.database_url`, or SQLite in the data directory."""
        return self.store.database_url or f"sqlite:///{self.data_dir / 'speechgate.db'}"

    @property
    def replica_count(self) -> int:
        """Replicas per engine on Ray (the minimum, when autoscaling)."""
        return self.ray.replicas or self.pool.worker_count

    @property
    def voices_dir(self) -> Path:
        return self.data_dir / "voices"

    @property
    def models_dir(self) -> Path:
        """Where pulled voices and models are installed (see `speechgate.voices.installed`)."""
        return self.data_dir / "models"

    @property
    def hub_cache_dir(self) -> Path:
        """The Hugging Face cache pulls download into (partial files resume from here)."""
        return self.data_dir / "hub"

    def resolved_model_aliases(self) -> dict[str, str]:
        """OpenAI model names -> default engine, other servers' names for the loaded engines
        (`pocket-tts`, `kokoro-82m`), then the configured overrides."""
        loaded = {alias: e for alias, e in engine_model_aliases().items() if e in self.engines}
        return {
            **dict.fromkeys(OPENAI_MODELS, self.default_engine),
            **loaded,
            **self.model_aliases,
        }
