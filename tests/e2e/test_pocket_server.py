"""pocket-tts behind a real server: cloning through HTTP, every format, streaming, cancellation,
seeds, a library that survives a restart, and uploads that must be refused.

The model is the tiny random-weight one of tests/helpers/pocket.py, loaded by the workers
through pocket-tts' real loader. Its EOS threshold is out of reach, so every output runs to the
length pocket-tts allows for its text, and lengths are predictable.
"""

from __future__ import annotations

import base64
import io
import json
import wave
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import openai
import pytest
from openai.types.audio import Voice as SdkVoice
from websockets.sync.client import connect

from speechgate.audio.formats import OPENAI_FORMATS, AudioFormat
from speechgate.settings import Settings
from tests.helpers.audio import decode_audio, flac_bomb, piper_speech, wav_file
from tests.helpers.inprocess import in_process
from tests.helpers.pocket import NEEDS_POCKET, RATE, build_tiny_model_apart
from tests.helpers.server import RunningServer, running_server, sdk_client
from tests.helpers.settings import make_settings, merged
from tests.helpers.waiting import wait_for

pytestmark = [pytest.mark.slow, NEEDS_POCKET]

TEXT = "Hi."
# With EOS out of reach, pocket-tts' cap for TEXT: 46 frames of 80 ms (measured). Two words
# ran 117, and the generation is most of what this module's requests cost.
SECONDS = 46 * 1920 / RATE


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model_apart(tmp_path_factory.mktemp("pocket-model"))


def pocket_settings(model_dir: Path, data_dir: Path, **overrides: Any) -> Settings:
    options = {"config": str(model_dir / "config.yaml"), "eos_threshold": "1e9"}
    values: dict[str, Any] = {
        "engines": ["pocket", "espeak"],
        "default_engine": "pocket",
        "pool": {"workers": 1},
        "engine_options": {"pocket": options},
        "data_dir": data_dir,
    }
    return make_settings(**merged(values, overrides))


@pytest.fixture(scope="module")
def pocket_server(
    model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    with running_server(pocket_settings(model_dir, tmp_path_factory.mktemp("data"))) as server:
        yield server


@pytest.fixture
def sdk(pocket_server: RunningServer) -> Iterator[openai.OpenAI]:
    with sdk_client(pocket_server) as client:
        yield client


def clone(sdk: openai.OpenAI, name: str, data: bytes, **extra: Any) -> SdkVoice:
    return sdk.audio.voices.create(
        name=name,
        audio_sample=(f"{name}.wav", data, "audio/wav"),
        consent="cons_test",
        extra_body=extra or None,
    )


@pytest.fixture(scope="module")
def voice(pocket_server: RunningServer, model_dir: Path) -> SdkVoice:
    with sdk_client(pocket_server) as client:
        return clone(client, "low", speech())


def speak(server: RunningServer, **body: Any) -> httpx.Response:
    body = {"model": "pocket", "input": TEXT, "response_format": "pcm", **body}
    return httpx.post(f"{server.url}/v1/audio/speech", json=body, timeout=120)


def error_code(response: httpx.Response) -> str:
    return str(response.json()["error"]["code"])


def speech() -> bytes:
    """Someone speaking (Piper's voice): a tone or noise is refused as no speech."""
    return wav_file(piper_speech())


def wav_bytes(samples: np.ndarray, rate: int, channels: int = 1) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(channels)
        wav.setsampwidth(2)
        wav.setframerate(rate)
        wav.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())
    return out.getvalue()


def tone(seconds: float, rate: int, channels: int = 1) -> bytes:
    t = np.arange(round(seconds * rate)) / rate
    mono = 0.3 * np.sin(2 * np.pi * 180 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))
    return wav_bytes(np.repeat(mono, channels), rate, channels)


# --- cloning and speaking -------------------------------------------------------------------


def test_a_clone_is_an_openai_voice_object(voice: SdkVoice) -> None:
    assert voice.object == "audio.voice"
    assert voice.id.startswith("voice_")
    assert voice.name == "low"
    assert voice.type == "audio_sample"
    assert voice.created_at > 0


@pytest.mark.parametrize("fmt", OPENAI_FORMATS)
def test_a_cloned_voice_speaks_every_format(
    sdk: openai.OpenAI, voice: SdkVoice, fmt: AudioFormat
) -> None:
    response = sdk.audio.speech.create(
        model="pocket", voice={"id": voice.id}, input=TEXT, response_format=fmt.value
    )
    audio = decode_audio(response.content, fmt.value)
    assert audio.sample_rate == (48000 if fmt is AudioFormat.OPUS else 24000)
    # Lossy codecs pad a little at the edges.
    assert audio.duration == pytest.approx(SECONDS, abs=0.1)
    assert audio.rms > 0.01


def test_voices_are_listed_read_and_deleted(
    pocket_server: RunningServer, sdk: openai.OpenAI, voice: SdkVoice, model_dir: Path
) -> None:
    url = f"{pocket_server.url}/v1/audio/voices"
    listed = httpx.get(url).json()["voices"]
    assert {"id": voice.id, "name": "low", "model": "pocket", "type": "audio_sample"}.items() <= (
        next(card for card in listed if card["id"] == voice.id).items()
    )
    assert any(card["model"] == "espeak" and card["type"] == "builtin" for card in listed)
    assert httpx.get(f"{url}/{voice.id}").json()["name"] == "low"
    models = {
        card["id"]: card["cloning"]
        for card in httpx.get(f"{pocket_server.url}/v1/models").json()["data"]
    }
    assert models["pocket"] is True
    assert models["espeak"] is False

    doomed = clone(sdk, "doomed", speech())
    assert speak(pocket_server, voice="doomed").status_code == 200
    deleted = sdk.audio.voices.delete(doomed.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (doomed.id, True, "audio.voice.deleted")
    assert httpx.get(f"{url}/{doomed.id}").status_code == 404
    assert httpx.delete(f"{url}/{doomed.id}").status_code == 404
    gone = speak(pocket_server, voice={"id": doomed.id})
    assert gone.status_code == 400
    assert error_code(gone) == "voice_not_found"
    assert doomed.id not in {card["id"] for card in httpx.get(url).json()["voices"]}


def test_sse_streams_in_pieces(pocket_server: RunningServer, voice: SdkVoice) -> None:
    body = {
        "model": "pocket",
        "voice": voice.name,
        "input": TEXT,
        "response_format": "pcm",
        "stream_format": "sse",
    }
    with httpx.stream("POST", f"{pocket_server.url}/v1/audio/speech", json=body, timeout=60) as r:
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    deltas = [event for event in events if event["type"] == "speech.audio.delta"]
    assert len(deltas) > 1
    assert events[-1]["type"] == "speech.audio.done"
    pcm = b"".join(base64.b64decode(event["audio"]) for event in deltas)
    assert len(pcm) // 2 == pytest.approx(SECONDS * RATE, abs=RATE * 0.05)


def test_a_client_that_leaves_stops_generation(
    pocket_server: RunningServer, voice: SdkVoice
) -> None:
    pool = pocket_server.runtime.pools["pocket"]
    before = pool.stats().jobs["cancelled"]
    long_text = " ".join(f"Sentence number {n} goes on for a while." for n in range(30))
    body = {"model": "pocket", "voice": voice.name, "input": long_text, "response_format": "pcm"}
    with httpx.stream("POST", f"{pocket_server.url}/v1/audio/speech", json=body, timeout=60) as r:
        assert r.status_code == 200
        next(r.iter_raw())
    wait_for(lambda: pool.stats().jobs["cancelled"] == before + 1)
    wait_for(lambda: pool.stats().in_flight == 0)
    assert speak(pocket_server, voice=voice.name).status_code == 200


# --- seeds and one-off prompts --------------------------------------------------------------


def test_a_seed_repeats_the_audio_exactly(pocket_server: RunningServer, voice: SdkVoice) -> None:
    first = speak(pocket_server, voice={"id": voice.id}, seed=5)
    assert first.status_code == 200
    assert speak(pocket_server, voice={"id": voice.id}, seed=5).content == first.content
    assert speak(pocket_server, voice={"id": voice.id}, seed=6).content != first.content


def test_a_reference_clip_speaks_like_the_voice_cloned_from_it(
    pocket_server: RunningServer, voice: SdkVoice, model_dir: Path
) -> None:
    reference = base64.b64encode(speech()).decode()
    one_off = speak(pocket_server, voice="anything", reference_audio=reference, seed=2)
    assert one_off.status_code == 200, one_off.text
    assert one_off.content == speak(pocket_server, voice={"id": voice.id}, seed=2).content


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ({"model": "espeak", "voice": "alloy", "seed": 1}, "seed", "seed_unsupported"),
        (
            {"model": "espeak", "voice": "alloy", "reference_audio": "AAAA"},
            "reference_audio",
            "cloning_unsupported",
        ),
        ({"voice": "x", "reference_audio": "not base64!"}, "reference_audio", "invalid_audio"),
        ({"voice": "x", "reference_audio": ""}, "reference_audio", "empty_file"),
        ({"voice": "nobody"}, "voice", "voice_not_found"),
        (
            {"voice": "x", "reference_audio": base64.b64encode(flac_bomb(4, 8000)).decode()},
            "reference_audio",
            "audio_not_speech",
        ),
        (
            {
                "voice": "x",
                "reference_audio": base64.b64encode(wav_bytes(np.ones(7000), 1)).decode(),
            },
            "reference_audio",
            "invalid_audio",
        ),
    ],
)
def test_bad_speech_extensions_are_refused(
    pocket_server: RunningServer, body: dict[str, Any], param: str, code: str
) -> None:
    response = speak(pocket_server, **body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param
    assert error_code(response) == code


# --- uploads --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "status", "code"),
    [
        (b"", 400, "empty_file"),
        (b"This is a text file, not audio." * 50, 400, "invalid_audio"),
        (tone(1.0, 24000), 400, "audio_too_short"),
        (wav_bytes(np.zeros(5 * 24000), 24000), 400, "audio_too_short"),
        (wav_bytes(0.3 * np.sin(np.arange(5 * 24000) / 24), 24000), 400, "audio_not_speech"),
        (
            wav_bytes(np.random.default_rng(2).uniform(-0.3, 0.3, 5 * 24000), 24000),
            400,
            "audio_not_speech",
        ),
        # 4 h of DC in 27 KB: decoded only up to the prompt's length, and not speech.
        (flac_bomb(hours=4, rate=8000), 400, "audio_not_speech"),
        # 7000 samples at 1 Hz, two hours: refused before decoding.
        (wav_bytes(np.random.default_rng(3).uniform(-0.3, 0.3, 7000), 1), 400, "invalid_audio"),
        (np.random.default_rng(1).bytes(11 * 1024 * 1024), 413, "payload_too_large"),
    ],
    ids=[
        "empty",
        "not-audio",
        "one-second",
        "silence",
        "constant-tone",
        "white-noise",
        "flac-bomb",
        "1-hz-wav",
        "11-MiB",
    ],
)
def test_bad_uploads_are_refused_and_nothing_is_stored(
    pocket_server: RunningServer, sdk: openai.OpenAI, data: bytes, status: int, code: str
) -> None:
    before = httpx.get(f"{pocket_server.url}/v1/audio/voices").json()["voices"]
    with pytest.raises(openai.APIStatusError) as raised:
        clone(sdk, "refused", data)
    assert raised.value.status_code == status
    assert raised.value.body["code"] == code  # type: ignore[index]
    assert httpx.get(f"{pocket_server.url}/v1/audio/voices").json()["voices"] == before


@pytest.mark.parametrize(
    ("name", "data"),
    [("stereo-48k", tone(4.0, 48000, channels=2)), ("mono-8k", tone(4.0, 8000))],
)
def test_stereo_and_narrowband_uploads_are_accepted(
    pocket_server: RunningServer, sdk: openai.OpenAI, name: str, data: bytes
) -> None:
    voice = clone(sdk, name, data)
    assert speak(pocket_server, voice={"id": voice.id}).status_code == 200


def test_a_long_sample_is_cloned_from_its_first_seconds(
    pocket_server: RunningServer, sdk: openai.OpenAI
) -> None:
    # Three minutes of speech: decoded only up to the engine's 30 s prompt and a margin.
    pcm = piper_speech()
    repeats = int(180 / pcm.duration) + 1
    long = wav_file(type(pcm)(np.tile(pcm.samples, repeats), pcm.sample_rate))
    voice = clone(sdk, "long", long)
    try:
        stored = pocket_server.runtime.voices.library.get(voice.id)
        assert stored.prompt_seconds == pytest.approx(30.0, abs=0.05)
    finally:
        sdk.audio.voices.delete(voice.id)


def test_names_are_unique_and_cloning_needs_a_cloning_model(
    sdk: openai.OpenAI, voice: SdkVoice, model_dir: Path
) -> None:
    data = speech()
    with pytest.raises(openai.ConflictError):
        clone(sdk, "low", data)
    with pytest.raises(openai.BadRequestError) as raised:
        clone(sdk, "espeak voice", data, model="espeak")
    assert raised.value.body["code"] == "cloning_unsupported"  # type: ignore[index]


# --- the library outlives the server ------------------------------------------------------


def test_the_library_survives_a_restart(pocket_server: RunningServer, model_dir: Path) -> None:
    # The module's server is the first; a second one started on its data directory (its own
    # process pool, the library read from disk alone) is the first after a restart, one start
    # instead of two.
    with sdk_client(pocket_server) as sdk:
        created = clone(sdk, "keeper", speech())
        before = speak(pocket_server, voice="keeper", seed=9).content
        library = cloned_cards(pocket_server)
        assert (created.id, "keeper") in [(card["id"], card["name"]) for card in library]
        data_dir = pocket_server.state.settings.data_dir
        with running_server(pocket_settings(model_dir, data_dir, engines=["pocket"])) as second:
            assert cloned_cards(second) == library
            assert speak(second, voice={"id": created.id}, seed=9).content == before
        sdk.audio.voices.delete(created.id)


def cloned_cards(server: RunningServer) -> list[dict[str, Any]]:
    voices = httpx.get(f"{server.url}/v1/audio/voices").json()["voices"]
    return [card for card in voices if card["type"] == "audio_sample"]


def test_a_model_without_cloning_weights_says_so(model_dir: Path, tmp_path: Path) -> None:
    # The voice-cloning weights cannot be had, so pocket-tts loads the ones without cloning
    # (see tests/engines/test_pocket.py). A repository name that huggingface_hub refuses before
    # any request fails as an unreachable or gated one does, without the network or a cache.
    config = (model_dir / "random.yaml").read_text()
    (tmp_path / "config.yaml").write_text(
        f"{config}weights_path: hf://kyutai/pocket--tts/gated.safetensors\n"
        f"weights_path_without_voice_cloning: {model_dir / 'model.safetensors'}\n"
    )
    settings = pocket_settings(
        model_dir,
        tmp_path / "data",
        engines=["pocket"],
        engine_options={"pocket": {"config": str(tmp_path / "config.yaml")}},
    )
    # In-process: the subject is the refusal, not the server process.
    with in_process(settings) as app, app.sdk() as sdk:
        with pytest.raises(openai.BadRequestError) as raised:
            clone(sdk, "refused", speech())
        assert raised.value.body["code"] == "cloning_unsupported"  # type: ignore[index]
        assert "voice-cloning weights" in raised.value.message
        reference = base64.b64encode(speech()).decode()
        body = {"model": "pocket", "input": TEXT, "voice": "x", "reference_audio": reference}
        response = app.http.post("/v1/audio/speech", json=body)
        assert response.status_code == 400
        assert error_code(response) == "cloning_unsupported"


def test_a_streaming_session_speaks_with_a_reference_clip(
    pocket_server: RunningServer, model_dir: Path
) -> None:
    reference = base64.b64encode(speech()).decode()
    update = {
        "model": "pocket",
        "voice": "anything",
        "reference_audio": reference,
        "response_format": "pcm",
        "seed": 4,
    }
    url = pocket_server.url.replace("http", "ws") + "/v1/audio/speech/stream"
    audio = b""
    with connect(url) as ws:
        ws.send(json.dumps({"type": "session.update", "session": update}))
        ws.send(json.dumps({"type": "input_text.delta", "delta": TEXT}))
        ws.send('{"type": "input_text.done"}')
        while True:
            message = ws.recv(timeout=60)
            if isinstance(message, bytes):
                audio += message
            elif json.loads(message)["type"] in ("session.done", "error"):
                break
    assert json.loads(message)["type"] == "session.done", message
    # The same voice, seed and text as a plain request: the same speech.
    plain = speak(pocket_server, voice="x", reference_audio=reference, seed=4).content
    assert len(audio) == len(plain)
    assert audio == plain


@pytest.mark.parametrize(
    ("name", "code"),
    [
        # This pocket model has no built-in voices, but "alloy" is espeak's, and OpenAI's.
        ("alloy", "voice_name_reserved"),
        ("en-us", "voice_name_reserved"),
        ("de_female", "voice_name_reserved"),
        ("nul\x00name", "invalid_voice_name"),
    ],
)
def test_a_clone_cannot_take_a_voices_name_or_control_characters(
    sdk: openai.OpenAI, name: str, code: str
) -> None:
    # Stored voices are looked up before the catalog: a clone named "alloy" would speak instead
    # of alloy for its key.
    with pytest.raises(openai.BadRequestError) as raised:
        sdk.audio.voices.create(
            name=name, audio_sample=("sample.wav", speech(), "audio/wav"), consent="cons_test"
        )
    assert raised.value.body["code"] == code  # type: ignore[index]
    assert raised.value.body["param"] == "name"  # type: ignore[index]


def test_a_clone_speaks_on_its_own_model_only(
    pocket_server: RunningServer, voice: SdkVoice
) -> None:
    mismatch = speak(pocket_server, model="espeak", voice={"id": voice.id})
    assert mismatch.status_code == 400
    assert error_code(mismatch) == "voice_model_mismatch"


@pytest.mark.parametrize("model", ["pocket-tts", "pocket-tts-hd", "pocket-tts-rt"])
def test_pocket_tts_model_names_speak_through_pocket(
    pocket_server: RunningServer, voice: SdkVoice, model: str
) -> None:
    response = speak(pocket_server, model=model, voice=voice.name)
    assert response.status_code == 200, response.text
    assert response.headers["x-speechgate-engine"] == "pocket"
    assert response.headers["x-speechgate-voice"] == voice.id


def test_a_built_in_voice_the_model_lacks_says_what_to_pull(pocket_server: RunningServer) -> None:
    refused = speak(pocket_server, model="pocket-tts", voice="en_us_female")
    assert refused.status_code == 400
    assert error_code(refused) == "voice_not_installed"
    assert "`speechgate voices pull pocket:english`" in refused.json()["error"]["message"]


# --- keys: voices belong to the key that cloned them ------------------------------------------

ADMIN_KEY = "sg-admin-" + "v" * 40
# A routed model served by this server's own pocket workers.
ROUTES = (
    "providers: {here: {kind: local, model: pocket}}\nroutes: {routed: {providers: {here: 100}}}\n"
)


@pytest.fixture(scope="module")
def keyed_pocket(
    model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    data = tmp_path_factory.mktemp("keyed")
    routes = data / "routes.yaml"
    routes.write_text(ROUTES)
    settings = pocket_settings(
        model_dir,
        data,
        auth={"mode": "keys", "admin_key": ADMIN_KEY},
        store={"database_url": f"sqlite:///{data / 'store.db'}"},
        routing={"routes_file": routes},
    )
    with running_server(settings) as server:
        yield server


def new_key(server: RunningServer, **limits: Any) -> str:
    response = httpx.post(
        f"{server.url}/v1/admin/keys",
        json={"name": "test", **limits},
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["key"])


def as_key(
    server: RunningServer, key: str, method: str, path: str, **kwargs: Any
) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.request(method, f"{server.url}/v1{path}", headers=headers, timeout=120, **kwargs)


def stored_ids(server: RunningServer, key: str) -> set[str]:
    voices = as_key(server, key, "GET", "/audio/voices").json()["voices"]
    return {card["id"] for card in voices if card["type"] == "audio_sample"}


def test_a_cloned_voice_is_its_keys_own(keyed_pocket: RunningServer) -> None:
    alice, bob = new_key(keyed_pocket), new_key(keyed_pocket)
    with sdk_client(keyed_pocket, alice) as sdk:
        mine = clone(sdk, "mine", speech())
    body = {"model": "pocket", "input": TEXT, "response_format": "pcm"}
    # Another key does not see it: not listed, not found, not spoken with, not deleted.
    assert mine.id not in stored_ids(keyed_pocket, bob)
    assert as_key(keyed_pocket, bob, "GET", f"/audio/voices/{mine.id}").status_code == 404
    for voice in ("mine", {"id": mine.id}):
        refused = as_key(keyed_pocket, bob, "POST", "/audio/speech", json=body | {"voice": voice})
        assert refused.status_code == 400, refused.text
        assert error_code(refused) == "voice_not_found"
    assert as_key(keyed_pocket, bob, "DELETE", f"/audio/voices/{mine.id}").status_code == 404
    # Nor through a routed model.
    routed = body | {"model": "routed"}
    for voice in ("mine", {"id": mine.id}):
        refused = as_key(keyed_pocket, bob, "POST", "/audio/speech", json=routed | {"voice": voice})
        assert refused.status_code == 400, refused.text
        assert error_code(refused) == "voice_not_found"
        spoken = as_key(
            keyed_pocket, alice, "POST", "/audio/speech", json=routed | {"voice": voice}
        )
        assert spoken.status_code == 200, spoken.text
        assert spoken.headers["x-speechgate-provider"] == "here"
    # Names are per key: the other key may have its own "mine".
    with sdk_client(keyed_pocket, bob) as sdk:
        theirs = clone(sdk, "mine", speech())
    assert stored_ids(keyed_pocket, bob) == {theirs.id}
    # Its owner still has it, by name and by id; the stored voice records the owner.
    assert stored_ids(keyed_pocket, alice) == {mine.id}
    for voice in ("mine", {"id": mine.id}):
        spoken = as_key(keyed_pocket, alice, "POST", "/audio/speech", json=body | {"voice": voice})
        assert spoken.status_code == 200, spoken.text
    stored = keyed_pocket.runtime.voices.library.get(mine.id)
    assert stored.owner is not None
    # The admin key sees and speaks with every key's voices.
    assert {mine.id, theirs.id} <= stored_ids(keyed_pocket, ADMIN_KEY)
    by_admin = as_key(
        keyed_pocket, ADMIN_KEY, "POST", "/audio/speech", json=body | {"voice": {"id": theirs.id}}
    )
    assert by_admin.status_code == 200, by_admin.text
    assert as_key(keyed_pocket, alice, "DELETE", f"/audio/voices/{mine.id}").status_code == 200
    assert (
        as_key(keyed_pocket, ADMIN_KEY, "DELETE", f"/audio/voices/{theirs.id}").status_code == 200
    )


def test_cloning_is_held_to_the_keys_models_and_rate_and_metered(
    keyed_pocket: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    espeak_only = new_key(keyed_pocket, models=["espeak"])
    with sdk_client(keyed_pocket, espeak_only) as sdk:
        for model in ({}, {"model": "pocket"}):
            with pytest.raises(openai.PermissionDeniedError) as denied:
                clone(sdk, "not allowed", speech(), **model)
            assert denied.value.code == "model_not_allowed"
    assert stored_ids(keyed_pocket, ADMIN_KEY) & stored_ids(keyed_pocket, espeak_only) == set()

    seconds = [0.0]
    monkeypatch.setattr(keyed_pocket.state.tenancy, "clock", lambda: seconds[0])
    limited = new_key(keyed_pocket, requests_per_second=0.5, burst=2)
    with sdk_client(keyed_pocket, limited) as sdk:
        made = [clone(sdk, f"rated {n}", speech()) for n in range(2)]
        with pytest.raises(openai.RateLimitError) as raised:
            clone(sdk, "one too many", speech())
        assert raised.value.code == "rate_limit_exceeded"
    assert stored_ids(keyed_pocket, limited) == {voice.id for voice in made}

    def requests() -> int:
        report = as_key(keyed_pocket, limited, "GET", "/usage").json()
        return int(report["total"]["requests"])

    # A usage record for each clone, the refused one included.
    wait_for(lambda: requests() == 3)


def test_parallel_uploads_and_deletes_of_one_voice(pocket_server: RunningServer) -> None:
    url = f"{pocket_server.url}/v1/audio/voices"
    sample = speech()

    def upload(_: int) -> int:
        files = {"audio_sample": ("twin.wav", sample, "audio/wav")}
        return httpx.post(url, data={"name": "twin"}, files=files, timeout=120).status_code

    with ThreadPoolExecutor(10) as pool:
        assert sorted(pool.map(upload, range(10))) == [200] + [409] * 9
        [twin] = [card for card in httpx.get(url).json()["voices"] if card["name"] == "twin"]
        deletes = pool.map(lambda _: httpx.delete(f"{url}/{twin['id']}").status_code, range(10))
        assert sorted(deletes) == [200] + [404] * 9
