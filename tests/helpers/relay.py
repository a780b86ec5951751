"""Two speechgate servers on loopback, the front one routing to the other: what the relay
tests share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import openai

from tests.helpers.server import RunningServer
from tests.helpers.settings import make_settings, merged

ADMIN_KEY = "admin-key-of-at-least-32-characters"
TEXT = "The quick brown fox jumps over the lazy dog."


def engine_settings(engine: str = "fake", **overrides: object) -> Any:
    defaults = {"engines": [engine], "default_engine": engine, "pool": {"workers": 1}}
    return make_settings(**merged(defaults, overrides))


@dataclass
class Pair:
    front: RunningServer
    upstream_url: str

    def admin(self, method: str, path: str, **kwargs: Any) -> Any:
        response = httpx.request(
            method,
            f"{self.front.url}/v1/admin/routing{path}",
            headers={"Authorization": f"Bearer {ADMIN_KEY}"},
            **kwargs,
        )
        response.raise_for_status()
        return response.json()

    def breaker(self, provider: str) -> str:
        state: str = self.admin("GET", "")["providers"][provider]["breaker"]["state"]
        return state


def speak(
    client: openai.OpenAI, model: str, request_id: str, text: str = TEXT, voice: str = "alloy"
) -> Any:
    """A whole (non-streamed) request; returns the raw response (headers and body)."""
    return client.audio.speech.with_raw_response.create(
        model=model,
        voice=voice,
        input=text,
        response_format="wav",
        extra_headers={"x-request-id": request_id},
    )
