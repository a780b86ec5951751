"""Worker processes as the pool starts them: forked from a forkserver that may have started long
before, yet running with the gateway's environment of the moment they start."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from speechgate.audio.formats import AudioFormat
from speechgate.engines.base import EngineConfig, SynthesisRequest
from speechgate.pipeline import OutputSpec
from speechgate.workers.pool import WorkerPool
from tests.helpers.pocket import build_tiny_model

_COMMIT = "0123456789abcdef0123456789abcdef01234567"
PCM = OutputSpec(AudioFormat.PCM, 24000)


def hub_cache(root: Path, repo: str, files: dict[str, Path]) -> Path:
    """`files` laid out as the Hugging Face hub's cache holds a repository's snapshot."""
    folder = root / f"models--{repo.replace('/', '--')}"
    snapshot = folder / "snapshots" / _COMMIT
    snapshot.mkdir(parents=True)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(_COMMIT)
    for name, path in files.items():
        shutil.copy(path, snapshot / name)
    return root


async def speak_once(config: EngineConfig, voice: str) -> int:
    pool = WorkerPool(config, 1, queue_size=2, max_queue_wait=30, job_timeout=60)
    await pool.start()
    try:
        request = SynthesisRequest("Hello there.", voice)
        return sum([len(chunk.data) async for chunk in pool.synthesize(request, PCM)])
    finally:
        await pool.close()


def test_a_worker_gets_the_environment_the_gateway_has_when_it_starts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The forkserver runs (a pool started it), without the variables set below.
    assert asyncio.run(speak_once(EngineConfig("fake"), "en-low")) > 0
    # pocket-tts finds its weights through huggingface_hub, which reads where its cache is, and
    # that it must not go online, from the environment: only there are these weights.
    model = build_tiny_model(tmp_path)
    cache = hub_cache(
        tmp_path / "hub", "kyutai/pocket-tts", {"tiny.safetensors": model / "model.safetensors"}
    )
    config = tmp_path / "from-hub.yaml"
    config.write_text(
        (model / "random.yaml").read_text()
        + "weights_path: hf://kyutai/pocket-tts/tiny.safetensors\n"
    )
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    pocket = EngineConfig("pocket", options={"config": str(config)})
    assert asyncio.run(speak_once(pocket, str(model / "low.wav"))) > 0
