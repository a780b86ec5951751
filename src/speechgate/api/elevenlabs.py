"""ElevenLabs' API, as its SDKs speak it: text to speech, voices and models.

The routes translate ElevenLabs' wire format into a `SpeechRequest` and serve it through the
same admission, metering, routing and service as `POST /v1/audio/speech`. Errors leave in
ElevenLabs' shape, `{"detail": {"status": "<code>", "message": "..."}}`, which its SDKs hand
to callers as the error's `body`.

`GET /v1/models` is OpenAI's route too. ElevenLabs' clients always send `xi-api-key` (the API
refuses requests without it), OpenAI's never do, so the header picks the shape: with it, a bare
array of ElevenLabs model objects; without, OpenAI's list.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncGenerator, Callable, Coroutine
from datetime import UTC
from typing import Annotated, Any, cast, get_args

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException
from starlette.routing import Match
from starlette.types import Scope

from speechgate.api.access import CurrentPrincipal
from speechgate.api.error_handlers import http_error, validation_error
from speechgate.api.http import (
    AUDIO_CONTENT,
    AnswerResponse,
    ClientGone,
    open_answer,
    require_json,
    respond,
    unless_disconnected,
)
from speechgate.api.schemas import DictionaryLocators
from speechgate.api.state import app_state, get_catalog, get_voices
from speechgate.audio.formats import OutputFormat, parse_format
from speechgate.catalog import Catalog, Model, normalize
from speechgate.cloning.cloner import VoiceCloning
from speechgate.cloning.library import VoiceNotStored
from speechgate.errors import (
    EngineFailed,
    InvalidRequest,
    ModelNotFound,
    NotFound,
    SpeechgateError,
    Unprocessable,
    VoiceNotFound,
    VoiceNotInstalled,
)
from speechgate.metering.store import StoredDictionary
from speechgate.routing.providers import Answer
from speechgate.routing.router import Router
from speechgate.speech_request import Normalization, SpeechRequest
from speechgate.text.lexicon import InvalidLexicon, Lexicon
from speechgate.timing import (
    CharacterAligner,
    CharacterAlignment,
    WordFeed,
    WordTime,
    character_alignment,
)
from speechgate.voices.naming import primary_language

log = logging.getLogger(__name__)

DEFAULT_MODEL_ID = "eleven_multilingual_v2"
"""What ElevenLabs speaks with when a request names no model."""
DEFAULT_OUTPUT_FORMAT = "mp3_44100_128"
"""ElevenLabs' default `output_format`."""
ELEVENLABS_MODEL_IDS = (
    "eleven_multilingual_v2",
    "eleven_v3",
    "eleven_flash_v2_5",
    "eleven_turbo_v2_5",
    "eleven_flash_v2",
    "eleven_turbo_v2",
    "eleven_multilingual_v1",
    "eleven_monolingual_v1",
)
"""ElevenLabs' own model ids, listed as aliases of the default model. Any other `eleven_` id is
taken the same way: clients pick among them for speed or quality, which here is one choice."""
_ELEVENLABS_PREFIX = "eleven_"
_DEFAULT_MODEL = "tts-1"
"""The catalog's alias for the default engine, which ElevenLabs' model ids stand for."""
NDJSON = "application/x-ndjson"
IGNORED_HEADER = "x-speechgate-ignored"
"""Names the request's fields that were accepted but have no effect here."""


# --- errors ---------------------------------------------------------------------------------


def elevenlabs_error_response(error: SpeechgateError) -> JSONResponse:
    """`error` in ElevenLabs' shape. An unknown voice is 404 there (400 on OpenAI's route)."""
    status = error.status_code
    code = error.code or error.error_type
    if isinstance(error, VoiceNotFound | VoiceNotInstalled | VoiceNotStored):
        status, code = 404, "voice_not_found"
    if status >= 500:
        log.error("%s: %s", type(error).__name__, error.message)
    return JSONResponse(
        {"detail": {"status": code, "message": error.message}},
        status_code=status,
        headers=error.headers,
    )


class ElevenLabsRoute(APIRoute):
    """A route whose errors, from its dependencies (the key, the limits) and body validation
    included, leave in ElevenLabs' shape rather than through the app's OpenAI handlers."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except SpeechgateError as error:
                return elevenlabs_error_response(error)
            except HTTPException as failed:
                # FastAPI's own, such as a body it cannot parse.
                return elevenlabs_error_response(http_error(failed))
            except RequestValidationError as invalid:
                found = validation_error(invalid)
                return elevenlabs_error_response(
                    Unprocessable(found.message, param=found.param, code=found.code)
                )

        return handle


class _KeyedRoute(ElevenLabsRoute):
    """Matches only requests with an `xi-api-key` header: ElevenLabs' clients, on a path
    another API also serves."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if not any(name == b"xi-api-key" for name, _ in scope.get("headers", ())):
            return Match.NONE, {}
        return super().matches(scope)


# --- wire models ----------------------------------------------------------------------------


class ElevenLabsErrorDetail(BaseModel):
    status: str
    """A code: `invalid_api_key`, `voice_not_found`, `invalid_output_format`, ..."""
    message: str


class ElevenLabsError(BaseModel):
    """ElevenLabs' error shape."""

    detail: ElevenLabsErrorDetail


router = APIRouter(
    route_class=ElevenLabsRoute,
    tags=["ElevenLabs"],
    responses={
        status: {"model": ElevenLabsError, "description": "An error, in ElevenLabs' shape."}
        for status in (400, 401, 403, 404, 415, 422, 429, 500, 503)
    },
)


class VoiceSettings(BaseModel):
    # Later ElevenLabs fields (clone strength, ...) are accepted and have no effect.
    model_config = ConfigDict(extra="ignore")

    stability: float | None = Field(default=None, ge=0, le=1, description="Ignored.")
    similarity_boost: float | None = Field(default=None, ge=0, le=1, description="Ignored.")
    style: float | None = Field(default=None, ge=0, le=1, description="Ignored.")
    use_speaker_boost: bool | None = Field(default=None, description="Ignored.")
    speed: float | None = Field(default=None, ge=0.25, le=4.0, description="Honoured.")


class TextToSpeechBody(BaseModel):
    """ElevenLabs' text-to-speech body. Fields it has that do not apply here (request
    stitching ids) are accepted and ignored."""

    model_config = ConfigDict(extra="ignore")

    text: str = Field(min_length=1)
    model_id: str | None = Field(
        default=None,
        description="A speechgate model or alias; ElevenLabs' `eleven_*` ids mean the default "
        "model.",
    )
    voice_settings: VoiceSettings | None = None
    language_code: str | None = Field(default=None, description="ISO 639-1, e.g. `de`.")
    seed: int | None = Field(
        default=None, ge=0, le=4294967295, description="Honoured where the engine can."
    )
    apply_text_normalization: str | None = Field(
        default=None,
        description="`auto` (the server's setting, on unless changed), `on` or `off`: whether "
        'numbers, dates, units and abbreviations are read as meant ("$5.20" as "five dollars '
        'and twenty cents").',
    )
    pronunciation_dictionary_locators: DictionaryLocators = Field(default_factory=list)
    previous_text: str | None = Field(default=None, description="Accepted; ignored.")
    next_text: str | None = Field(default=None, description="Accepted; ignored.")


class Language(BaseModel):
    language_id: str
    name: str


class ModelObject(BaseModel):
    model_id: str
    name: str
    description: str
    can_do_text_to_speech: bool = True
    can_do_voice_conversion: bool = False
    can_use_style: bool = False
    can_use_speaker_boost: bool = False
    can_be_finetuned: bool = False
    serves_pro_voices: bool = False
    languages: list[Language]


class VoiceObject(BaseModel):
    voice_id: str
    name: str
    category: str
    """`premade` for an engine's voices, `cloned` for a stored one."""
    labels: dict[str, str]
    """language, gender, quality where known; `model`: the speechgate model that speaks it."""
    description: str | None = None
    high_quality_base_model_ids: list[str]
    """The speechgate model to send as `model_id` with this voice."""
    created_at_unix: int | None = None


class Alignment(BaseModel):
    """When each character of the text is heard, in seconds from the start of the audio."""

    characters: list[str]
    character_start_times_seconds: list[float]
    character_end_times_seconds: list[float]


class AudioWithTimestamps(BaseModel):
    """The with-timestamps routes' answer; the streaming route's lines each have this shape."""

    audio_base64: str
    alignment: Alignment | None
    """Over the text as sent."""
    normalized_alignment: Alignment | None
    """Over the text as spoken: each word as it was read ("five dollars" for "$5")."""


class VoicesResponse(BaseModel):
    voices: list[VoiceObject]


# --- text to speech -------------------------------------------------------------------------


def _output_format(name: str) -> OutputFormat:
    try:
        return parse_format(name)
    except ValueError as error:
        raise Unprocessable(
            str(error)[0].upper() + str(error)[1:] + ".",
            param="output_format",
            code="invalid_output_format",
        ) from None


def _model(routing: Router | None, catalog: Catalog, model_id: str | None) -> str:
    """The speechgate model for ElevenLabs' `model_id` (absent: ElevenLabs' default): a route's
    or the catalog's own name as it is, else ElevenLabs' ids the default model."""
    model_id = model_id or DEFAULT_MODEL_ID
    if routing is not None and routing.serves(model_id):
        return model_id
    try:
        catalog.model(model_id)
    except ModelNotFound:
        if model_id.startswith(_ELEVENLABS_PREFIX):
            return _DEFAULT_MODEL
    return model_id


def _seed(routed: bool, catalog: Catalog, model: str, seed: int | None) -> int | None:
    """The seed, for an engine that can repeat itself; else dropped. ElevenLabs itself only
    tries to be deterministic, so a client cannot count on it: better spoken than refused.
    A routed request keeps it: its provider decides."""
    if seed is None or routed:
        return seed
    try:
        return seed if catalog.model(model).engine.supports_seed else None
    except ModelNotFound:
        # Planning will say so.
        return seed


def _normalization(value: str | None) -> Normalization:
    """ElevenLabs' `apply_text_normalization`, checked here rather than by the body's model: a
    value it does not know is a 400 naming it, as ElevenLabs answers."""
    if value is None:
        return "auto"
    if value not in get_args(Normalization):
        raise InvalidRequest(
            f"`apply_text_normalization` must be `auto`, `on` or `off`, not {value!r}.",
            param="apply_text_normalization",
            code="invalid_value",
        )
    return cast(Normalization, value)


def _ignored(body: TextToSpeechBody, seed: int | None) -> list[str]:
    settings = body.voice_settings
    names = [
        f"voice_settings.{name}"
        for name in ("stability", "similarity_boost", "style", "use_speaker_boost")
        if settings is not None and getattr(settings, name) is not None
    ]
    names += [name for name in ("previous_text", "next_text") if getattr(body, name) is not None]
    if body.seed is not None and seed is None:
        names.append("seed")
    return names


_AUDIO: dict[int | str, dict[str, Any]] = {
    200: {"description": "The audio, streamed.", "content": AUDIO_CONTENT},
}
VoiceId = Annotated[str, Path(description="A voice id from `GET /v1/voices`, or a voice name.")]
OutputFormatQuery = Annotated[
    str,
    Query(
        description="`mp3_44100_128`, `pcm_24000`, `ulaw_8000`, `opus_48000_64`, ... or one of "
        "OpenAI's names."
    ),
]
LatencyQuery = Annotated[
    int | None, Query(ge=0, le=4, description="Accepted; speechgate always streams at once.")
]


def _translate(
    request: Request,
    voice_id: str,
    body: TextToSpeechBody,
    output_format: str,
    word_times: bool = False,
) -> tuple[SpeechRequest, dict[str, str]]:
    """The body as a speech request; and the headers that say what was ignored."""
    fmt = _output_format(output_format)
    normalization = _normalization(body.apply_text_normalization)
    state = app_state(request)
    catalog, routing = state.runtime.catalog, state.router
    model = _model(routing, catalog, body.model_id)
    seed = _seed(routing is not None and routing.serves(model), catalog, model, body.seed)
    speed = body.voice_settings.speed if body.voice_settings else None
    speech = SpeechRequest(
        model=model,
        voice=voice_id,
        format=fmt,
        text=body.text,
        speed=1.0 if speed is None else speed,
        language=body.language_code,
        seed=seed,
        word_times=word_times,
        normalization=normalization,
        dictionaries=tuple(locator.locator() for locator in body.pronunciation_dictionary_locators),
    )
    ignored = _ignored(body, seed)
    return speech, {IGNORED_HEADER: ", ".join(ignored)} if ignored else {}


async def _speak(
    request: Request, voice_id: str, body: TextToSpeechBody, output_format: str
) -> Response:
    speech, headers = _translate(request, voice_id, body, output_format)
    return await respond(request, speech, headers=headers)


def _alignment(found: CharacterAlignment) -> Alignment:
    return Alignment(
        characters=found.characters,
        character_start_times_seconds=found.character_start_times_seconds,
        character_end_times_seconds=found.character_end_times_seconds,
    )


def _timed(data: bytes, found: CharacterAlignment, said: CharacterAlignment) -> AudioWithTimestamps:
    return AudioWithTimestamps(
        audio_base64=base64.b64encode(data).decode(),
        alignment=_alignment(found),
        normalized_alignment=_alignment(said),
    )


async def _whole(answer: Answer, feed: WordFeed, text: str) -> AudioWithTimestamps:
    audio = bytearray()
    words: list[WordTime] = []
    async for data in answer.body:
        audio += data
        words += feed.take()
    words += feed.take()
    return _timed(
        bytes(audio), character_alignment(text, words), character_alignment(text, words, True)
    )


async def _lines(answer: Answer, feed: WordFeed, text: str) -> AsyncGenerator[bytes]:
    """One NDJSON line per piece of audio, with the characters first known with it; the
    characters after the last word, if any, on a line of their own without audio."""
    written, said = CharacterAligner(text), CharacterAligner(text, spoken=True)
    async for data in answer.body:
        words = feed.take()
        line = _timed(data, written.add(words), said.add(words))
        yield line.model_dump_json().encode() + b"\n"
    words = feed.take()
    rest = written.add(words) + written.finish()
    rest_said = said.add(words) + said.finish()
    if rest.characters:
        yield _timed(b"", rest, rest_said).model_dump_json().encode() + b"\n"


async def _speak_timed(
    request: Request, voice_id: str, body: TextToSpeechBody, output_format: str, stream: bool
) -> Response:
    speech, headers = _translate(request, voice_id, body, output_format, word_times=True)
    answer = await open_answer(request, speech)
    if answer is None:
        return Response(status_code=499)
    feed = answer.words
    if feed is None:
        # Every provider honours `word_times`; without words each character would be at 0 s.
        await answer.aclose()
        raise EngineFailed(f"The provider {answer.provider!r} did not say when words are heard.")
    headers = answer.headers | headers
    if stream:
        lines = Answer(
            NDJSON,
            _lines(answer, feed, speech.text),
            answer.progress,
            headers,
            provider=answer.provider,
            on_close=answer.aclose,
        )
        return AnswerResponse(lines)
    try:
        whole = await unless_disconnected(request, _whole(answer, feed, speech.text))
    except ClientGone:
        return Response(status_code=499)
    finally:
        await answer.aclose()
    return JSONResponse(whole.model_dump(), headers=headers)


@router.post(
    "/v1/text-to-speech/{voice_id}",
    summary="Text to speech (ElevenLabs-compatible)",
    response_class=StreamingResponse,
    responses=_AUDIO,
    dependencies=[Depends(require_json)],
)
async def text_to_speech(
    request: Request,
    voice_id: VoiceId,
    body: TextToSpeechBody,
    output_format: OutputFormatQuery = DEFAULT_OUTPUT_FORMAT,
    optimize_streaming_latency: LatencyQuery = None,
    enable_logging: bool = True,
) -> Response:
    return await _speak(request, voice_id, body, output_format)


@router.post(
    "/v1/text-to-speech/{voice_id}/stream",
    summary="Text to speech, streamed (ElevenLabs-compatible)",
    response_class=StreamingResponse,
    responses=_AUDIO,
    dependencies=[Depends(require_json)],
)
async def text_to_speech_stream(
    request: Request,
    voice_id: VoiceId,
    body: TextToSpeechBody,
    output_format: OutputFormatQuery = DEFAULT_OUTPUT_FORMAT,
    optimize_streaming_latency: LatencyQuery = None,
    enable_logging: bool = True,
) -> Response:
    # The same as the route above: speechgate streams every response as its audio comes.
    return await _speak(request, voice_id, body, output_format)


@router.post(
    "/v1/text-to-speech/{voice_id}/with-timestamps",
    summary="Text to speech with character timestamps (ElevenLabs-compatible)",
    response_model=AudioWithTimestamps,
    dependencies=[Depends(require_json)],
)
async def text_to_speech_with_timestamps(
    request: Request,
    voice_id: VoiceId,
    body: TextToSpeechBody,
    output_format: OutputFormatQuery = DEFAULT_OUTPUT_FORMAT,
    optimize_streaming_latency: LatencyQuery = None,
    enable_logging: bool = True,
) -> Response:
    return await _speak_timed(request, voice_id, body, output_format, stream=False)


@router.post(
    "/v1/text-to-speech/{voice_id}/stream/with-timestamps",
    summary="Text to speech, streamed with character timestamps (ElevenLabs-compatible)",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "One `AudioWithTimestamps` JSON object a line, as the audio comes: "
            "each with the characters first known with its audio, times from the start of the "
            "stream.",
            "content": {NDJSON: {"schema": {"$ref": "#/components/schemas/AudioWithTimestamps"}}},
        }
    },
    dependencies=[Depends(require_json)],
)
async def text_to_speech_stream_with_timestamps(
    request: Request,
    voice_id: VoiceId,
    body: TextToSpeechBody,
    output_format: OutputFormatQuery = DEFAULT_OUTPUT_FORMAT,
    optimize_streaming_latency: LatencyQuery = None,
    enable_logging: bool = True,
) -> Response:
    return await _speak_timed(request, voice_id, body, output_format, stream=True)


# --- voices and models ----------------------------------------------------------------------


def _voice_objects(catalog: Catalog, voices: VoiceCloning, owner: str | None) -> list[VoiceObject]:
    builtin = [
        VoiceObject(
            voice_id=voice.id,
            name=voice.name,
            category="premade",
            labels={
                name: value
                for name, value in {
                    "language": voice.language and primary_language(voice.language),
                    "accent": voice.language,
                    "gender": voice.gender,
                    "quality": voice.quality,
                    "model": engine,
                }.items()
                if value
            },
            high_quality_base_model_ids=[engine],
        )
        for engine in catalog.engines
        for voice in catalog.voices(engine)
    ]
    stored = [
        VoiceObject(
            voice_id=voice.id,
            name=voice.name,
            category="cloned",
            labels={"model": voice.engine},
            high_quality_base_model_ids=[voice.engine],
            created_at_unix=voice.created_at,
        )
        for voice in voices.library.list(owner)
        if voice.engine in catalog.engines
    ]
    return builtin + stored


@router.get("/v1/voices", response_model=VoicesResponse, summary="Voices (ElevenLabs' shape)")
async def list_voices(
    principal: CurrentPrincipal,
    catalog: Annotated[Catalog, Depends(get_catalog)],
    voices: Annotated[VoiceCloning, Depends(get_voices)],
    show_legacy: bool = False,
) -> VoicesResponse:
    return VoicesResponse(voices=_voice_objects(catalog, voices, principal.key_id))


@router.get("/v1/voices/{voice_id}", response_model=VoiceObject, summary="One voice")
async def get_voice(
    voice_id: VoiceId,
    principal: CurrentPrincipal,
    catalog: Annotated[Catalog, Depends(get_catalog)],
    voices: Annotated[VoiceCloning, Depends(get_voices)],
) -> VoiceObject:
    wanted = normalize(voice_id)
    for voice in _voice_objects(catalog, voices, principal.key_id):
        if voice.voice_id == voice_id or normalize(voice.voice_id) == wanted:
            return voice
    raise NotFound(
        f"No voice has the voice_id {voice_id!r}; GET /v1/voices lists them.",
        param="voice_id",
        code="voice_not_found",
    )


def _model_object(catalog: Catalog, model: Model, alias_of: str | None = None) -> ModelObject:
    engine = model.engine
    languages = sorted(
        {primary_language(v.language) for v in catalog.voices(engine.name) if v.language}
    )
    description = f"speechgate's {engine.name} engine" + (
        f" ({alias_of}, as ElevenLabs' id)" if alias_of else ""
    )
    return ModelObject(
        model_id=model.id if alias_of is None else alias_of,
        name=model.id if alias_of is None else f"{alias_of} -> {model.id}",
        description=description,
        can_be_finetuned=engine.can_clone,
        languages=[Language(language_id=tag, name=tag) for tag in languages],
    )


async def list_models(catalog: Annotated[Catalog, Depends(get_catalog)]) -> list[Any]:
    models = [_model_object(catalog, model) for model in catalog.models]
    try:
        default = catalog.model(_DEFAULT_MODEL)
    except ModelNotFound:
        return models
    return models + [
        _model_object(catalog, default, alias_of=model_id) for model_id in ELEVENLABS_MODEL_IDS
    ]


router.add_api_route(
    "/v1/models",
    list_models,
    methods=["GET"],
    response_model=list[ModelObject],
    summary="Models (ElevenLabs' shape, for requests with xi-api-key)",
    # OpenAI's /v1/models documents the path; both in the schema would be one operation.
    include_in_schema=False,
    route_class_override=_KeyedRoute,
)


# --- pronunciation dictionaries -------------------------------------------------------------


class DictionaryRulesBody(BaseModel):
    """ElevenLabs' add-from-rules body. `workspace_access` is accepted and ignored: a
    dictionary belongs to the key that made it."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1, max_length=200)
    rules: list[Any] = Field(
        description="Alias rules `{type: alias, string_to_replace, alias}` and phoneme rules "
        "`{type: phoneme, string_to_replace, phoneme, alphabet: ipa}`; optional "
        "`case_sensitive`, `word_boundaries` (default true)."
    )
    description: str | None = Field(default=None, max_length=2000)
    workspace_access: str | None = Field(default=None, description="Accepted; ignored.")


class DictionaryObject(BaseModel):
    """A dictionary as ElevenLabs describes one (both its create and get answers' fields)."""

    id: str
    name: str
    created_by: str
    creation_time_unix: int
    version_id: str
    latest_version_id: str
    version_rules_num: int
    latest_version_rules_num: int
    description: str | None
    permission_on_resource: str = "admin"
    archived_time_unix: int | None = None


def _dictionary_object(found: StoredDictionary) -> DictionaryObject:
    return DictionaryObject(
        id=found.id,
        name=found.name,
        created_by=found.key_id or "anonymous",
        creation_time_unix=int(found.created_at.replace(tzinfo=UTC).timestamp()),
        version_id=found.version_id,
        latest_version_id=found.version_id,
        version_rules_num=len(found.rules),
        latest_version_rules_num=len(found.rules),
        description=found.description,
    )


@router.post(
    "/v1/pronunciation-dictionaries/add-from-rules",
    response_model=DictionaryObject,
    summary="Create a pronunciation dictionary from rules",
    dependencies=[Depends(require_json)],
)
async def add_dictionary_from_rules(
    body: DictionaryRulesBody, principal: CurrentPrincipal, request: Request
) -> DictionaryObject:
    try:
        lexicon = Lexicon.from_dicts(body.rules)
    except InvalidLexicon as error:
        raise Unprocessable(
            f"Invalid pronunciation rules: {error}", param="rules", code="invalid_rules"
        ) from None
    tenancy = app_state(request).tenancy
    stored = await asyncio.to_thread(
        tenancy.store.add_dictionary,
        principal.key_id,
        body.name,
        body.description,
        lexicon.to_dicts(),
        tenancy.now(),
    )
    return _dictionary_object(stored)


class DictionaryList(BaseModel):
    """ElevenLabs' list of dictionaries: all on one page here."""

    pronunciation_dictionaries: list[DictionaryObject]
    next_cursor: str | None = None
    has_more: bool = False


class DictionaryDeleted(BaseModel):
    id: str
    deleted: bool = True


@router.get(
    "/v1/pronunciation-dictionaries",
    response_model=DictionaryList,
    summary="The calling key's pronunciation dictionaries",
)
async def list_dictionaries(
    principal: CurrentPrincipal,
    request: Request,
    cursor: Annotated[str | None, Query(description="Accepted; there is one page.")] = None,
    page_size: Annotated[int | None, Query(ge=1, description="Accepted; one page.")] = None,
) -> DictionaryList:
    tenancy = app_state(request).tenancy
    found = await asyncio.to_thread(tenancy.store.list_dictionaries, principal.key_id)
    return DictionaryList(pronunciation_dictionaries=[_dictionary_object(d) for d in found])


async def _owned(request: Request, dictionary_id: str, key_id: str | None) -> StoredDictionary:
    tenancy = app_state(request).tenancy
    found = await asyncio.to_thread(tenancy.store.get_dictionary, dictionary_id, key_id)
    if found is None:
        raise NotFound(
            f"No pronunciation dictionary {dictionary_id!r} belongs to this key.",
            param="pronunciation_dictionary_id",
            code="pronunciation_dictionary_not_found",
        )
    return found


DictionaryId = Annotated[str, Path(max_length=100)]


@router.get(
    "/v1/pronunciation-dictionaries/{dictionary_id}",
    response_model=DictionaryObject,
    summary="One pronunciation dictionary",
)
async def get_dictionary(
    dictionary_id: DictionaryId, principal: CurrentPrincipal, request: Request
) -> DictionaryObject:
    return _dictionary_object(await _owned(request, dictionary_id, principal.key_id))


@router.delete(
    "/v1/pronunciation-dictionaries/{dictionary_id}",
    response_model=DictionaryDeleted,
    summary="Delete a pronunciation dictionary",
)
async def delete_dictionary(
    dictionary_id: DictionaryId, principal: CurrentPrincipal, request: Request
) -> DictionaryDeleted:
    await _owned(request, dictionary_id, principal.key_id)
    state = app_state(request)
    await asyncio.to_thread(state.tenancy.store.delete_dictionary, dictionary_id)
    # Requests naming it are refused from now on, not once the cached copy expires.
    state.service.dictionaries.forget(dictionary_id)
    return DictionaryDeleted(id=dictionary_id)
