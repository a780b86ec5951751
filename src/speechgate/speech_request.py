"""The speech request every front end translates its wire format into.

OpenAI's `POST /v1/audio/speech` body, a WebSocket session and a Wyoming `synthesize` each
become one `SpeechRequest`; the service, routing and its providers below them take only this
and know no wire format. Front ends validate their own fields (and their own encodings, such as
base64) before building one; the service checks the rest against the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from speechgate.audio.formats import OutputFormat

StreamFormat = Literal["audio", "sse"]
Normalization = Literal["auto", "on", "off"]
"""Whether the text is read as meant ("$5" as "five dollars") or as written; `auto`: the
server's setting. ElevenLabs' `apply_text_normalization` values."""
"""How the encoded audio is framed: the bytes themselves, or server-sent events carrying them.
Part of the request rather than of one front end because a relay to an upstream must ask that
upstream for the same framing."""


@dataclass(frozen=True)
class DictionaryLocator:
    """A pronunciation dictionary a request is read with: its id and, if the client named one,
    the version it expects (ElevenLabs' `pronunciation_dictionary_locators` entries)."""

    dictionary_id: str
    version_id: str | None = None


@dataclass(frozen=True)
class SpeechRequest:
    """What to say, with which model and voice, and how to encode it."""

    model: str
    """A model id or alias, as the catalog knows it."""
    voice: str
    """A voice name, a generic name ("alloy", "female") or a stored voice's id."""
    format: OutputFormat
    """The encoding, with the rate and bit rate its name may fix (`parse_format`)."""
    text: str = ""
    """Empty for a streaming session, whose text arrives later."""
    sample_rate: int | None = None
    """Output rate; None: the server's default."""
    speed: float = 1.0
    instructions: str | None = None
    language: str | None = None
    """A BCP 47 tag: a generic voice becomes one of this language; another language's voice is
    refused."""
    seed: int | None = None
    reference_audio: bytes | None = None
    """An audio file of someone speaking, to clone for this request only instead of `voice`."""
    stream_format: StreamFormat = "audio"
    word_times: bool = False
    """Whether word timestamps go out with the audio: the answer's `Answer.words` for front
    ends with a place for them (ElevenLabs' timestamps routes), events of their own in an SSE
    stream or a streaming session (a raw audio body has none)."""

    normalization: Normalization = "auto"
    ssml: bool | None = None
    """Whether `text` is an SSML document; None: it is if it is a `<speak>` element."""
    dictionaries: tuple[DictionaryLocator, ...] = ()
    """Pronunciation dictionaries of the asking key's, applied in order (a later one's rule
    wins for a word) over the operator's lexicon."""

    @property
    def words_beside_audio(self) -> bool:
        """Word times asked for beside a raw audio body (`Answer.words`), not as SSE events
        inside the stream, which a relay passes on as they come."""
        return self.word_times and self.stream_format == "audio"
