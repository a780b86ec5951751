"""Wire models: what OpenAI clients send and receive. Internal code uses frozen dataclasses."""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    TypeAdapter,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

from speechgate.audio.formats import FORMAT_NAMES, OutputFormat, parse_format
from speechgate.errors import InvalidRequest
from speechgate.speech_request import DictionaryLocator, Normalization, SpeechRequest, StreamFormat
from speechgate.timing import WordTime
from speechgate.voices.naming import language_tag


class VoiceRef(BaseModel):
    """OpenAI's custom-voice form: `{"id": "voice_1234"}`."""

    model_config = ConfigDict(extra="ignore")
    id: str = Field(min_length=1)


def _output_format(value: object) -> OutputFormat:
    try:
        if isinstance(value, str | OutputFormat):
            return parse_format(value)
    except ValueError as error:
        # A custom error type: pydantic would prefix a ValueError's message with "Value error".
        raise PydanticCustomError("response_format", str(error)) from None
    raise PydanticCustomError("response_format", "must be a format name (a string)")


ResponseFormat = Annotated[
    OutputFormat,
    PlainValidator(_output_format),
    PlainSerializer(lambda fmt: fmt.name, return_type=str),
    WithJsonSchema({"type": "string", "enum": list(FORMAT_NAMES)}),
]
"""A `response_format` name on the wire, its parsed `OutputFormat` inside."""


class PronunciationDictionaryLocator(BaseModel):
    """ElevenLabs' locator of a pronunciation dictionary (`POST
    /v1/pronunciation-dictionaries/add-from-rules` makes one)."""

    model_config = ConfigDict(extra="ignore")

    pronunciation_dictionary_id: str = Field(min_length=1, max_length=100)
    version_id: str | None = Field(
        default=None, max_length=100, description="Absent: the dictionary's version."
    )

    def locator(self) -> DictionaryLocator:
        return DictionaryLocator(self.pronunciation_dictionary_id, self.version_id)


DictionaryLocators = Annotated[
    list[PronunciationDictionaryLocator],
    Field(
        max_length=3,
        description="Pronunciation dictionaries of the key's to read the text with (at most "
        "3; a later one's rule wins for a word), over the server's own lexicon. Alias rules "
        "apply on every model, phoneme rules on models that speak phonemes (else a 400).",
    ),
]


# A BCP 47 tag, loosely: "de", "en-US", "en_us", "zh-Hans", "es-419".
_LANGUAGE_TAG = r"^[A-Za-z]{2,3}([-_][A-Za-z0-9]{1,8})*$"


class SpeechOptions(BaseModel):
    """How to speak: what `POST /v1/audio/speech` and a streaming session share."""

    # Unknown fields are accepted and ignored: SDKs add new ones before servers know them.
    model_config = ConfigDict(extra="ignore")

    model: str = Field(
        min_length=1, description="A model id from GET /v1/models.", examples=["tts-1", "espeak"]
    )
    voice: str | VoiceRef = Field(
        description='A voice name from GET /v1/audio/voices, or `{"id": ...}`.',
        examples=["alloy"],
    )
    response_format: ResponseFormat = Field(
        default="mp3",
        validate_default=True,
        description="OpenAI's six names, or ElevenLabs' `output_format` names, which also fix "
        "the sample rate and bit rate: `pcm_16000`, `ulaw_8000`, `mp3_44100_128`, ...",
    )
    speed: float = Field(default=1.0, ge=0.25, le=4.0)
    instructions: str | None = Field(
        default=None, description="Accepted; engines that cannot use it say so in a header."
    )
    sample_rate: int | None = Field(
        default=None,
        ge=8000,
        le=48000,
        description="speechgate extension: output sample rate (default 24000, as OpenAI).",
    )
    seed: int | None = Field(
        default=None,
        ge=0,
        le=2**63 - 1,
        description="speechgate extension: the same seed, input and voice give the same audio "
        "(for models that can; others answer 400).",
    )
    reference_audio: str | None = Field(
        default=None,
        description="speechgate extension: a base64 audio file (a few seconds of someone "
        "speaking) to clone for this request only, instead of `voice`; for models that clone.",
    )
    language: str | None = Field(
        default=None,
        pattern=_LANGUAGE_TAG,
        description='speechgate extension: the language of `input`, a BCP 47 tag ("de", '
        '"en-GB"). A generic voice (OpenAI\'s names, "male", "female") becomes a voice '
        "of that language; a voice of another language is refused (400 unsupported_language).",
        examples=["de"],
    )
    language_hint: str | None = Field(
        default=None,
        pattern=_LANGUAGE_TAG,
        description="speechgate extension: the same as `language` (the name some clients send).",
    )
    timestamp_granularities: list[Literal["word"]] = Field(
        default_factory=list,
        description='speechgate extension: `["word"]` adds word timestamps to the stream, as '
        "`speech.audio.words` events (SSE) or `segment.words` events (streaming session), each "
        "before the audio holding those words. The name and value are those of OpenAI's "
        "transcription API. SSE and streaming sessions only.",
        examples=[["word"]],
    )

    apply_text_normalization: Normalization = Field(
        default="auto",
        description="speechgate extension (ElevenLabs' name): `on` reads numbers, money, dates, "
        'times, units and abbreviations as meant ("$5.20" as "five dollars and twenty cents"), '
        "`off` as written, `auto` as the server is set (on unless changed).",
    )
    ssml: bool | None = Field(
        default=None,
        description="speechgate extension: whether `input` is SSML; absent, it is if it is a "
        "`<speak>` document.",
    )
    pronunciation_dictionary_locators: DictionaryLocators = Field(
        default_factory=list, description="speechgate extension (ElevenLabs' field)."
    )

    @property
    def voice_name(self) -> str:
        return self.voice.id if isinstance(self.voice, VoiceRef) else self.voice

    def to_speech(self, text: str = "", stream_format: StreamFormat = "audio") -> SpeechRequest:
        """The protocol-neutral request. Raises InvalidRequest for what only this wire format
        can get wrong: two language fields that disagree, `reference_audio` not in base64."""
        return SpeechRequest(
            model=self.model,
            voice=self.voice_name,
            format=self.response_format,
            text=text,
            sample_rate=self.sample_rate,
            speed=self.speed,
            instructions=self.instructions,
            language=self._language(),
            seed=self.seed,
            reference_audio=self._reference_audio(),
            stream_format=stream_format,
            word_times="word" in self.timestamp_granularities,
            normalization=self.apply_text_normalization,
            ssml=self.ssml,
            dictionaries=tuple(
                locator.locator() for locator in self.pronunciation_dictionary_locators
            ),
        )

    def _language(self) -> str | None:
        """`language`, or its alias `language_hint`; the two may not disagree."""
        language, hint = self.language, self.language_hint
        if language and hint and language_tag(language) != language_tag(hint):
            raise InvalidRequest(
                f"`language` ({language!r}) and `language_hint` ({hint!r}) disagree; send one.",
                param="language_hint",
            )
        return language or hint

    def _reference_audio(self) -> bytes | None:
        if self.reference_audio is None:
            return None
        try:
            return base64.b64decode(self.reference_audio, validate=True)
        except ValueError:  # binascii.Error, or a character outside ASCII
            raise InvalidRequest(
                "`reference_audio` must be a base64-encoded audio file.",
                param="reference_audio",
                code="invalid_audio",
            ) from None


class CreateSpeechRequest(SpeechOptions):
    """Body of `POST /v1/audio/speech`, as OpenAI defines it, plus `sample_rate`."""

    input: str = Field(
        min_length=1,
        description="The text to speak (4096 characters at most, a server setting).",
        examples=["Hello! How can I help you today?"],
    )
    stream_format: StreamFormat = "audio"
    stream: bool | None = Field(
        default=None,
        description="Accepted, as ElevenLabs-style clients send it; the audio streams anyway.",
    )
    user: str | None = Field(
        default=None,
        description="speechgate extension: a stable id of the end user; requests with the same "
        "one go to the same provider of a routed model (else `x-request-id` decides).",
    )


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorResponse(BaseModel):
    """OpenAI's error envelope."""

    error: ErrorDetail


class SpeechUsage(BaseModel):
    """Characters in, 20 ms frames of speech out (OpenAI counts audio tokens at a similar rate)."""

    input_tokens: int
    output_tokens: int
    total_tokens: int


class SpeechAudioDelta(BaseModel):
    type: Literal["speech.audio.delta"] = "speech.audio.delta"
    audio: str = Field(description="Base64 of the next bytes of the audio stream.")


class SpeechAudioDone(BaseModel):
    type: Literal["speech.audio.done"] = "speech.audio.done"
    usage: SpeechUsage


class SpeechStreamError(BaseModel):
    """Sent instead of `speech.audio.done` when synthesis fails after the stream started."""

    type: Literal["error"] = "error"
    error: ErrorDetail


class SpeechWord(BaseModel):
    """A word of the input and when it is heard."""

    word: str = Field(description="The word as the input has it (edge punctuation left out).")
    start: float = Field(description="Seconds from the start of the decoded audio stream.")
    end: float
    start_char: int = Field(description="Where the word starts in the input (a code point).")
    end_char: int = Field(description="Where it ends: `input[start_char:end_char]` is `word`.")

    @classmethod
    def of(cls, word: WordTime, text: str, seconds: float = 0.0, chars: int = 0) -> SpeechWord:
        """`word` of `text`, its times moved `seconds` later and its characters `chars` on (to
        count from the start of a whole stream)."""
        start, end = word.start_char + chars, word.end_char + chars
        return cls(
            word=text[word.start_char : word.end_char],
            start=round(word.start_s + seconds, 3),
            end=round(word.end_s + seconds, 3),
            start_char=start,
            end_char=end,
        )


class SpeechAudioWords(BaseModel):
    """speechgate extension (with `timestamp_granularities: ["word"]`): words whose audio is
    in the deltas from here on, sent before any of it."""

    type: Literal["speech.audio.words"] = "speech.audio.words"
    words: list[SpeechWord]


SpeechEvent = SpeechAudioDelta | SpeechAudioWords | SpeechAudioDone | SpeechStreamError


def sse_event_schema() -> dict[str, Any]:
    """OpenAPI (3.1) schema of one server-sent event of a speech stream."""
    return {
        "type": "object",
        "required": ["data"],
        "properties": {
            "event": {"type": "string"},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": _inline_refs(TypeAdapter(SpeechEvent).json_schema()),
            },
        },
    }


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Replace local `$ref`s with their definitions: a schema nested in an OpenAPI document
    cannot point into its own `$defs` (refs resolve against the document root)."""
    definitions = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(definitions[node["$ref"].rsplit("/", 1)[-1]])
            return {key: inline(value) for key, value in node.items()}
        if isinstance(node, list):
            return [inline(item) for item in node]
        return node

    inlined: dict[str, Any] = inline(schema)
    return inlined


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str
    cloning: bool = Field(
        default=False, description="speechgate extension: POST /v1/audio/voices can clone for it."
    )


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class VoiceCard(BaseModel):
    id: str
    name: str
    model: str
    language: str | None = Field(default=None, description='A BCP 47 tag, e.g. "en-US".')
    quality: str | None = Field(
        default=None, description="speechgate extension: Piper's x_low, low, medium or high."
    )
    gender: str | None = Field(
        default=None, description="speechgate extension: where the voice's source says."
    )
    type: Literal["builtin", "audio_sample"] = Field(
        default="builtin", description="An engine's own voice, or one cloned from a clip."
    )
    created_at: int | None = None


class StoredVoiceCard(BaseModel):
    """OpenAI's custom voice object, for a voice cloned here."""

    id: str
    object: Literal["audio.voice"] = "audio.voice"
    name: str
    created_at: int
    type: Literal["audio_sample"] = "audio_sample"
    model: str = Field(description="speechgate extension: the model the voice speaks on.")


class VoiceDeleted(BaseModel):
    id: str
    object: Literal["audio.voice.deleted"] = "audio.voice.deleted"
    deleted: bool = True


class VoiceList(BaseModel):
    voices: list[VoiceCard]


class AudioModelCard(BaseModel):
    id: str


class AudioModelList(BaseModel):
    models: list[AudioModelCard]


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class Readiness(BaseModel):
    ready: bool
    engines: dict[str, dict[str, Any]]


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for errors, all in the envelope."""
    return {status: {"model": ErrorResponse} for status in statuses}
