# ruff: noqa: RUF001 - IPA symbols look like Latin letters and punctuation
"""espeak-ng (formant synthesis) through its C library, bundled by the `espeakng-loader` wheel.

The library is called with ctypes in synchronous mode: `espeak_Synth` returns once a text is
spoken, handing audio to a callback on the calling thread. espeak-ng's `[[ ]]` takes its own
phoneme mnemonics, not IPA, so phoneme blocks are translated (`MNEMONICS`); stray IPA around
them is removed, as espeak-ng would read it by name ("ə": "schwa").
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Generator, Iterator, Mapping, Sequence
from pathlib import Path

import espeakng_loader
import numpy as np

from speechgate.audio.pcm import PcmChunk, Samples
from speechgate.audio.stretch import stretch
from speechgate.engines.base import EngineConfig, SynthesisRequest, Voice
from speechgate.engines.espeak import PLUGIN
from speechgate.text import phonemes as phoneme_blocks
from speechgate.text.rewrite import Rewrite
from speechgate.text.segment import offsets, segment
from speechgate.timing import TimedChunk, carry_words, trim_ends, words_from_anchors

# Constants from espeak-ng's speak_lib.h.
_AUDIO_OUTPUT_SYNCHRONOUS = 2
_INITIALIZE_DONT_EXIT = 0x8000  # report errors instead of calling exit() inside our process
_POS_CHARACTER = 1
_CHARS_UTF8 = 0x1
_ENDPAUSE = 0x1000
_PARAM_RATE = 1
_EE_OK = 0
_PHONEMES = 0x100  # espeakPHONEMES: read phoneme mnemonics inside [[ ]]
_TRACE_MNEMONICS = 1  # espeak_SetPhonemeTrace: the phonemes spoken, in mnemonics
_TRACE_IPA = 2  # ... in IPA
_EVENT_LIST_TERMINATED = 0
_EVENT_WORD = 1

# Words per minute. Below 80 espeak-ng silently speaks at 80; above 450 it speeds up with
# libsonic, so the ceiling is only the API's own, speed 4.0.
_NORMAL_WPM = 175
_MIN_WPM = 80
_MAX_WPM = 4 * _NORMAL_WPM


class _EspeakVoice(ctypes.Structure):
    # `languages` is (priority byte, NUL-terminated code) pairs, read by hand.
    _fields_ = (
        ("name", ctypes.c_char_p),
        ("languages", ctypes.c_void_p),
        ("identifier", ctypes.c_char_p),
        ("gender", ctypes.c_ubyte),
        ("age", ctypes.c_ubyte),
        ("variant", ctypes.c_ubyte),
        ("xx1", ctypes.c_ubyte),
        ("score", ctypes.c_int),
        ("spare", ctypes.c_void_p),
    )


class _Event(ctypes.Structure):
    """espeak_EVENT: `text_position` counts characters from 1; `sample` is within the current
    `espeak_Synth` call's audio."""

    _fields_ = (
        ("type", ctypes.c_int),
        ("unique_identifier", ctypes.c_uint),
        ("text_position", ctypes.c_int),
        ("length", ctypes.c_int),
        ("audio_position", ctypes.c_int),
        ("sample", ctypes.c_int),
        ("user_data", ctypes.c_void_p),
        ("id", ctypes.c_char * 8),
    )


# int callback(short *wav, int numsamples, espeak_EVENT *events); returning 1 aborts synthesis.
_SynthCallback = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p
)

_owner_lock = threading.Lock()
_owner: EspeakEngine | None = None


@functools.cache
def _load_library() -> ctypes.CDLL:
    lib = ctypes.CDLL(espeakng_loader.get_library_path())
    lib.espeak_Initialize.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int)
    lib.espeak_Initialize.restype = ctypes.c_int
    lib.espeak_SetSynthCallback.argtypes = (_SynthCallback,)
    lib.espeak_SetSynthCallback.restype = None
    lib.espeak_ListVoices.argtypes = (ctypes.c_void_p,)
    lib.espeak_ListVoices.restype = ctypes.POINTER(ctypes.POINTER(_EspeakVoice))
    lib.espeak_SetVoiceByName.argtypes = (ctypes.c_char_p,)
    lib.espeak_SetVoiceByName.restype = ctypes.c_int
    lib.espeak_SetParameter.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int)
    lib.espeak_SetParameter.restype = ctypes.c_int
    lib.espeak_Synth.argtypes = (
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_uint,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_uint,
        ctypes.c_void_p,
        ctypes.c_void_p,
    )
    lib.espeak_Synth.restype = ctypes.c_int
    lib.espeak_SetPhonemeTrace.argtypes = (ctypes.c_int, ctypes.c_void_p)
    lib.espeak_SetPhonemeTrace.restype = None
    lib.espeak_Terminate.argtypes = ()
    lib.espeak_Terminate.restype = ctypes.c_int
    return lib


def _languages(address: int) -> Iterator[tuple[int, str]]:
    """(priority, code) pairs of espeak_VOICE.languages; lower is preferred."""
    while priority := ctypes.string_at(address, 1)[0]:
        code = ctypes.string_at(address + 1)
        yield priority, code.decode()
        address += len(code) + 2


MNEMONICS: Mapping[str, str] = {
    # Consonants.
    **{ipa: ipa for ipa in "pbtdkfvszhmnlwjx"},
    "ɡ": "g",
    "g": "g",
    "θ": "T",
    "ð": "D",
    "ʃ": "S",
    "ʒ": "Z",
    "tʃ": "tS",
    "dʒ": "dZ",
    "ts": "ts",
    "ŋ": "N",
    "ɹ": "r",
    "r": "r",
    "ʔ": "?",
    "ɾ": "t#",
    "ç": "C",
    "n\u0329": "n-",
    "m\u0329": "m-",
    "l\u0329": "l-",
    # Vowels and diphthongs (r-coloured ones as espeak-ng's English spells them).
    "æ": "a",
    "a": "a",
    "ɐ": "a#",
    "ɑː": "A:",
    "ɑ": "A:",
    "ɒ": "0",
    "ɔː": "O:",
    "ɔ": "O",
    "ɛ": "E",
    "e": "e",
    "ɪ": "I",
    "ᵻ": "I2",
    "i": "i",
    "iː": "i:",
    "ʊ": "U",
    "u": "u",
    "uː": "u:",
    "ʌ": "V",
    "ə": "@",
    "ɚ": "3",
    "ɜː": "3:",
    "ɜ": "3:",
    "ɝ": "3:",
    "o": "o",
    "eɪ": "eI",
    "aɪ": "aI",
    "aʊ": "aU",
    "ɔɪ": "OI",
    "oʊ": "oU",
    "əʊ": "oU",
    "ɑːɹ": "A@",
    "ɑɹ": "A@",
    "ɛɹ": "e@",
    "ɛə": "e@",
    "eə": "e@",
    "ɔːɹ": "o@",
    "ɔɹ": "o@",
    "oɹ": "o@",
    "ɪɹ": "i@3",
    "ɪə": "i@",
    "iə": "i@",
    "ʊɹ": "U@",
    "ʊə": "U@",
    # Stress; a space parts words.
    "ˈ": "'",
    "ˌ": ",",
    " ": " ",
}
"""IPA to espeak-ng's (English) phoneme mnemonics, which most languages share; anything else is
fitted by `phonemes.fit`."""


def mnemonics(ipa: str) -> str:
    return "".join(phoneme_blocks.fit(ipa, MNEMONICS))


def _rate(speed: float) -> int:
    return max(_MIN_WPM, min(_MAX_WPM, round(_NORMAL_WPM * speed)))


_VARIANT_BASE = "en-us"


class EspeakEngine:
    """espeak-ng with one voice per language code, optionally with a variant ("en-us+f3").

    One per process and not thread-safe: espeak-ng's state is process-global, so opening a
    second engine raises RuntimeError (a second `espeak_Initialize` silently corrupts the
    first). Speeds below espeak-ng's 80 wpm floor are time-stretched for the rest.
    """

    name = "espeak"
    supports_instructions = False
    # espeak-ng varies its output run to run.
    supports_seed = False
    blends_voices = False
    phonemes = True
    characters_per_second = 3000.0

    def __init__(self) -> None:
        global _owner
        with _owner_lock:
            if _owner is not None:
                raise RuntimeError("an EspeakEngine is already open in this process")
            lib = _load_library()
            data_dir = Path(espeakng_loader.get_data_path())
            rate = lib.espeak_Initialize(
                _AUDIO_OUTPUT_SYNCHRONOUS, 0, str(data_dir.parent).encode(), _INITIALIZE_DONT_EXIT
            )
            if rate <= 0:
                raise RuntimeError(f"espeak_Initialize failed ({rate})")
            _owner = self
        self._lib = lib
        self._sample_rate: int = rate
        self._blocks: list[Samples] = []
        self._words: list[tuple[int, float]] = []  # (character, seconds) of each word event
        # ctypes does not keep the C thunk alive; freed, the next synthesis jumps into it.
        self._callback = _SynthCallback(self._collect)
        lib.espeak_SetSynthCallback(self._callback)
        self._identifiers = self._list_voices()
        self._variants = frozenset(
            path.name for path in (data_dir / "voices" / "!v").iterdir() if path.is_file()
        )

    @classmethod
    def from_config(cls, config: EngineConfig) -> EspeakEngine:
        """`threads` is unused: espeak-ng synthesizes on the calling thread."""
        PLUGIN.check_options(config.options)
        return cls()

    @property
    def sample_rate(self) -> int:
        return self._sample_rate

    @property
    def variants(self) -> frozenset[str]:
        """Variant names accepted after "+" in a voice id, e.g. "f3" or "klatt"."""
        return self._variants

    def voices(self) -> Sequence[Voice]:
        """One voice per language, plus American English variants, so each of OpenAI's voice
        names can map to a distinct-sounding voice."""
        languages = [
            Voice(id=code, name=name, language=code)
            for code, (_, name) in sorted(self._identifiers.items())
        ]
        american = [
            Voice(
                id=f"{_VARIANT_BASE}+{variant}",
                name=f"{_VARIANT_BASE}+{variant}",
                language=_VARIANT_BASE,
            )
            for variant in sorted(self._variants)
        ]
        return languages + american

    def synthesize(self, request: SynthesisRequest) -> Generator[PcmChunk, None, None]:
        """Yield one chunk per sentence as it is spoken; a bad voice raises at the call."""
        return (timed.pcm for timed in self.synthesize_timed(request))

    def synthesize_timed(self, request: SynthesisRequest) -> Generator[TimedChunk, None, None]:
        """`synthesize`, with word times from espeak-ng's own word events."""
        self._ensure_open()
        espeak_voice = self._voice(request.voice)
        rate = _rate(request.speed)
        spoken = self._speak(request.text, espeak_voice, rate)
        residual = request.speed * _NORMAL_WPM / rate if rate == _MIN_WPM else 1.0
        if residual == 1.0:
            return spoken
        return carry_words(
            lambda pcm: stretch(pcm, self.sample_rate, residual), spoken, 1.0 / residual
        )

    def spoken_phonemes(self, request: SynthesisRequest, *, ipa: bool = True) -> str:
        """The phonemes espeak-ng reports while speaking `request.text` (IPA, or its mnemonics
        with `ipa` false), a clause a line; the audio is dropped."""
        self._ensure_open()
        libc = ctypes.CDLL(None)
        libc.open_memstream.restype = ctypes.c_void_p
        libc.open_memstream.argtypes = (
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.POINTER(ctypes.c_size_t),
        )
        libc.fclose.argtypes = (ctypes.c_void_p,)
        libc.free.argtypes = (ctypes.c_void_p,)
        buffer, size = ctypes.c_void_p(), ctypes.c_size_t()
        stream = libc.open_memstream(ctypes.byref(buffer), ctypes.byref(size))
        if not stream:
            raise OSError(ctypes.get_errno(), "open_memstream failed")
        self._lib.espeak_SetPhonemeTrace(_TRACE_IPA if ipa else _TRACE_MNEMONICS, stream)
        try:
            for _ in self._speak(request.text, self._voice(request.voice), _rate(request.speed)):
                pass
        finally:
            self._lib.espeak_SetPhonemeTrace(0, None)
            libc.fclose(stream)
        try:
            if not buffer.value or not size.value:
                return ""
            return ctypes.string_at(buffer.value, size.value).decode().strip()
        finally:
            libc.free(buffer)

    def close(self) -> None:
        global _owner
        with _owner_lock:
            if _owner is self:
                self._lib.espeak_Terminate()
                _owner = None

    def _speak(self, text: str, voice: str, rate: int) -> Generator[TimedChunk, None, None]:
        sentences = segment(text)
        # An identifier is a path ("trk/az", "gmw/en-US") ending in the language's code.
        language = voice.partition("+")[0].rpartition("/")[2]
        elapsed = 0.0
        for index, (sentence, start) in enumerate(
            zip(sentences, offsets(text, sentences), strict=True)
        ):
            self._ensure_open()
            # Set per sentence: another generator from this engine may have run in between.
            self._check(self._lib.espeak_SetVoiceByName(voice.encode()), "SetVoiceByName")
            self._check(self._lib.espeak_SetParameter(_PARAM_RATE, rate, 0), "SetParameter")
            # Without ENDPAUSE espeak-ng drops a sentence's closing pause.
            flags = _CHARS_UTF8 | _PHONEMES | (_ENDPAUSE if index < len(sentences) - 1 else 0)
            said = self._espeak_text(sentence, language)
            encoded = said.spoken.encode() + b"\0"
            self._blocks = []
            self._words = []
            self._check(
                self._lib.espeak_Synth(
                    encoded, len(encoded), 0, _POS_CHARACTER, 0, flags, None, None
                ),
                "Synth",
            )
            if not self._blocks:
                continue
            pcm = PcmChunk(np.concatenate(self._blocks), self._sample_rate)
            # Event positions count what espeak-ng was given: back to the sentence's own.
            anchors = [(said.source_span(char, char + 1)[0], sec) for char, sec in self._words]
            words = trim_ends(words_from_anchors(sentence, anchors, pcm.duration), pcm, whole=True)
            yield TimedChunk(pcm, tuple(word.shifted(elapsed, start) for word in words))
            elapsed += pcm.duration

    @staticmethod
    def _espeak_text(text: str, language: str) -> Rewrite:
        """`text` as espeak-ng is given it: blocks as mnemonics, stray IPA removed."""
        replacements: list[tuple[int, int, str]] = []
        for run in phoneme_blocks.runs(text):
            if run.ipa is not None:
                said = mnemonics(run.ipa)
                replacements.append((run.start, run.end, f"[[{said}]]" if said.strip() else ""))
                continue
            stray = phoneme_blocks.unspeakable(text[run.start : run.end], language)
            replacements += [(run.start + start, run.start + end, "") for start, end in stray]
        return Rewrite.from_replacements(text, replacements)

    def _voice(self, voice: str) -> str:
        """espeak-ng's name for the voice id `voice`; ValueError if it has none."""
        code, plus, variant = voice.partition("+")
        if code not in self._identifiers or (plus and variant not in self._variants):
            # espeak-ng itself ignores an unknown variant and would speak the plain voice.
            raise ValueError(f"unknown espeak voice {voice!r}")
        return self._identifiers[code][0] + plus + variant

    def _collect(self, wav: ctypes._Pointer[ctypes.c_short], count: int, events: int | None) -> int:
        if events:
            event = ctypes.cast(events, ctypes.POINTER(_Event))
            index = 0
            while event[index].type != _EVENT_LIST_TERMINATED:
                if event[index].type == _EVENT_WORD:
                    self._words.append(
                        (event[index].text_position - 1, event[index].sample / self._sample_rate)
                    )
                index += 1
        # espeak-ng reuses its buffer after we return, so the samples are copied out now.
        if wav and count > 0:
            self._blocks.append(np.frombuffer(ctypes.string_at(wav, count * 2), dtype=np.int16))
        return 0

    def _list_voices(self) -> dict[str, tuple[str, str]]:
        """Each language code's (identifier, name) of the voice that prefers it most."""
        best: dict[str, tuple[int, str, str]] = {}
        voices = self._lib.espeak_ListVoices(None)
        index = 0
        while voices[index]:
            voice = voices[index].contents
            identifier = voice.identifier.decode()
            name = voice.name.decode().strip()
            for priority, code in _languages(voice.languages):
                if code not in best or priority < best[code][0]:
                    best[code] = (priority, identifier, name)
            index += 1
        return {code: (identifier, name) for code, (_, identifier, name) in best.items()}

    def _ensure_open(self) -> None:
        if _owner is not self:
            raise RuntimeError("this EspeakEngine is closed")

    @staticmethod
    def _check(result: int, function: str) -> None:
        if result != _EE_OK:
            raise RuntimeError(f"espeak_{function} failed ({result})")
