"""The per-request switch for reading text as meant, on each HTTP front end: accepted values
pass, anything else is a 400 in the route's own shape, refused before it costs anything."""

from __future__ import annotations

import pytest

from tests.helpers.inprocess import InProcessApp

TEXT = "It costs $5.20."


@pytest.mark.parametrize("value", ["auto", "on", "off"])
def test_openai_route_takes_each_normalization_value(fake_app: InProcessApp, value: str) -> None:
    response = fake_app.http.post(
        "/v1/audio/speech",
        json={
            "model": "fake",
            "voice": "alloy",
            "input": TEXT,
            "response_format": "pcm",
            "apply_text_normalization": value,
        },
    )
    assert response.status_code == 200, response.text
    assert len(response.content) > 0


def test_openai_route_refuses_an_unknown_normalization_value(fake_app: InProcessApp) -> None:
    response = fake_app.http.post(
        "/v1/audio/speech",
        json={"model": "fake", "voice": "alloy", "input": TEXT, "apply_text_normalization": "x"},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "apply_text_normalization"


@pytest.mark.parametrize("value", ["auto", "on", "off"])
def test_elevenlabs_route_takes_each_normalization_value(
    fake_app: InProcessApp, value: str
) -> None:
    response = fake_app.http.post(
        "/v1/text-to-speech/alloy?output_format=pcm_24000",
        json={"text": TEXT, "model_id": "fake", "apply_text_normalization": value},
    )
    assert response.status_code == 200, response.text


def test_elevenlabs_route_refuses_banana_with_a_400_naming_the_field(
    fake_app: InProcessApp,
) -> None:
    response = fake_app.http.post(
        "/v1/text-to-speech/alloy",
        json={"text": TEXT, "model_id": "fake", "apply_text_normalization": "banana"},
    )
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert "apply_text_normalization" in detail["message"]
    assert "banana" in detail["message"]
