"""Voices and models pulled by name from the Hugging Face hub (`speechgate voices pull`).

`index` says what can be pulled (Piper's voices.json, Kokoro-82M's ONNX repository, pocket-tts'
packaged configs), `client` downloads through huggingface_hub into `Settings.hub_cache_dir` and
verifies checksums, `pull` assembles an item and installs it under `Settings.models_dir`
(`speechgate.voices.installed`), `search` lists what can be pulled and what is installed, and
`autopull` is what the gateway calls when `Settings.auto_pull` is on. Nothing here loads an
engine.
"""

from speechgate.hub.client import FileProgress, Hub, Progress
from speechgate.hub.index import Index, Pullable
from speechgate.hub.pull import pull
from speechgate.hub.refs import parse_ref, ref_for_model, ref_for_voice
from speechgate.hub.search import SearchResult, search

__all__ = [
    "FileProgress",
    "Hub",
    "Index",
    "Progress",
    "Pullable",
    "SearchResult",
    "parse_ref",
    "pull",
    "ref_for_model",
    "ref_for_voice",
    "search",
]
