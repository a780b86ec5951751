"""ElevenLabs' API on a real server, through the official `elevenlabs` SDK (sync and async),
unchanged but for its base URL; every answer's audio is decoded and checked."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from elevenlabs.core.api_error import ApiError
from elevenlabs.types import VoiceSettings

from tests.helpers.audio import DecodedAudio, decode_audio
from tests.helpers.server import RunningServer, running_server, sdk_client
from tests.helpers.settings import make_settings

# The SDK's clients take a third of a second of CPU to import: imported where a test makes
# one, not in every test process that collects this module.
if TYPE_CHECKING:
    from elevenlabs import AsyncElevenLabs, ElevenLabs

pytestmark = pytest.mark.slow

ADMIN_KEY = "sg-admin-" + "e" * 40
TEXT = "The quick brown fox jumps over the lazy dog."
# No retries: a retry would hide a failure (the SDK retries 429s and 5xxs twice by default).
ONCE: Any = {"max_retries": 0}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    store = tmp_path_factory.mktemp("store") / "store.db"
    settings = make_settings(
        engines=["espeak"],
        default_engine="espeak",
        pool={"workers": 1},
        auth={"mode": "keys", "admin_key": ADMIN_KEY},
        store={"database_url": f"sqlite:///{store}"},
    )
    with running_server(settings) as running:
        yield running


def new_key(server: RunningServer, **limits: Any) -> str:
    response = httpx.post(
        f"{server.url}/v1/admin/keys",
        json={"name": "eleven", **limits},
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
    )
    assert response.status_code == 201, response.text
    key: str = response.json()["key"]
    return key


@pytest.fixture(scope="module")
def key(server: RunningServer) -> str:
    return new_key(server)


@contextmanager
def eleven(server: RunningServer, key: str) -> Iterator[ElevenLabs]:
    """The SDK pointed at `server`; its HTTP client is passed in only so it can be closed."""
    from elevenlabs import ElevenLabs

    with httpx.Client(timeout=60) as http:
        yield ElevenLabs(base_url=server.url, api_key=key, httpx_client=http)


@pytest.fixture
def client(server: RunningServer, key: str) -> Iterator[ElevenLabs]:
    with eleven(server, key) as sdk:
        yield sdk


def spoken(audio: DecodedAudio, rate: int) -> DecodedAudio:
    """Checks that `audio` is speech of TEXT's length at `rate`, and returns it."""
    assert audio.sample_rate == rate
    # espeak speaks TEXT in about 2.5 s: anything from 1 to 6 s is that sentence, not silence,
    # a truncated clip or a repeat.
    assert 1.0 < audio.duration < 6.0
    assert audio.rms > 0.01
    return audio


def test_convert_defaults_to_mp3_44100_and_routes_elevenlabs_model_ids_to_the_default_engine(
    client: ElevenLabs,
) -> None:
    with client.text_to_speech.with_raw_response.convert(
        voice_id="alloy", text=TEXT, model_id="eleven_multilingual_v2"
    ) as response:
        assert response.headers["content-type"] == "audio/mpeg"
        assert response.headers["x-speechgate-engine"] == "espeak"
        body = b"".join(response.data)
    spoken(decode_audio(body, "mp3"), 44100)


@pytest.mark.parametrize(
    ("output_format", "fmt", "rate"),
    [
        ("pcm_16000", "pcm", 16000),
        ("ulaw_8000", "ulaw", 8000),
        ("alaw_8000", "alaw", 8000),
        ("mp3_22050_32", "mp3", 22050),
        ("opus_48000_64", "opus", 48000),
        ("wav_24000", "wav", 24000),
    ],
)
def test_stream_in_each_kind_of_output_format_is_the_same_speech(
    client: ElevenLabs, output_format: Any, fmt: str, rate: int
) -> None:
    reference = b"".join(
        client.text_to_speech.convert(voice_id="alloy", text=TEXT, output_format="pcm_24000")
    )
    chunks = list(
        client.text_to_speech.stream(
            voice_id="alloy", text=TEXT, model_id="eleven_flash_v2_5", output_format=output_format
        )
    )
    audio = spoken(decode_audio(b"".join(chunks), fmt, pcm_rate=rate), rate)
    # Codec padding aside, the same sentence as the 24 kHz PCM one.
    assert audio.duration == pytest.approx(decode_audio(reference, "pcm").duration, abs=0.1)


def test_speed_is_honoured_and_the_other_voice_settings_are_reported_ignored(
    client: ElevenLabs,
) -> None:
    def say(settings: VoiceSettings) -> tuple[httpx.Headers, DecodedAudio]:
        with client.text_to_speech.with_raw_response.convert(
            voice_id="alloy",
            text=TEXT,
            output_format="pcm_24000",
            voice_settings=settings,
            previous_text="Before.",
            seed=7,  # espeak cannot repeat itself for a seed: spoken anyway, and said so
            optimize_streaming_latency=4,
        ) as response:
            body = b"".join(response.data)
            return httpx.Headers(response.headers), decode_audio(body, "pcm")

    headers, normal = say(VoiceSettings(stability=0.3, similarity_boost=0.8, style=0.1))
    _, fast = say(VoiceSettings(speed=2.0))
    assert headers["x-speechgate-ignored"] == (
        "voice_settings.stability, voice_settings.similarity_boost, voice_settings.style, "
        "previous_text, seed"
    )
    assert fast.rms > 0.01 and fast.duration < normal.duration * 0.7


def test_language_code_picks_a_voice_of_that_language(client: ElevenLabs) -> None:
    with client.text_to_speech.with_raw_response.convert(
        voice_id="female", text="Guten Tag, wie geht es Ihnen?", language_code="de"
    ) as response:
        assert response.headers["x-speechgate-voice"].startswith("de")
        assert decode_audio(b"".join(response.data), "mp3").rms > 0.01


def test_async_client_converts_and_streams(server: RunningServer, key: str) -> None:
    from elevenlabs import AsyncElevenLabs

    async def main() -> tuple[bytes, bytes]:
        async with httpx.AsyncClient(timeout=60) as http:
            client = AsyncElevenLabs(base_url=server.url, api_key=key, httpx_client=http)
            return await both(client)

    async def both(client: AsyncElevenLabs) -> tuple[bytes, bytes]:
        whole = b"".join(
            [
                chunk
                async for chunk in client.text_to_speech.convert(
                    voice_id="alloy", text=TEXT, output_format="pcm_22050"
                )
            ]
        )
        streamed = b"".join(
            [
                chunk
                async for chunk in client.text_to_speech.stream(
                    voice_id="alloy", text=TEXT, output_format="ulaw_8000"
                )
            ]
        )
        return whole, streamed

    whole, streamed = asyncio.run(main())
    spoken(decode_audio(whole, "pcm", pcm_rate=22050), 22050)
    spoken(decode_audio(streamed, "ulaw", pcm_rate=8000), 8000)


def test_voices_list_and_get(client: ElevenLabs) -> None:
    voices = client.voices.get_all().voices
    english = next(voice for voice in voices if voice.voice_id == "en-us")
    assert english.category == "premade"
    assert english.labels is not None
    assert english.labels["language"] == "en" and english.labels["model"] == "espeak"
    one = client.voices.get("en-us")
    assert one.voice_id == "en-us" and one.name == english.name
    # A listed voice speaks when named in the path.
    audio = b"".join(client.text_to_speech.convert(voice_id="en-us", text=TEXT))
    spoken(decode_audio(audio, "mp3"), 44100)


def test_models_list_in_elevenlabs_shape_while_openai_still_gets_its_own(
    client: ElevenLabs, server: RunningServer, key: str
) -> None:
    models = {model.model_id: model for model in client.models.list()}
    assert {"espeak", "tts-1", "eleven_multilingual_v2", "eleven_flash_v2_5"} <= set(models)
    espeak = models["espeak"]
    assert espeak.can_do_text_to_speech and not espeak.can_use_style
    assert espeak.languages is not None
    assert "en" in {language.language_id for language in espeak.languages}
    with sdk_client(server, key) as sdk:
        assert "espeak" in {model.id for model in sdk.models.list()}


def detail(error: ApiError) -> dict[str, Any]:
    assert isinstance(error.body, dict)
    found: dict[str, Any] = error.body["detail"]
    assert isinstance(found["message"], str) and found["message"]
    return found


def test_a_bad_key_is_401_in_elevenlabs_shape(server: RunningServer) -> None:
    with eleven(server, "sk-not-a-key") as client:
        with pytest.raises(ApiError) as raised:
            b"".join(
                client.text_to_speech.convert(voice_id="alloy", text=TEXT, request_options=ONCE)
            )
        with pytest.raises(ApiError) as listing:
            client.models.list(request_options=ONCE)
    assert raised.value.status_code == 401
    assert detail(raised.value)["status"] == "invalid_api_key"
    assert listing.value.status_code == 401


def test_an_unknown_voice_is_404_voice_not_found(client: ElevenLabs) -> None:
    with pytest.raises(ApiError) as speaking:
        b"".join(client.text_to_speech.convert(voice_id="no-such-voice", text=TEXT))
    with pytest.raises(ApiError) as getting:
        client.voices.get("no-such-voice")
    for raised in (speaking, getting):
        assert raised.value.status_code == 404
        assert detail(raised.value)["status"] == "voice_not_found"


def test_a_bad_output_format_or_body_is_422(client: ElevenLabs) -> None:
    bad_format: Any = "mp3_44100_1000"
    with pytest.raises(ApiError) as raised:
        b"".join(
            client.text_to_speech.convert(voice_id="alloy", text=TEXT, output_format=bad_format)
        )
    assert raised.value.status_code == 422
    assert detail(raised.value)["status"] == "invalid_output_format"
    assert "pcm_24000" in detail(raised.value)["message"]  # the names it takes
    with pytest.raises(ApiError) as empty:
        b"".join(client.text_to_speech.convert(voice_id="alloy", text=""))
    assert empty.value.status_code == 422


def test_a_key_over_its_rate_is_429_with_retry_after_and_usage_is_recorded(
    server: RunningServer,
) -> None:
    key = new_key(server, requests_per_second=0.01)
    with eleven(server, key) as client:
        audio = b"".join(client.text_to_speech.convert(voice_id="alloy", text=TEXT))
        spoken(decode_audio(audio, "mp3"), 44100)
        with pytest.raises(ApiError) as raised:
            b"".join(
                client.text_to_speech.convert(voice_id="alloy", text=TEXT, request_options=ONCE)
            )
    assert raised.value.status_code == 429
    assert raised.value.headers is not None and int(raised.value.headers["retry-after"]) >= 1
    assert detail(raised.value)["status"] == "rate_limit_exceeded"
    usage = httpx.get(f"{server.url}/v1/usage", headers={"xi-api-key": key}).json()
    total = usage["total"]
    assert (total["requests"], total["errors"], total["characters"]) == (2, 1, len(TEXT))
    assert total["audio_seconds"] > 1.0


def test_the_openapi_schema_documents_the_routes(server: RunningServer) -> None:
    paths = httpx.get(f"{server.url}/openapi.json").json()["paths"]
    assert {"/v1/text-to-speech/{voice_id}", "/v1/text-to-speech/{voice_id}/stream"} <= set(paths)
    assert "/v1/voices/{voice_id}" in paths and "/v1/models" in paths
