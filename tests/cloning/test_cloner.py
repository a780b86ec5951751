"""Voice prompts are decoded in threads, a bounded number at once."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from speechgate.audio.pcm import PcmChunk
from speechgate.catalog import Catalog
from speechgate.cloning.cloner import VoiceCloning
from speechgate.cloning.library import VoiceLibrary
from speechgate.engines.base import EngineInfo, Voice
from speechgate.errors import InvalidRequest
from tests.helpers.waiting import until

pytestmark = pytest.mark.anyio


async def test_decodes_run_off_the_loop_a_bounded_number_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cloning = VoiceCloning(Catalog({}, {}, {}), {}, VoiceLibrary(tmp_path), 3.0, max_decodes=2)
    release = threading.Event()
    running: list[int] = []
    loop_thread = threading.get_ident()

    def slow_prompt(data: bytes, engine: EngineInfo, param: str) -> PcmChunk:
        assert threading.get_ident() != loop_thread
        running.append(1)
        release.wait(30)
        return PcmChunk.silence(0.1, 24000)

    monkeypatch.setattr(cloning, "prompt", slow_prompt)
    engine = EngineInfo.__new__(EngineInfo)
    decodes = [asyncio.create_task(cloning.decode(b"x", engine, "audio_sample")) for _ in range(5)]
    await until(lambda: len(running) == 2)
    # Three wait their turn while two decode; the loop is free meanwhile (we run here).
    await asyncio.sleep(0)
    assert len(running) == 2
    release.set()
    await asyncio.gather(*decodes)
    assert len(running) == 5


@pytest.fixture
def cloning(tmp_path: Path) -> VoiceCloning:
    piper = EngineInfo("piper", 22050, False, (Voice("en_US-joe-medium", "Joe", "en-US"),))
    pocket = EngineInfo("pocket", 24000, False, (), can_clone=True)
    catalog = Catalog(
        {"piper": piper, "pocket": pocket},
        {},
        {"piper": {"alloy": "en_US-joe-medium", "nova": "en_US-lessac-medium"}},
    )
    return VoiceCloning(catalog, {}, VoiceLibrary(tmp_path / "voices"), 3.0)


@pytest.mark.parametrize(
    "name",
    [
        "alloy",  # OpenAI's: this pocket model has no built-in voices, but piper's alloy exists
        "Shimmer ",  # OpenAI's, aliased by no engine here
        "de_female",
        "male",
        "en_US-joe-medium",  # another engine's voice
        "nova",  # an alias whose voice is not installed yet
        "juergen",  # a built-in pocket voice the model lacks
    ],
)
async def test_a_name_that_means_a_built_in_voice_is_refused(
    cloning: VoiceCloning, name: str
) -> None:
    engine = cloning.engine(None)
    with pytest.raises(InvalidRequest) as error:
        await cloning.create(name, b"", engine)
    assert (error.value.status_code, error.value.code, error.value.param) == (
        400,
        "voice_name_reserved",
        "name",
    )
    assert not cloning.library.list()


@pytest.mark.parametrize("name", ["a\x00b", "line\nbreak", "\x1b[31mred", "tab\there", "a\u2028b"])
async def test_a_name_with_control_characters_is_refused(cloning: VoiceCloning, name: str) -> None:
    with pytest.raises(InvalidRequest) as error:
        await cloning.create(name, b"", cloning.engine(None))
    assert (error.value.status_code, error.value.code, error.value.param) == (
        400,
        "invalid_voice_name",
        "name",
    )


async def test_a_free_name_passes_to_the_sample(cloning: VoiceCloning) -> None:
    with pytest.raises(InvalidRequest) as error:
        await cloning.create("Grandma's voice", b"", cloning.engine(None))
    assert error.value.code == "empty_file"
