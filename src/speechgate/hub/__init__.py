"""Voices and models pulled by name from the Hugging Face hub (`speechgate voices pull`).

`index` says what can be pulled, `client` downloads and verifies, `pull` assembles and installs
an item, `autopull` serves `Settings.hub.auto_pull`. Nothing here loads an engine.
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
