"""The access log: one line per request, written when it has ended."""

from __future__ import annotations

import logging

import pytest

from tests.helpers.inprocess import InProcessApp


def test_each_request_is_logged_once_it_ends_with_its_id_and_status(
    fake_app: InProcessApp, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="speechgate.access"):
        spoken = fake_app.http.post(
            "/v1/audio/speech",
            json={"model": "fake", "voice": "alloy", "input": "Hi.", "response_format": "pcm"},
            headers={"x-request-id": "req_logged_speech"},
        )
        refused = fake_app.http.get("/v1/nothing?x=1", headers={"x-request-id": "req_404"})
    assert (spoken.status_code, refused.status_code) == (200, 404)
    lines = [r.getMessage() for r in caplog.records if r.name == "speechgate.access"]
    [speech] = [line for line in lines if "req_logged_speech" in line]
    assert '"POST /v1/audio/speech HTTP/1.1" 200 req_logged_speech' in speech
    assert speech.endswith(" ms")
    [missing] = [line for line in lines if "req_404" in line]
    assert '"GET /v1/nothing?x=1 HTTP/1.1" 404 req_404' in missing
