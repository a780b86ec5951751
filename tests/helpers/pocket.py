"""A tiny random-weight pocket-tts model, written to disk for the real loader to load.

The released weights come from the (gated) Hugging Face hub, which tests cannot reach. So tests
build their own model: a small config in pocket-tts' schema, a character tokenizer, random
weights saved as safetensors, loaded back like any custom model. The audio is noise, but its
shape, length, streaming and voice conditioning are real.
"""

from __future__ import annotations

import string
import wave
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from speechgate.audio.pcm import PcmChunk

RATE = 24000

NEEDS_POCKET = pytest.mark.skipif(
    find_spec("pocket_tts") is None, reason="needs speechgate[pocket]"
)
"""Skips a test without pocket-tts. Not `importorskip`: importing pocket-tts (torch) would cost
every test process seconds to collect the module."""

# Character-level: BPE without merges splits text into the single characters of its vocabulary.
_VOCAB = ["<unk>", *string.printable[:95]]

# Tiny dimensions everywhere (~50 k parameters), keeping the shipped codec's 24 kHz and
# 12.5 Hz frame rate (ratios 6*5*4 then x16), so timing and chunking are those of the real one.
_CONFIG = """\
flow_lm:
  dtype: float32
  insert_bos_before_voice: true
  flow: {{depth: 1, dim: 16}}
  transformer: {{d_model: 32, hidden_scale: 2, max_period: 10000, num_heads: 2, num_layers: 1}}
  lookup_table:
    dim: 32
    n_bins: {n_bins}
    tokenizer: tokenizers
    tokenizer_path: {tokenizer}
mimi:
  dtype: float32
  sample_rate: 24000
  channels: 1
  frame_rate: 12.5
  inner_dim: 8
  outer_dim: 16
  seanet:
    dimension: 16
    channels: 1
    n_filters: 4
    n_residual_layers: 1
    ratios: [6, 5, 4]
    kernel_size: 3
    residual_kernel_size: 3
    last_kernel_size: 3
    dilation_base: 2
    pad_mode: constant
    compress: 2
  transformer:
    d_model: 16
    num_heads: 2
    num_layers: 1
    layer_scale: 0.01
    context: 50
    dim_feedforward: 32
    input_dimension: 16
    output_dimensions: [16]
  quantizer: {{dimension: 8, output_dimension: 16}}
"""


def write_wav(path: Path, samples: np.ndarray[Any, np.dtype[np.float64]]) -> Path:
    with wave.open(str(path), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(RATE)
        wav.writeframes((samples * 32767).astype("<i2").tobytes())
    return path


def read_wav(path: Path) -> PcmChunk:
    """A mono 16-bit WAV file as a chunk, as a voice prompt reaches an engine."""
    with wave.open(str(path), "rb") as wav:
        return PcmChunk(np.frombuffer(wav.readframes(wav.getnframes()), "<i2"), wav.getframerate())


def build_tiny_model(root: Path) -> Path:
    """Write a tiny model into `root`: config.yaml, tokenizer.json, model.safetensors, and two
    3 s voice prompts, low.wav and noise.wav. Returns `root`."""
    # torch and pocket-tts take seconds to import: only in the processes that build a model,
    # not in every test process that collects a module using this one.
    import safetensors.torch
    import tokenizers
    import torch
    from pocket_tts import TTSModel

    tokenizer = tokenizers.Tokenizer(
        tokenizers.models.BPE(
            vocab={piece: i for i, piece in enumerate(_VOCAB)}, merges=[], unk_token="<unk>"
        )
    )
    tokenizer.save(str(root / "tokenizer.json"))
    config = _CONFIG.format(n_bins=len(_VOCAB), tokenizer=root / "tokenizer.json")
    # Without weights_path the loader initialises the model at random.
    (root / "random.yaml").write_text(config)
    # Seeded, so every run tests the same weights (see the voice test for why that matters).
    torch.manual_seed(2)
    model = TTSModel.load_model(config=root / "random.yaml")
    # It starts at zeros (the released weights overwrite it): every voice would sound the same.
    torch.nn.init.normal_(
        model.flow_lm.speaker_proj_weight, generator=torch.Generator().manual_seed(0)
    )
    safetensors.torch.save_file(model.state_dict(), str(root / "model.safetensors"))
    (root / "config.yaml").write_text(f"{config}weights_path: {root / 'model.safetensors'}\n")

    seconds = np.arange(3 * RATE) / RATE
    write_wav(root / "low.wav", 0.3 * np.sin(2 * np.pi * 150 * seconds))
    noise = np.random.default_rng(0).uniform(-0.3, 0.3, seconds.size)
    write_wav(root / "noise.wav", noise)
    return root


def build_tiny_model_apart(root: Path) -> Path:
    """`build_tiny_model(root)` in a process forked from the engines' fork server, which has
    imported pocket-tts and torch already when a test process serves real engines: a test
    process that loads no pocket model itself does not import them (seconds of CPU). The
    files are the same (the weights are seeded)."""
    from speechgate.workers.forking import CONTEXT

    builder = CONTEXT.Process(target=build_tiny_model, args=(root,), name="tiny-pocket-model")
    builder.start()
    builder.join()
    assert builder.exitcode == 0, f"building the tiny model failed ({builder.exitcode})"
    return root
