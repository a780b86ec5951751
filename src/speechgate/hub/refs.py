"""Pull references ("piper:en_US-lessac-medium", "kokoro", "pocket:german"), as each engine's
plugin declares them (`EnginePlugin.pull`).

Offline, so an error can name the exact `speechgate voices pull <ref>` without asking the hub.
"""

from __future__ import annotations

from speechgate.engines.plugin import PullRefs, discover
from speechgate.errors import InvalidRequest

# The engines whose hub listings and assemblies `index` and `pull` implement.
PIPER, KOKORO, POCKET = "piper", "kokoro", "pocket"


def _pullable() -> dict[str, PullRefs]:
    return {plugin.id: plugin.pull for plugin in discover().values() if plugin.pull is not None}


def parse_ref(ref: str) -> tuple[str, str]:
    """`(engine, item name)` of a pull reference; InvalidRequest if malformed."""
    engine, _, name = ref.strip().partition(":")
    engine = engine.lower()
    refs = _pullable()
    item = refs[engine].item(name) if engine in refs else None
    if item:
        return engine, item
    forms = [pull.usage for pull in refs.values()]
    listed = ", ".join(forms[:-1]) + ", or " + forms[-1] if len(forms) > 1 else "".join(forms)
    raise InvalidRequest(
        f"{ref!r} is not a pull reference: use {listed}.",
        param="ref",
        code="invalid_ref",
    )


def make_ref(engine: str, name: str) -> str:
    pull = _pullable().get(engine)
    return pull.ref(engine, name) if pull is not None else f"{engine}:{name}"


def ref_for_voice(engine: str, voice: str) -> str | None:
    """The reference that would install `voice` of `engine`, if its name alone says."""
    pull = _pullable().get(engine)
    return pull.for_voice(voice) if pull is not None else None


def ref_for_known_voice(engine: str, voice: str) -> str | None:
    """The reference that installs `voice` if a release of `engine`'s model ships it: what a
    client of another server names."""
    pull = _pullable().get(engine)
    return pull.for_known_voice(voice.strip().lower()) if pull is not None else None


def ref_for_model(model: str) -> str | None:
    """The reference that installs a model clients name ("kokoro-82m" -> kokoro)."""
    name = model.lower()
    for plugin in discover().values():
        if plugin.pull is not None and name in (plugin.id, *plugin.model_aliases):
            return plugin.pull.model
    return None


def pull_ref(engine: str, voice: str) -> str | None:
    """What `speechgate voices pull` takes to install `voice` of `engine`, if anything."""
    pull = _pullable().get(engine)
    if pull is None:
        return None
    found = pull.for_voice(voice)
    return pull.model if found is None and pull.voices_come_with_model else found


def pull_hint(engine: str, language: str) -> str:
    """How to find and install a voice of `language` for `engine`."""
    search = f"`speechgate voices search --language {language}`"
    pull = _pullable().get(engine)
    template = pull.search_hint if pull is not None else PullRefs.search_hint
    return template.format(search=search)
