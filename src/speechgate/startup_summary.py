"""What a server says once it has started: what it serves, where, and how it is guarded."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from speechgate import __version__
from speechgate.catalog import Catalog
from speechgate.settings import Settings

# Voice names shown per engine: enough to recognise it, short enough for one line.
_EXAMPLES = 3


@dataclass(frozen=True)
class EngineSummary:
    name: str
    voices: int
    examples: tuple[str, ...]
    default: bool  # behind tts-1 and OpenAI's other model names

    def text(self) -> str:
        names = list(self.examples) + (["..."] if self.voices > len(self.examples) else [])
        return (
            f"{self.name}{' (default)' if self.default else ''}: {self.voices} "
            f"{'voice' if self.voices == 1 else 'voices'}"
            + (f" ({', '.join(names)})" if names else "")
        )


@dataclass(frozen=True)
class StartupSummary:
    version: str
    url: str
    engines: tuple[EngineSummary, ...]
    playground: str | None  # None: turned off
    api_docs: str
    keys: bool
    admin_api: bool
    data_dir: Path
    wyoming: str | None

    def text(self) -> str:
        """A few aligned lines for a terminal."""
        rows = [
            ("engines", "; ".join(engine.text() for engine in self.engines)),
            ("openai", f"base_url={self.url}/v1"),
            ("playground", self.playground or "off (SPEECHGATE_SERVER__PLAYGROUND=false)"),
            ("api docs", self.api_docs),
            (
                "keys",
                ("on: /v1 needs a key (speechgate keys create)" if self.keys else "off: open")
                + f"; admin API {'on' if self.admin_api else 'off'}",
            ),
            ("data", str(self.data_dir)),
        ]
        if self.wyoming is not None:
            rows.append(("wyoming", self.wyoming))
        width = max(len(label) for label, _ in rows)
        lines = [f"speechgate {self.version} serving on {self.url}"]
        lines += [f"  {label:<{width}}  {value}" for label, value in rows]
        return "\n".join(lines)

    def fields(self) -> dict[str, Any]:
        """The same for a JSON log line."""
        fields = asdict(self)
        fields["data_dir"] = str(self.data_dir)
        return fields


def _browsable_host(host: str) -> str:
    """An address a browser on this machine reaches the server at."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def startup_summary(settings: Settings, catalog: Catalog) -> StartupSummary:
    """What `settings` serve, with the voices `catalog` found in each engine."""
    url = f"http://{_browsable_host(settings.server.host)}:{settings.server.port}"
    engines = []
    for name in settings.engines:
        voices = [entry.id for entry in catalog.voices(name)]
        # The voice OpenAI's `alloy` speaks with first: the one a first request hears.
        first = settings.voice_aliases.get(name, {}).get("alloy")
        if first in voices:
            voices.remove(first)
            voices.insert(0, first)
        engines.append(
            EngineSummary(
                name, len(voices), tuple(voices[:_EXAMPLES]), name == settings.default_engine
            )
        )
    return StartupSummary(
        version=__version__,
        url=url,
        engines=tuple(engines),
        playground=f"{url}/" if settings.server.playground else None,
        api_docs=f"{url}/docs",
        keys=settings.auth.mode == "keys",
        admin_api=settings.auth.admin_key is not None,
        data_dir=settings.data_dir,
        wyoming=settings.wyoming.uri,
    )
