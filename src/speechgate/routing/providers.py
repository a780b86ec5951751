"""Providers: what can serve a speech request. Today's local engine pools, or a remote
upstream reached over HTTP: an OpenAI-compatible one, or one speaking ElevenLabs' API.

`open` returns once the provider has produced its first audio, or raises: up to that point
nothing has reached the client, so the router may still try another provider.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import logging
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote

import httpx

from speechgate import tracing
from speechgate.audio.clip import UndecodableAudio
from speechgate.audio.decode import decode_speech
from speechgate.audio.formats import FORMAT_NAMES, AudioFormat
from speechgate.errors import (
    InvalidRequest,
    SpeechgateError,
    UpstreamBadResponse,
    UpstreamRejected,
)
from speechgate.metering.meter import Metered
from speechgate.metering.tenancy import Caller
from speechgate.openai_upstream import raise_for_error, upstream_errors
from speechgate.routing.answer_check import SSE_CONTENT_TYPE, AnswerCheck
from speechgate.routing.config import (
    ElevenLabsProviderConfig,
    LocalProviderConfig,
    RemoteProviderConfig,
)
from speechgate.speech_request import SpeechRequest
from speechgate.timing import WordFeed, WordsFromCharacters, WordTime, estimate_words
from speechgate.voices.naming import primary_language

log = logging.getLogger(__name__)

SPEECH_PATH = "audio/speech"
# What an OpenAI-compatible server speaks at when a request names no rate.
OPENAI_SAMPLE_RATE = 24000
# The upstream's headers that describe its audio; relayed (a speechgate upstream sends them).
_RELAYED_PREFIX = "x-speechgate-"
_OWN_HEADERS = ("x-speechgate-time-to-first-audio-ms",)
# Relayed from an upstream error: they say when a retry may succeed.
_RETRY_HEADERS = ("retry-after", "retry-after-ms")


@dataclass
class Relayed:
    """The progress of a relayed response."""

    time_to_first_audio: float
    audio_seconds: float = 0.0
    """Counted for `pcm` and `wav` (from their length); 0 for compressed formats."""
    completed: bool = False


@dataclass
class Answer:
    """A response whose first audio exists: its headers and body (the first audio included)."""

    media_type: str
    body: AsyncGenerator[bytes]
    """Iterate once at most; then (or instead) `aclose` the answer, which stops the provider's
    work."""
    progress: Metered
    headers: dict[str, str] = field(default_factory=dict)
    provider: str = "local"
    """The provider that answered (the router names it)."""
    engine: str = ""
    """The engine that spoke, where the provider says (this server's, or a speechgate
    upstream's)."""
    on_close: Callable[[], Awaitable[None]] | None = None
    """What ends the provider's work and bookkeeping; `aclose` runs it."""
    words: WordFeed | None = None
    """For a request with `word_times`: after each bytes the body yields, the words first
    known with them (characters of the request's text, seconds from the start of the body's
    audio); what is left when the body ends comes with no audio of its own."""

    @property
    def time_to_first_audio(self) -> float:
        # An answer exists once its first audio does.
        return self.progress.time_to_first_audio or 0.0

    async def aclose(self) -> None:
        """End the answer however far its body got, also when nobody ever iterated it (an
        async generator never started runs no `finally`): close the body, then run `on_close`,
        once."""
        try:
            await self.body.aclose()
        finally:
            on_close, self.on_close = self.on_close, None
            if on_close is not None:
                await on_close()


class Provider(Protocol):
    """Something that serves `POST /v1/audio/speech`. Safe to share between the requests of
    one event loop."""

    name: str

    async def open(self, request: SpeechRequest, request_id: str, caller: Caller) -> Answer:
        """Start the request; return when its first audio exists. Raises SpeechgateError
        (a 429 or 5xx means the provider failed, anything else that the request is wrong).
        `caller`: who asks; `caller.owner` decides which stored voices they may name."""
        ...

    async def aclose(self) -> None:
        """Release connections; call when no request uses the provider any more."""
        ...


def counts_as_failure(error: BaseException) -> bool:
    """Whether an error says the provider is unhealthy, rather than that the request is bad:
    overload (429), its own failures (5xx), timeouts and lost connections (502/504), and
    anything unexpected."""
    if isinstance(error, SpeechgateError):
        return error.status_code == 429 or error.status_code >= 500
    return True


def _mapped(request: SpeechRequest, model: str | None, voices: dict[str, str]) -> SpeechRequest:
    """`request` with the provider's own model and voice names."""
    return dataclasses.replace(
        request,
        model=request.model if model is None else model,
        voice=voices.get(request.voice, request.voice),
    )


def _seconds_per_byte(request: SpeechRequest) -> float:
    """Seconds of audio per byte of an uncompressed (mono) body; 0 if compressed. A WAV's
    44-byte header counts as 1 ms at most: a rounding error for usage records."""
    fmt = request.format
    width = fmt.format.sample_width
    if request.stream_format != "audio" or width is None:
        return 0.0
    return 1 / (width * (fmt.sample_rate or request.sample_rate or OPENAI_SAMPLE_RATE))


def openai_body(request: SpeechRequest) -> dict[str, Any]:
    """The body of OpenAI's `POST /audio/speech` for `request`. Fields at their defaults are
    left out, so that an upstream that knows only OpenAI's fields is sent nothing else unless
    the client asked for it (speechgate's extensions: `sample_rate`, `seed`, `language`,
    `reference_audio`, `timestamp_granularities`, `apply_text_normalization`, `ssml`)."""
    body: dict[str, Any] = {
        "model": request.model,
        "input": request.text,
        "voice": request.voice,
        "response_format": request.format.name,
    }
    if request.speed != 1.0:
        body["speed"] = request.speed
    if request.stream_format != "audio":
        body["stream_format"] = request.stream_format
    if request.word_times and request.stream_format == "sse":
        # Beside raw audio, OpenAI's route has no place for them: they are estimated here.
        body["timestamp_granularities"] = ["word"]
    optional = {
        "instructions": request.instructions,
        "sample_rate": request.sample_rate,
        "seed": request.seed,
        "language": request.language,
        "reference_audio": None
        if request.reference_audio is None
        else base64.b64encode(request.reference_audio).decode(),
        "apply_text_normalization": None
        if request.normalization == "auto"
        else request.normalization,
        "ssml": request.ssml,
    }
    body |= {name: value for name, value in optional.items() if value is not None}
    return body


@dataclass(frozen=True)
class Piece:
    """Audio from an upstream, and the words first known with it."""

    audio: bytes
    words: tuple[WordTime, ...] = ()


async def _untimed(response: httpx.Response) -> AsyncGenerator[Piece]:
    async for chunk in response.aiter_bytes():
        yield Piece(chunk)


async def _first_pieces(pieces: AsyncIterator[Piece], check: AnswerCheck) -> list[Piece]:
    """The body's first pieces: the first, and as many more as `check` needs to decide that
    the body is the audio asked for (it raises if not)."""
    firsts: list[Piece] = []
    while not firsts or not check.decided:
        piece = await anext(pieces, None)
        if piece is None:
            check.end()
            break
        firsts.append(piece)
        check.feed(piece.audio)
    return firsts


LocalServe = Callable[[SpeechRequest, Caller], Awaitable[Answer]]
"""The local part of the serving path (`speechgate.serving.Serving.serve_locally`), as the
floor above routing gives it to the local provider: `(request, caller)` -> the answer an
unrouted request would get (headers, SSE), once its first audio exists. The caller was
admitted before routing; routing calls it and knows nothing of the service behind it."""


class LocalProvider:
    """This server's worker pools, through the same serving path as unrouted requests."""

    def __init__(self, name: str, config: LocalProviderConfig, serve: LocalServe) -> None:
        self.name = name
        self.config = config
        self._serve = serve

    async def open(self, request: SpeechRequest, request_id: str, caller: Caller) -> Answer:
        return await self._serve(_mapped(request, self.config.model, self.config.voices), caller)

    async def aclose(self) -> None:
        pass


class _Relay:
    """An upstream reached over HTTP, through one pooled client. The upstream's bytes are
    relayed as they arrive: nothing is buffered beyond the chunk in hand, but for the first
    bytes, held until they show that the body is the format asked for (`AnswerCheck`).
    Subclasses say how a request and the upstream's errors are spelled."""

    def __init__(
        self,
        name: str,
        config: RemoteProviderConfig | ElevenLabsProviderConfig,
        auth_headers: dict[str, str],
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.name = name
        self._clock = clock
        self._what = f"speech upstream {name!r}"
        self._base_url = config.base_url
        self._timeout = config.timeout
        self._client = httpx.AsyncClient(
            base_url=config.base_url,
            headers=auth_headers,
            timeout=httpx.Timeout(config.timeout, connect=config.connect_timeout),
            limits=httpx.Limits(
                max_connections=config.max_connections,
                max_keepalive_connections=config.max_connections,
            ),
            verify=(
                True
                if config.ca_bundle is None
                else ssl.create_default_context(cafile=config.ca_bundle)
            ),
            # Only settings.py reads the environment: no proxy or CA variables from here.
            trust_env=False,
        )

    def _request(self, request: SpeechRequest, request_id: str) -> httpx.Request:
        raise NotImplementedError

    def _raise_for_error(self, response: httpx.Response) -> None:
        raise NotImplementedError

    def _headers(self, request: SpeechRequest) -> dict[str, str]:
        """Headers of this provider's own to add to the answer."""
        return {}

    def _wraps_audio(self, request: SpeechRequest) -> bool:
        """Whether the upstream's body wraps the audio in a framing of this API's own (its
        `Content-Type` is that framing's, not the audio's)."""
        return False

    def _pieces(self, request: SpeechRequest, response: httpx.Response) -> AsyncIterator[Piece]:
        """The upstream's body as audio, and the words first known with it for a request with
        word times beside its audio."""
        if not request.words_beside_audio:
            return _untimed(response)
        return self._timed_pieces(request, response)

    def _timed_pieces(
        self, request: SpeechRequest, response: httpx.Response
    ) -> AsyncIterator[Piece]:
        """`_pieces` with each piece's words, as this upstream's API can tell them."""
        raise NotImplementedError

    async def open(self, request: SpeechRequest, request_id: str, caller: Caller) -> Answer:
        # The upstream's own keys decide what its voices are; `caller` means nothing there.
        started = self._clock()
        upstream_request = self._request(request, request_id)
        # A traced upstream (another speechgate) goes on with this request's trace.
        upstream_request.headers.update(tracing.propagation_headers())
        with upstream_errors(self._base_url, self._timeout, self._what):
            response = await self._client.send(upstream_request, stream=True)
        try:
            if not response.is_success:
                with upstream_errors(self._base_url, self._timeout, self._what):
                    await response.aread()
                self._raise_for_error(response)
            check = AnswerCheck(request, self._what)
            if not self._wraps_audio(request):
                check.media_type(response.headers.get("content-type"))
            pieces = self._pieces(request, response)
            with upstream_errors(self._base_url, self._timeout, self._what):
                firsts = await _first_pieces(pieces, check)
        except BaseException:
            await response.aclose()
            raise
        headers = {
            name: value
            for name, value in response.headers.items()
            if name.startswith(_RELAYED_PREFIX) and name not in _OWN_HEADERS
        }
        headers |= self._headers(request)
        progress = Relayed(self._clock() - started)
        timed = request.words_beside_audio
        words = WordFeed() if timed else None
        # Checked to be what was asked for: named as speechgate names it, whatever the label.
        media_type = (
            SSE_CONTENT_TYPE
            if request.stream_format == "sse"
            else request.format.format.content_type
        )
        return Answer(
            media_type=media_type,
            body=self._relay(firsts, pieces, response, progress, _seconds_per_byte(request), words),
            progress=progress,
            headers=headers,
            on_close=response.aclose,
            words=words,
            engine=response.headers.get("x-speechgate-engine", ""),
        )

    async def _relay(
        self,
        firsts: list[Piece],
        pieces: AsyncIterator[Piece],
        response: httpx.Response,
        progress: Relayed,
        seconds_per_byte: float,
        words: WordFeed | None,
    ) -> AsyncGenerator[bytes]:
        try:
            for first in firsts:
                if words is not None:
                    words.add(first.words)
                if first.audio:
                    progress.audio_seconds += len(first.audio) * seconds_per_byte
                    yield first.audio
            with upstream_errors(self._base_url, self._timeout, self._what):
                async for piece in pieces:
                    if words is not None:
                        words.add(piece.words)
                    if piece.audio:
                        progress.audio_seconds += len(piece.audio) * seconds_per_byte
                        yield piece.audio
            progress.completed = True
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()


class RemoteProvider(_Relay):
    """An OpenAI-compatible upstream."""

    def __init__(
        self,
        name: str,
        config: RemoteProviderConfig,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        key = config.api_key
        auth = {} if key is None else {"Authorization": f"Bearer {key.get_secret_value()}"}
        super().__init__(name, config, auth, clock)
        self.config = config

    def _request(self, request: SpeechRequest, request_id: str) -> httpx.Request:
        payload = openai_body(_mapped(request, self.config.model, self.config.voices))
        return self._client.build_request(
            "POST", SPEECH_PATH, json=payload, headers={"x-request-id": request_id}
        )

    def _raise_for_error(self, response: httpx.Response) -> None:
        raise_for_error(response, self._what)

    async def _timed_pieces(
        self, request: SpeechRequest, response: httpx.Response
    ) -> AsyncGenerator[Piece]:
        """The whole body with its words, estimated from its sound: OpenAI's API cannot say
        when words are heard, and the estimate needs all of the text's audio."""
        data = b"".join([chunk async for chunk in response.aiter_bytes()])
        raw_rate = request.format.sample_rate or request.sample_rate or OPENAI_SAMPLE_RATE
        try:
            # Decoding and measuring are CPU work: off the event loop.
            pcm = await asyncio.to_thread(decode_speech, data, request.format.format, raw_rate)
        except UndecodableAudio as error:
            raise UpstreamBadResponse(
                f"The {self._what} sent {request.format.name} audio that does not decode: {error}"
            ) from None
        words = await asyncio.to_thread(estimate_words, request.text, pcm)
        yield Piece(data, tuple(words))


class ElevenLabsProvider(_Relay):
    """An upstream speaking ElevenLabs' API: ElevenLabs, or another speechgate's ElevenLabs
    front end. Always its streaming route, so the first audio comes as soon as it exists."""

    def __init__(
        self,
        name: str,
        config: ElevenLabsProviderConfig,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        key = config.api_key
        super().__init__(
            name, config, {} if key is None else {"xi-api-key": key.get_secret_value()}, clock
        )
        self.config = config

    def _request(self, request: SpeechRequest, request_id: str) -> httpx.Request:
        config = self.config
        model = config.models.get(request.model, config.model or request.model)
        path, params, body = elevenlabs_request(_mapped(request, model, config.voices))
        return self._client.build_request(
            "POST", path, params=params, json=body, headers={"x-request-id": request_id}
        )

    def _raise_for_error(self, response: httpx.Response) -> None:
        raise_for_elevenlabs_error(response, self._what)

    async def _timed_pieces(
        self, request: SpeechRequest, response: httpx.Response
    ) -> AsyncGenerator[Piece]:
        """The upstream's with-timestamps lines, its characters turned back into words of the
        text (which it was sent as is: its `alignment` is over that text)."""
        words = WordsFromCharacters(request.text)
        async for line in response.aiter_lines():
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                audio = base64.b64decode(item.get("audio_base64") or "", validate=True)
                alignment = item.get("alignment")
                known = (
                    words.add(
                        alignment["characters"],
                        alignment["character_start_times_seconds"],
                        alignment["character_end_times_seconds"],
                    )
                    if alignment
                    else []
                )
            except (ValueError, TypeError, KeyError, AttributeError) as error:
                log.warning("%s sent a line outside ElevenLabs' shape: %.200r", self._what, line)
                raise UpstreamBadResponse(
                    f"The {self._what} sent a with-timestamps line outside ElevenLabs' shape "
                    f"({error})."
                ) from None
            yield Piece(audio, tuple(known))

    def _wraps_audio(self, request: SpeechRequest) -> bool:
        # The with-timestamps route sends JSON lines, each with its audio in base64.
        return request.words_beside_audio

    def _headers(self, request: SpeechRequest) -> dict[str, str]:
        # ElevenLabs' API has no instructions to send them with.
        return {"x-speechgate-instructions": "ignored"} if request.instructions else {}


# ElevenLabs' MP3 names, by the rate each fixes.
_ELEVENLABS_MP3 = {44100: "mp3_44100_128", 24000: "mp3_24000_48", 22050: "mp3_22050_32"}


def elevenlabs_output_format(request: SpeechRequest) -> str:
    """ElevenLabs' `output_format` name for the request's format and rate. Raises
    InvalidRequest for what ElevenLabs cannot send (AAC, FLAC, a rate it has no name for)."""
    fmt = request.format
    if fmt.sample_rate is not None:
        # Already one of ElevenLabs' names (`pcm_16000`, `ulaw_8000`, ...).
        return fmt.name
    rate = request.sample_rate
    name: str | None = None
    if fmt.format in (AudioFormat.PCM, AudioFormat.WAV):
        name = f"{fmt.format}_{rate or OPENAI_SAMPLE_RATE}"
    elif fmt.format is AudioFormat.MP3:
        # MP3 says its own rate: without one asked for, ElevenLabs' default.
        name = _ELEVENLABS_MP3.get(rate or 44100)
    elif fmt.format is AudioFormat.OPUS and rate in (None, 48000):
        name = "opus_48000_64"
    if name is None or name not in FORMAT_NAMES:
        at = f" at {rate} Hz" if rate else ""
        raise InvalidRequest(
            f"The provider speaks ElevenLabs' API, which has no {fmt.name!r} output{at}: ask "
            "for mp3, opus, wav, pcm or an ElevenLabs output_format name.",
            param="response_format",
            code="unsupported_format",
        )
    return name


def elevenlabs_request(request: SpeechRequest) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The path, query and body of ElevenLabs' `POST /v1/text-to-speech/{voice_id}/stream`
    (`/stream/with-timestamps` for a request with `word_times`) for `request`. Raises
    InvalidRequest for what that API cannot carry."""
    if request.stream_format != "audio":
        raise InvalidRequest(
            "The provider speaks ElevenLabs' API, which does not send server-sent events.",
            param="stream_format",
        )
    if request.reference_audio is not None:
        raise InvalidRequest(
            "The provider speaks ElevenLabs' API, which cannot clone a voice per request.",
            param="reference_audio",
        )
    body: dict[str, Any] = {"text": request.text, "model_id": request.model}
    if request.speed != 1.0:
        body["voice_settings"] = {"speed": request.speed}
    if request.language is not None:
        # ElevenLabs takes ISO 639-1 codes, not BCP 47 tags with a region.
        body["language_code"] = primary_language(request.language)
    if request.seed is not None:
        body["seed"] = request.seed
    path = f"v1/text-to-speech/{quote(request.voice, safe='')}/stream"
    if request.words_beside_audio:
        path += "/with-timestamps"
    return path, {"output_format": elevenlabs_output_format(request)}, body


def raise_for_elevenlabs_error(response: httpx.Response, what: str) -> None:
    """Raise unless `response` is a 2xx, relaying ElevenLabs' error
    (`{"detail": {"status", "message"}}`, or FastAPI's `{"detail": [...]}`) with its status."""
    if response.is_success:
        return
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    code: str | None = None
    if isinstance(detail, dict) and isinstance(detail.get("message"), str):
        message, status = detail["message"], detail.get("status")
        code = status if isinstance(status, str) else None
    elif isinstance(detail, list) and detail and isinstance(detail[0], dict):
        message = str(detail[0].get("msg", "invalid request"))
    elif isinstance(detail, str):
        message = detail
    else:
        log.warning("%s answered %d: %.200r", what, response.status_code, response.text)
        raise UpstreamBadResponse(
            f"The {what} answered {response.status_code} without an ElevenLabs error body."
        )
    status_code = response.status_code
    raise UpstreamRejected(
        status_code,
        message,
        error_type="invalid_request_error" if status_code < 500 else "server_error",
        code=code,
        headers={
            name: response.headers[name] for name in _RETRY_HEADERS if name in response.headers
        },
    )
