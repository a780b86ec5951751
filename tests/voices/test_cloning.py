"""Voice prompts are decoded in threads, a bounded number at once."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from speechgate.audio.pcm import PcmChunk
from speechgate.catalog import Catalog
from speechgate.engines.base import EngineInfo
from speechgate.voices.cloning import VoiceCloning
from speechgate.voices.library import VoiceLibrary
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
