"""Pulling Kokoro (its graph and voices joined into one voices file) and a pocket-tts config
(rewritten to load offline) from a fake hub, and loading what was installed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml

from speechgate.hub import Hub, Index, pull
from tests.helpers.hub import POCKET_REPO, FakeHub, fake_hub, publish_kokoro

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def hub() -> Iterator[FakeHub]:
    with fake_hub() as running:
        yield running


@pytest.fixture(scope="module")
def kokoro_arrays(hub: FakeHub, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    pytest.importorskip("kokoro_onnx")
    from speechgate.engines.kokoro.engine import _embedded_files

    # The 92 MB graph, assembled from its wheels once for this module.
    graph, _ = _embedded_files(tmp_path_factory.mktemp("kokoro"))
    return publish_kokoro(hub, graph.read_bytes())


def test_kokoro_pull_joins_the_voices_and_runs(
    hub: FakeHub, kokoro_arrays: dict[str, object], tmp_path: Path
) -> None:
    from kokoro_onnx import Kokoro

    item = pull("kokoro", models=tmp_path / "models", hub=Hub(tmp_path / "hub", hub.url))

    assert item.directory.name == "kokoro-v1.0"
    assert (
        item.file("model").read_bytes()
        == hub.repos["onnx-community/Kokoro-82M-v1.0-ONNX"]["onnx/model_quantized.onnx"]
    )
    voices = np.load(item.file("voices"))
    assert sorted(voices.files) == sorted(kokoro_arrays)
    for name, array in kokoro_arrays.items():
        assert np.array_equal(voices[name], array)
    by_id = {v.id: v for v in item.manifest.voices}
    assert (by_id["af_heart"].language, by_id["af_heart"].gender) == ("en-US", "female")
    assert (by_id["bf_emma"].language, by_id["am_adam"].gender) == ("en-GB", "male")
    # kokoro-onnx reads the installed pair as it reads its own release files.
    samples, rate = Kokoro(str(item.file("model")), str(item.file("voices"))).create(
        "Hi.", voice="af_heart"
    )
    assert rate == 24000
    assert len(samples) > rate // 4


@pytest.fixture(scope="module")
def pocket_configs(hub: FakeHub, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random-weight model published as pocket's `german` config, with one built-in
    voice, and a configs directory whose german.yaml names it by hf:// URIs."""
    pytest.importorskip("pocket_tts")
    from pocket_tts import TTSModel, export_model_state

    from tests.helpers.pocket import build_tiny_model

    root = build_tiny_model(tmp_path_factory.mktemp("pocket"))
    model = TTSModel.load_model(config=root / "config.yaml")
    export_model_state(model.get_state_for_audio_prompt(root / "low.wav"), root / "voice.st")
    rev = "1e08e6a23401048648a9fdcfde2f89348215c2a7"
    hub.add(
        POCKET_REPO, "languages/german/model.safetensors", (root / "model.safetensors").read_bytes()
    )
    hub.add(POCKET_REPO, "languages/german/tokenizer.json", (root / "tokenizer.json").read_bytes())
    hub.add(
        POCKET_REPO,
        "languages/german/embeddings/juergen.safetensors",
        (root / "voice.st").read_bytes(),
    )
    config = yaml.safe_load((root / "random.yaml").read_text())
    config["weights_path"] = f"hf://kyutai/pocket-tts/languages/german/model.safetensors@{rev}"
    config["weights_path_without_voice_cloning"] = (
        f"hf://{POCKET_REPO}/languages/german/model.safetensors@{rev}"
    )
    config["flow_lm"]["lookup_table"]["tokenizer_path"] = (
        f"hf://{POCKET_REPO}/languages/german/tokenizer.json@{rev}"
    )
    configs = root / "configs"
    configs.mkdir()
    (configs / "german.yaml").write_text(yaml.safe_dump(config))
    return configs


def test_pocket_pull_installs_a_config_that_loads_offline(
    hub: FakeHub, pocket_configs: Path, tmp_path: Path
) -> None:
    from pocket_tts import TTSModel
    from pocket_tts.models.model_state import _import_model_state

    client = Hub(tmp_path / "hub", hub.url)
    item = pull(
        "pocket:german",
        models=tmp_path / "models",
        hub=client,
        index=Index(client, pocket_configs=pocket_configs),
    )

    assert dict(item.manifest.files) == {
        "config": "config.yaml",
        "weights": "model.safetensors",
        "tokenizer": "tokenizer.json",
        "embedding:juergen": "embeddings/juergen.safetensors",
    }
    assert [(v.id, v.language, v.gender) for v in item.manifest.voices] == [
        ("juergen", "de", "male")
    ]
    config = item.file("config").read_text()
    assert "hf://" not in config
    model = TTSModel.load_model(config=item.file("config"))
    state = _import_model_state(item.file("embedding:juergen"), model.device)
    audio = model.generate_audio(state, "Hallo.")
    assert audio.numel() > 0


def test_the_pocket_voices_revision_is_pocket_tts_own() -> None:
    pytest.importorskip("pocket_tts")
    from pocket_tts.utils.utils import get_predefined_voice

    from speechgate.hub.index import POCKET_VOICES_REPO, POCKET_VOICES_REVISION

    assert get_predefined_voice("german", "juergen") == (
        f"hf://{POCKET_VOICES_REPO}/languages/german/embeddings/juergen.safetensors"
        f"@{POCKET_VOICES_REVISION}"
    )
