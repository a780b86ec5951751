"""Bad input answers OpenAI's error envelope with the right status, and loses nothing."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.helpers.audio import decode_audio
from tests.helpers.inprocess import InProcessApp

GOOD = {"model": "tts-1", "input": "Still here.", "voice": "alloy", "response_format": "wav"}


@pytest.fixture
def server(fake_app: InProcessApp) -> InProcessApp:
    """Validation and the error envelope are the subject, not the engine nor uvicorn: the fake
    engine's app, in-process."""
    return fake_app


def assert_envelope(response: httpx.Response, status: int, param: str | None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    assert error["param"] == param
    return dict(error)


def assert_still_serving(server: InProcessApp) -> None:
    response = server.http.post("/v1/audio/speech", json=GOOD)
    assert response.status_code == 200
    assert decode_audio(response.content, "wav").rms > 0.01


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"input": ""}, "input"),
        ({"input": "   "}, "input"),
        ({"input": "a" * 4097}, "input"),
        ({"voice": "nobody"}, "voice"),
        ({"voice": {"id": "voice_nobody"}}, "voice"),
        ({"response_format": "ogg"}, "response_format"),
        ({"speed": 0}, "speed"),
        ({"speed": 5}, "speed"),
        ({"speed": "fast"}, "speed"),
        ({"stream_format": "video"}, "stream_format"),
        ({"sample_rate": 22050, "response_format": "opus"}, "sample_rate"),
        ({"model": None}, "model"),
    ],
)
def test_invalid_fields_are_400_with_param(
    server: InProcessApp, change: dict[str, Any], param: str
) -> None:
    body = {key: value for key, value in {**GOOD, **change}.items() if value is not None}
    response = server.http.post("/v1/audio/speech", json=body)
    error = assert_envelope(response, 400, param)
    assert error["type"] == "invalid_request_error"
    assert_still_serving(server)


def test_unknown_voice_lists_the_valid_ones(server: InProcessApp) -> None:
    response = server.http.post("/v1/audio/speech", json={**GOOD, "voice": "nobody"})
    message = assert_envelope(response, 400, "voice")["message"]
    assert "alloy" in message and "en-high" in message


def test_unknown_model_is_404(server: InProcessApp) -> None:
    response = server.http.post("/v1/audio/speech", json={**GOOD, "model": "tts-9"})
    assert assert_envelope(response, 404, "model")["code"] == "model_not_found"


def test_the_sdk_raises_its_own_error_classes(server: InProcessApp) -> None:
    with server.sdk() as client:
        with pytest.raises(openai.BadRequestError) as bad:
            client.audio.speech.create(model="tts-1", voice="alloy", input="Hi", speed=9)
        assert bad.value.param == "speed"
        with pytest.raises(openai.NotFoundError):
            client.audio.speech.create(model="nope", voice="alloy", input="Hi")


def test_extra_fields_are_ignored(server: InProcessApp) -> None:
    response = server.http.post("/v1/audio/speech", json={**GOOD, "future_option": {"x": 1}})
    assert response.status_code == 200
    assert decode_audio(response.content, "wav").rms > 0.01


@pytest.mark.parametrize(
    ("content", "content_type", "status"),
    [
        (b"{not json", "application/json", 400),
        (b"[1, 2]", "application/json", 400),
        (b"model=tts-1&input=hi", "application/x-www-form-urlencoded", 415),
        (b'{"model": "tts-1"}', "text/plain", 415),
    ],
)
def test_malformed_bodies(
    server: InProcessApp, content: bytes, content_type: str, status: int
) -> None:
    response = server.http.post(
        "/v1/audio/speech", content=content, headers={"content-type": content_type}
    )
    assert_envelope(response, status, None)
    assert_still_serving(server)


def test_ten_megabyte_body_is_413(server: InProcessApp) -> None:
    body = b'{"model": "tts-1", "voice": "alloy", "input": "' + b"a" * 10_000_000 + b'"}'
    response = server.http.post(
        "/v1/audio/speech", content=body, headers={"content-type": "application/json"}
    )
    assert_envelope(response, 413, None)
    assert_still_serving(server)


def test_chunked_body_over_the_limit_is_413(server: InProcessApp) -> None:
    def chunks() -> Any:
        yield b'{"model": "tts-1", "voice": "alloy", "input": "'
        for _ in range(40):
            yield b"a" * 65536
        yield b'"}'

    response = server.http.post(
        "/v1/audio/speech", content=chunks(), headers={"content-type": "application/json"}
    )
    assert_envelope(response, 413, None)
    assert_still_serving(server)


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/v1/nothing", 404), ("DELETE", "/v1/audio/speech", 405), ("PUT", "/v1/models", 405)],
)
def test_unknown_routes_and_methods(
    server: InProcessApp, method: str, path: str, status: int
) -> None:
    response = server.http.request(method, path)
    assert_envelope(response, status, None)
