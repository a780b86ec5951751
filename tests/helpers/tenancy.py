"""Keys, tenancy and usage through the HTTP API (of a real server, or of the app in-process):
what the tenancy tests share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import httpx2
import openai
import pytest

from speechgate.metering.key_secrets import KeyLimits
from speechgate.metering.records import UsageRecord
from speechgate.metering.store import Store
from speechgate.metering.tenancy import Tenancy
from tests.helpers.audio import decode_audio
from tests.helpers.inprocess import InProcessApp, http_client, sdk
from tests.helpers.server import RunningServer

Served = InProcessApp | RunningServer

ADMIN_KEY = "sg-admin-" + "k" * 40
SHORT = "Hello there."
# With `held`: many minutes of 48 kHz PCM, tens of MB, far more than socket buffers hold,
# so the stream is still running for as long as the client does not read.
LONG = " ".join(f"This is sentence number {n} of a long text." for n in range(80))


def tenancy(server: Served) -> Tenancy:
    found: Tenancy = server.state.tenancy
    return found


def spy_usage(
    server: Served, monkeypatch: pytest.MonkeyPatch, request_prefix: str = ""
) -> list[UsageRecord]:
    """The usage records `server` makes from now on whose request id starts with
    `request_prefix` (`ws_` for streaming sessions: not the HTTP requests' that a test before
    may still be recording)."""
    records: list[UsageRecord] = []

    def record(usage: UsageRecord) -> None:
        if usage.request_id.startswith(request_prefix):
            records.append(usage)

    monkeypatch.setattr(tenancy(server), "record", record)
    return records


def admin(server: Served) -> httpx.Client | httpx2.Client:
    return http_client(server, "/v1", {"Authorization": f"Bearer {ADMIN_KEY}"})


def new_key(server: Served, **limits: Any) -> tuple[str, str]:
    """(id, secret) of a key made through the admin API."""
    with admin(server) as client:
        response = client.post("/admin/keys", json={"name": "test", **limits})
    assert response.status_code == 201, response.text
    body = response.json()
    return body["id"], body["key"]


def speak(client: openai.OpenAI, text: str = SHORT, model: str = "fake") -> bytes:
    return client.audio.speech.create(
        model=model, voice="alloy", input=text, response_format="wav"
    ).content


@contextmanager
def held(client: openai.OpenAI, model: str = "fake") -> Iterator[None]:
    """A long stream, open (one chunk read) until the block ends, then abandoned."""
    with client.audio.speech.with_streaming_response.create(
        model=model,
        voice="alloy",
        input=LONG,
        response_format="pcm",
        speed=0.25,
        extra_body={"sample_rate": 48000},
    ) as running:
        # Keep the iterator: dropping it would close the connection at once.
        chunks = running.iter_bytes()
        next(chunks)
        yield


def stored_key(data_dir: Path, limits: KeyLimits | None = None) -> tuple[str, str]:
    """(id, secret) of a key made in `data_dir`'s store before a server starts there (for
    `wyoming_principal`, which must name a key at start-up)."""
    store = Store(f"sqlite:///{data_dir / 'speechgate.db'}")
    store.migrate()
    key, secret = store.create_key(
        "wyoming", limits or KeyLimits(), datetime.now(UTC).replace(tzinfo=None)
    )
    store.close()
    return key.id, secret


def usage(server: Served, key: str, **params: str) -> dict[str, Any]:
    with http_client(server, headers={"Authorization": f"Bearer {key}"}) as client:
        response = client.get("/v1/usage", params=params)
    assert response.status_code == 200, response.text
    report: dict[str, Any] = response.json()
    return report


def attempt(
    server: Served, secret: str, model: str = "fake"
) -> openai.APIStatusError | dict[str, str]:
    """One speech request: its headers if it succeeded, its error if not."""
    with sdk(server, secret) as client:
        try:
            response = client.audio.speech.with_raw_response.create(
                model=model, voice="alloy", input=SHORT, response_format="wav"
            )
        except openai.APIStatusError as error:
            return error
    assert response.status_code == 200
    assert decode_audio(response.content, "wav").duration > 0.1
    return dict(response.headers)
