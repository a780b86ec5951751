"""ElevenLabs' with-timestamps routes on a real server, through the official `elevenlabs` SDK
(sync and async), unchanged but for its base URL: the audio is decoded and the character times
checked against it and against the text sent."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np
import pytest
from elevenlabs.core.api_error import ApiError
from elevenlabs.types import CharacterAlignmentResponseModel

from tests.helpers.audio import DecodedAudio, decode_audio
from tests.helpers.server import RunningServer, refusing_port, running_server
from tests.helpers.settings import fake_settings, make_settings

# The SDK's clients take a third of a second of CPU to import: imported where a test makes
# one, not in every test process that collects this module.
if TYPE_CHECKING:
    from elevenlabs import ElevenLabs

pytestmark = pytest.mark.slow

ADMIN_KEY = "sg-admin-" + "t" * 40
# Two sentences: the times must include the pause the pipeline puts between them.
TEXT = "The quick brown fox jumps over the lazy dog. Then it sleeps, «quietly»!"
ONCE: Any = {"max_retries": 0}
# The last character ends where the speech stops; the audio may run on by a fade and the
# engine's trailing silence, never by a word.
TAIL_SECONDS = 0.1


def _server(settings_overrides: dict[str, Any], store: str) -> Iterator[RunningServer]:
    settings = fake_settings(
        auth={"mode": "keys", "admin_key": ADMIN_KEY},
        store={"database_url": f"sqlite:///{store}"},
        **settings_overrides,
    )
    with running_server(settings) as running:
        yield running


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    yield from _server({}, str(tmp_path_factory.mktemp("store") / "store.db"))


@pytest.fixture(scope="module")
def key(server: RunningServer) -> str:
    response = httpx.post(
        f"{server.url}/v1/admin/keys",
        json={"name": "timed"},
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
    )
    assert response.status_code == 201, response.text
    found: str = response.json()["key"]
    return found


@contextmanager
def eleven(url: str, key: str | None) -> Iterator[ElevenLabs]:
    from elevenlabs import ElevenLabs

    with httpx.Client(timeout=60) as http:
        yield ElevenLabs(base_url=url, api_key=key, httpx_client=http)


@pytest.fixture
def client(server: RunningServer, key: str) -> Iterator[ElevenLabs]:
    with eleven(server.url, key) as sdk:
        yield sdk


def check_alignment(
    alignment: CharacterAlignmentResponseModel | None, text: str, audio: DecodedAudio
) -> None:
    """`alignment` covers `text` character for character, in order, within `audio`, and its
    last character ends where the speech does."""
    assert alignment is not None
    starts = alignment.character_start_times_seconds
    ends = alignment.character_end_times_seconds
    assert "".join(alignment.characters) == text
    assert len(starts) == len(ends) == len(text)
    assert all(a <= b for a, b in pairwise(starts))
    assert all(a <= b for a, b in pairwise(ends))
    assert all(start <= end for start, end in zip(starts, ends, strict=True))
    assert ends[-1] <= audio.duration + 0.01
    assert audio.duration - ends[-1] < TAIL_SECONDS


def merged(alignments: Sequence[CharacterAlignmentResponseModel | None]) -> dict[str, list[Any]]:
    """The chunks' alignments as one (each chunk's characters are the ones new with it)."""
    whole: dict[str, list[Any]] = {"characters": [], "starts": [], "ends": []}
    for alignment in alignments:
        if alignment is None:
            continue
        whole["characters"] += alignment.characters
        whole["starts"] += alignment.character_start_times_seconds
        whole["ends"] += alignment.character_end_times_seconds
    return whole


def as_model(whole: dict[str, list[Any]]) -> CharacterAlignmentResponseModel:
    return CharacterAlignmentResponseModel(
        characters=whole["characters"],
        character_start_times_seconds=whole["starts"],
        character_end_times_seconds=whole["ends"],
    )


def test_convert_with_timestamps_aligns_every_character_of_the_text_sent(
    client: ElevenLabs,
) -> None:
    answer = client.text_to_speech.convert_with_timestamps(
        voice_id="alloy", text=TEXT, output_format="pcm_24000"
    )
    audio = decode_audio(base64.b64decode(answer.audio_base_64), "pcm", pcm_rate=24000)
    assert audio.duration > 2.0
    check_alignment(answer.alignment, TEXT, audio)
    # Nothing was normalized: the same characters and times.
    assert answer.normalized_alignment == answer.alignment


def test_stream_with_timestamps_sends_each_chunk_with_the_characters_new_with_it(
    client: ElevenLabs,
) -> None:
    chunks = list(
        client.text_to_speech.stream_with_timestamps(
            voice_id="alloy", text=TEXT, output_format="mp3_44100_128"
        )
    )
    assert len(chunks) > 1
    audio = decode_audio(b"".join(base64.b64decode(c.audio_base_64) for c in chunks), "mp3")
    assert audio.sample_rate == 44100
    whole = merged([chunk.alignment for chunk in chunks])
    check_alignment(as_model(whole), TEXT, audio)
    # The first sentence's characters come before the audio of the second.
    first = next(i for i, c in enumerate(chunks) if c.alignment and c.alignment.characters)
    assert first < len(chunks) - 1


def test_the_async_client_gets_both(server: RunningServer, key: str) -> None:
    from elevenlabs import AsyncElevenLabs

    async def main() -> tuple[Any, list[Any]]:
        async with httpx.AsyncClient(timeout=60) as http:
            client = AsyncElevenLabs(base_url=server.url, api_key=key, httpx_client=http)
            whole = await client.text_to_speech.convert_with_timestamps(
                voice_id="alloy", text=TEXT, output_format="pcm_16000"
            )
            streamed = [
                chunk
                async for chunk in client.text_to_speech.stream_with_timestamps(
                    voice_id="alloy", text=TEXT, output_format="ulaw_8000"
                )
            ]
            return whole, streamed

    whole, streamed = asyncio.run(main())
    audio = decode_audio(base64.b64decode(whole.audio_base_64), "pcm", pcm_rate=16000)
    check_alignment(whole.alignment, TEXT, audio)
    joined = b"".join(base64.b64decode(chunk.audio_base_64) for chunk in streamed)
    telephone = decode_audio(joined, "ulaw", pcm_rate=8000)
    check_alignment(as_model(merged([c.alignment for c in streamed])), TEXT, telephone)
    check_alignment(as_model(merged([c.normalized_alignment for c in streamed])), TEXT, telephone)


def detail(error: ApiError) -> dict[str, Any]:
    assert isinstance(error.body, dict)
    found: dict[str, Any] = error.body["detail"]
    assert isinstance(found["message"], str) and found["message"]
    return found


def test_an_unknown_voice_or_a_bad_key_is_refused_in_elevenlabs_shape(
    server: RunningServer, client: ElevenLabs
) -> None:
    with pytest.raises(ApiError) as converting:
        client.text_to_speech.convert_with_timestamps(voice_id="no-such-voice", text=TEXT)
    with pytest.raises(ApiError) as streaming:
        list(client.text_to_speech.stream_with_timestamps(voice_id="no-such-voice", text=TEXT))
    for raised in (converting, streaming):
        assert raised.value.status_code == 404
        assert detail(raised.value)["status"] == "voice_not_found"
    with eleven(server.url, "sk-not-a-key") as stranger, pytest.raises(ApiError) as unknown:
        stranger.text_to_speech.convert_with_timestamps(
            voice_id="alloy", text=TEXT, request_options=ONCE
        )
    assert unknown.value.status_code == 401
    assert detail(unknown.value)["status"] == "invalid_api_key"


def test_usage_counts_the_timed_routes_like_the_others(server: RunningServer) -> None:
    response = httpx.post(
        f"{server.url}/v1/admin/keys",
        json={"name": "metered"},
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
    )
    key = response.json()["key"]
    with eleven(server.url, key) as client:
        client.text_to_speech.convert_with_timestamps(
            voice_id="alloy", text=TEXT, output_format="pcm_24000"
        )
        list(client.text_to_speech.stream_with_timestamps(voice_id="alloy", text=TEXT))
    total = httpx.get(f"{server.url}/v1/usage", headers={"xi-api-key": key}).json()["total"]
    assert (total["requests"], total["errors"], total["characters"]) == (2, 0, 2 * len(TEXT))
    assert total["audio_seconds"] > 4.0


@pytest.fixture(scope="module")
def espeak_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    settings = make_settings(engines=["espeak"], default_engine="espeak", pool={"workers": 1})
    with running_server(settings) as running:
        yield running


def loudness(audio: DecodedAudio, start: float, end: float) -> float:
    """The peak of `audio` from `start` to `end` seconds."""
    window = audio.samples[round(start * audio.sample_rate) : round(end * audio.sample_rate)]
    return float(np.abs(window).max()) if window.size else 0.0


def test_espeak_character_times_fall_on_its_speech_and_its_pauses(
    espeak_server: RunningServer,
) -> None:
    with eleven(espeak_server.url, None) as client:
        answer = client.text_to_speech.convert_with_timestamps(
            voice_id="alloy", text=TEXT, output_format="pcm_24000"
        )
    audio = decode_audio(base64.b64decode(answer.audio_base_64), "pcm", pcm_rate=24000)
    alignment = answer.alignment
    check_alignment(alignment, TEXT, audio)
    assert alignment is not None
    starts = alignment.character_start_times_seconds
    ends = alignment.character_end_times_seconds
    # Every word is heard while its letters are said.
    for word in ("quick", "fox", "lazy", "sleeps", "quietly"):
        first = TEXT.index(word)
        assert loudness(audio, starts[first], ends[first + len(word) - 1]) > 0.05, word
    # Between the sentences (after "dog." and before "Then") the pipeline's pause: silence
    # at least that long, and the characters around it on either side of it.
    dog_end = ends[TEXT.index("dog") + 2]
    then_start = starts[TEXT.index("Then")]
    assert then_start - dog_end >= 0.15
    assert loudness(audio, dog_end + 0.02, then_start - 0.02) < 0.02


ROUTES = """
providers:
  eleven: {{kind: elevenlabs, base_url: {upstream}, models: {{via-eleven: fake}}}}
  openai: {{kind: remote, base_url: {upstream}/v1, model: fake}}
  gone: {{kind: elevenlabs, base_url: "http://127.0.0.1:{nobody}", connect_timeout: 1}}
  local: {{kind: local, model: fake}}
routes:
  via-eleven: {{providers: {{eleven: 100}}}}
  via-openai: {{providers: {{openai: 100}}}}
  via-gone: {{providers: {{gone: 100}}, fallback: [local]}}
"""


@pytest.fixture(scope="module")
def front(
    tmp_path_factory: pytest.TempPathFactory, upstream: RunningServer
) -> Iterator[RunningServer]:
    routes = tmp_path_factory.mktemp("routes") / "routes.yaml"
    with refusing_port() as nobody:
        routes.write_text(ROUTES.format(upstream=upstream.url, nobody=nobody))
        with running_server(fake_settings(routing={"routes_file": routes})) as running:
            yield running


@pytest.fixture(scope="module")
def upstream() -> Iterator[RunningServer]:
    with running_server(fake_settings()) as running:
        yield running


def test_a_route_to_an_elevenlabs_upstream_relays_its_timestamps(
    front: RunningServer, upstream: RunningServer
) -> None:
    with eleven(front.url, None) as relayed, eleven(upstream.url, None) as direct:
        via = relayed.text_to_speech.convert_with_timestamps(
            voice_id="alloy", text=TEXT, model_id="via-eleven", output_format="pcm_24000"
        )
        own = direct.text_to_speech.convert_with_timestamps(
            voice_id="alloy", text=TEXT, model_id="fake", output_format="pcm_24000"
        )
        streamed = list(
            relayed.text_to_speech.stream_with_timestamps(
                voice_id="alloy", text=TEXT, model_id="via-eleven", output_format="pcm_24000"
            )
        )
    audio = decode_audio(base64.b64decode(via.audio_base_64), "pcm", pcm_rate=24000)
    check_alignment(via.alignment, TEXT, audio)
    # The upstream's own times, through the relay (each side rounds them to 0.1 ms).
    assert via.audio_base_64 == own.audio_base_64
    same_times(via.alignment, own.alignment)
    joined = b"".join(base64.b64decode(chunk.audio_base_64) for chunk in streamed)
    assert joined == base64.b64decode(own.audio_base_64)
    same_times(as_model(merged([chunk.alignment for chunk in streamed])), own.alignment)


def same_times(
    found: CharacterAlignmentResponseModel | None, wanted: CharacterAlignmentResponseModel | None
) -> None:
    assert found is not None and wanted is not None
    assert found.characters == wanted.characters
    assert found.character_start_times_seconds == pytest.approx(
        wanted.character_start_times_seconds, abs=2e-4
    )
    assert found.character_end_times_seconds == pytest.approx(
        wanted.character_end_times_seconds, abs=2e-4
    )


def test_a_route_to_an_openai_upstream_estimates_the_times_from_its_audio(
    front: RunningServer,
) -> None:
    # One pause in the audio, one break in the text: the estimate gives each sentence its run
    # of sound. (TEXT's comma, which the fake engine does not pause at, would make the phrases
    # outnumber the runs, and the estimate spread the words over the whole.)
    text = "The quick brown fox jumps over the lazy dog. Then it sleeps quietly."
    with eleven(front.url, None) as client:
        answer = client.text_to_speech.convert_with_timestamps(
            voice_id="alloy", text=text, model_id="via-openai", output_format="mp3_24000_48"
        )
        chunks = list(
            client.text_to_speech.stream_with_timestamps(
                voice_id="alloy", text=text, model_id="via-openai", output_format="ulaw_8000"
            )
        )
    audio = decode_audio(base64.b64decode(answer.audio_base_64), "mp3")
    check_alignment(answer.alignment, text, audio)
    alignment = answer.alignment
    assert alignment is not None
    then_start = alignment.character_start_times_seconds[text.index("Then")]
    dog_end = alignment.character_end_times_seconds[text.index("dog") + 2]
    assert then_start - dog_end >= 0.1
    assert loudness(audio, dog_end + 0.02, then_start - 0.02) < 0.02
    joined = b"".join(base64.b64decode(chunk.audio_base_64) for chunk in chunks)
    telephone = decode_audio(joined, "ulaw", pcm_rate=8000)
    check_alignment(as_model(merged([chunk.alignment for chunk in chunks])), text, telephone)


def test_a_timed_request_whose_upstream_is_down_falls_over_to_the_local_engine(
    front: RunningServer,
) -> None:
    with eleven(front.url, None) as client:
        response = client.text_to_speech.with_raw_response.convert_with_timestamps(
            voice_id="alloy", text=TEXT, model_id="via-gone", output_format="pcm_24000"
        )
    assert response.headers["x-speechgate-provider"] == "local"
    answer = response.data
    audio = decode_audio(base64.b64decode(answer.audio_base_64), "pcm", pcm_rate=24000)
    check_alignment(answer.alignment, TEXT, audio)
