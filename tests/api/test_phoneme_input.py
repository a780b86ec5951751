# ruff: noqa: RUF001 - IPA symbols look like Latin letters and punctuation
"""Phonemes through the API: an engine that speaks phoneme blocks (the fake one, as Piper,
Kokoro and espeak-ng) takes SSML's `<phoneme>`, as its `EngineInfo.phonemes` tells the
gateway."""

from __future__ import annotations

from tests.helpers.inprocess import InProcessApp

PHONEME = '<speak>Say <phoneme alphabet="ipa" ph="həˈloʊ">hello</phoneme> now.</speak>'


def test_an_engine_with_phonemes_takes_a_phoneme_element(fake_app: InProcessApp) -> None:
    response = fake_app.http.post(
        "/v1/audio/speech",
        json={"model": "fake", "voice": "alloy", "input": PHONEME, "response_format": "pcm"},
    )
    assert response.status_code == 200, response.text
    assert len(response.content) > 0
