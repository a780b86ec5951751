"""The `speechgate` command: as users run it (a process of its own) where the entry point is the
subject, in this process (typer's runner, the same commands) where what a command does is: a
process of its own imports the engines anew each time."""

from __future__ import annotations

import itertools
import json
import subprocess
import wave
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from speechgate.cli import app, common
from tests.helpers.audio import decode_audio, flac_total_samples
from tests.helpers.captions import read_captions
from tests.helpers.server import SPEECHGATE

pytestmark = pytest.mark.slow


def speechgate(*args: str, env: dict[str, str] | None = None) -> Result:
    """Run the command in this process; `env` is set in the environment while it runs."""
    return CliRunner().invoke(app, list(args), env=env)


@pytest.mark.parametrize(
    ("name", "args", "process"),
    [("out.mp3", [], True), ("out.wav", ["--model", "espeak"], False)],
)
def test_say_writes_a_playable_file(
    tmp_path: Path, name: str, args: list[str], process: bool
) -> None:
    output = tmp_path / name
    say = ["say", "Hello from the command line.", "-o", str(output), *args]
    if process:  # once as users run it: the entry point
        ran = subprocess.run([*SPEECHGATE, *say], capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran.stderr
    else:
        result = speechgate(*say)
        assert result.exit_code == 0, result.output
    audio = decode_audio(output.read_bytes(), output.suffix.lstrip("."))
    assert audio.sample_rate == 24000
    assert audio.duration > 0.8
    assert audio.rms > 0.01


def test_say_writes_files_with_complete_headers(tmp_path: Path) -> None:
    # espeak-ng is deterministic: the same text gives the same samples in every file.
    text = "Headers that tell the truth."
    for name in ("out.wav", "out.flac", "out.mp3"):
        result = speechgate("say", text, "-o", str(tmp_path / name), "--model", "espeak")
        assert result.exit_code == 0, result.output
    with wave.open(str(tmp_path / "out.wav")) as reader:
        frames = reader.getnframes()
    assert frames == (len((tmp_path / "out.wav").read_bytes()) - 44) // 2 > 24000
    flac = (tmp_path / "out.flac").read_bytes()
    assert flac_total_samples(flac) == len(decode_audio(flac, "flac").samples) == frames
    # The LAME tag's delay and padding let a decoder trim the MP3 (without them it is 1100+
    # samples longer); the resampler's flush, into the codec's own sample format, differs by
    # a few samples from the WAV's.
    mp3 = decode_audio((tmp_path / "out.mp3").read_bytes(), "mp3")
    assert abs(len(mp3.samples) - frames) <= 64


@pytest.mark.parametrize(
    ("fmt", "codec", "rate"),
    [("ulaw_8000", "ulaw", 8000), ("pcm_16000", "pcm", 16000), ("mp3_22050_32", "mp3", 22050)],
)
def test_say_writes_a_named_format(tmp_path: Path, fmt: str, codec: str, rate: int) -> None:
    output = tmp_path / "out.raw"
    args = ["-o", str(output), "--model", "espeak", "--format", fmt]
    result = speechgate("say", "Telephone speech.", *args)
    assert result.exit_code == 0, result.output
    assert fmt in result.stdout
    audio = decode_audio(output.read_bytes(), codec, pcm_rate=rate)
    assert audio.sample_rate == rate
    assert audio.duration > 0.8
    assert audio.rms > 0.01


def test_say_rejects_an_unknown_format(tmp_path: Path) -> None:
    result = speechgate("say", "Hi.", "-o", str(tmp_path / "x.raw"), "--format", "pcm_12345")
    assert result.exit_code == 2
    assert "pcm_12345" in result.stderr and "ulaw_8000" in result.stderr
    assert not (tmp_path / "x.raw").exists()


CAPTIONED = (
    "Captions come from the word times.  Each cue holds a few words,\nor ends where a "
    'sentence does! "Quotes" and (brackets) stay with their words. The end.'
)


@pytest.mark.parametrize(("audio", "captions"), [("out.wav", "out.srt"), ("out.aac", "out.vtt")])
def test_say_writes_captions_that_end_with_the_audio(
    tmp_path: Path, audio: str, captions: str
) -> None:
    options = ["--model", "espeak", "--captions", str(tmp_path / captions)]
    result = speechgate("say", CAPTIONED, "-o", str(tmp_path / audio), *options)
    assert result.exit_code == 0, result.output
    cues = read_captions(tmp_path / captions)
    decoded = decode_audio((tmp_path / audio).read_bytes(), audio.rsplit(".", 1)[1])
    # Every word, in order, on screen: the text as written, a few words a cue.
    assert " ".join(cue.text for cue in cues) == " ".join(CAPTIONED.split())
    assert all(len(cue.text.split()) <= 7 for cue in cues)
    assert cues[0].start >= 0
    assert all(a.end <= b.start for a, b in itertools.pairwise(cues))
    assert all(cue.start < cue.end for cue in cues)
    # The first word starts where the sound does (in AAC, after the decoder's 43 ms of
    # priming), the last ends as the speech does (espeak-ng's trailing silence is short).
    onset = np.argmax(np.abs(decoded.samples) > 0.02) / decoded.sample_rate
    assert cues[0].start == pytest.approx(onset, abs=0.02)
    assert decoded.duration - 0.3 < cues[-1].end <= decoded.duration


def test_say_refuses_captions_of_another_kind(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["say", "Hi.", "-o", str(tmp_path / "x.wav"), "--captions", str(tmp_path / "x.txt")]
    )
    assert result.exit_code == 2
    assert "srt or .vtt" in result.output
    assert not (tmp_path / "x.wav").exists()


def test_say_rejects_an_unknown_voice(tmp_path: Path) -> None:
    # espeak-ng: the engine loads before the voice is looked up, and it loads in milliseconds.
    args = ["-o", str(tmp_path / "x.wav"), "--model", "espeak", "--voice", "nobody"]
    result = speechgate("say", "Hi.", *args)
    assert result.exit_code != 0
    assert "nobody" in result.stderr + result.stdout
    assert not (tmp_path / "x.wav").exists()


def test_voices_lists_the_embedded_voice() -> None:
    result = speechgate("voices")
    assert result.exit_code == 0, result.output
    assert "en_US-joe-medium" in result.stdout
    assert "alloy" in result.stdout


def test_say_and_voices_use_stored_voices_and_seeds(tmp_path: Path) -> None:
    pytest.importorskip("pocket_tts")
    from speechgate.cloning.library import VoiceLibrary
    from speechgate.engines import load_engine
    from speechgate.engines.base import EngineConfig
    from tests.helpers.pocket import build_tiny_model, read_wav

    model = build_tiny_model(tmp_path)
    options = {"config": str(model / "config.yaml"), "eos_threshold": "1e9"}
    engine = load_engine(EngineConfig("pocket", options=options))
    try:
        state = engine.clone(read_wav(model / "low.wav"))  # type: ignore[attr-defined]
    finally:
        engine.close()
    VoiceLibrary(tmp_path / "data" / "voices").add("keeper", "pocket", state, 3.0)
    env = {
        "SPEECHGATE_ENGINES": "pocket",
        "SPEECHGATE_DEFAULT_ENGINE": "pocket",
        "SPEECHGATE_ENGINE_OPTIONS": json.dumps({"pocket": options}),
        "SPEECHGATE_DATA_DIR": str(tmp_path / "data"),
    }

    def run(*args: str) -> Result:
        result = speechgate(*args, env=env)
        assert result.exit_code == 0, result.output
        return result

    assert "keeper" in run("voices", "--model", "pocket").stdout
    for name in ("a.wav", "b.wav"):
        run("say", "Hi.", "-o", str(tmp_path / name), "--voice", "keeper", "--seed", "3")
    assert (tmp_path / "a.wav").read_bytes() == (tmp_path / "b.wav").read_bytes()
    assert decode_audio((tmp_path / "a.wav").read_bytes(), "wav").rms > 0.01


def test_serve_takes_the_zeroconf_flag_into_its_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without --wyoming the flag is refused by the settings, before anything starts; were it
    # let through, the app's creation ends the command here instead of serving for good.
    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("serve got past its settings")

    monkeypatch.setattr("speechgate.api.app.create_app", started)
    result = speechgate(
        "serve", "--wyoming-zeroconf", env={"SPEECHGATE_DATA_DIR": str(tmp_path), "COLUMNS": "200"}
    )
    assert result.exit_code == 2, result.output
    assert "settings: Value error, wyoming.zeroconf needs wyoming.uri" in result.stderr


@pytest.mark.parametrize(
    ("args", "variable", "value", "says"),
    [
        (["say", "Hi.", "-o", "out.wav"], "SPEECHGATE_ENGINES", "nosuch", "unknown engines"),
        (
            ["keys", "list"],
            "SPEECHGATE_SERVER__PORT",
            "eighty",
            "SPEECHGATE_SERVER__PORT: Input should be",
        ),
    ],
)
def test_invalid_settings_end_a_command_with_what_is_wrong(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    variable: str,
    value: str,
    says: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    env = {"SPEECHGATE_DATA_DIR": str(tmp_path), variable: value, "COLUMNS": "200"}
    result = speechgate(*args, env=env)
    # Status 2 is the command's own exit; an exception escaping it would end with 1 (and, in a
    # process of its own, print a traceback).
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.exit_code == 2
    assert says in result.stderr and value in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("args", "missing", "extra"),
    [
        (["chat", "Hello?"], "openai", "chat"),
        (["bench", "--url", "http://127.0.0.1:1"], "psutil", "bench"),
        (["bench", "--url", "http://127.0.0.1:1", "--plot", "p.png"], "matplotlib", "bench"),
    ],
)
def test_a_command_without_its_extra_names_it(
    monkeypatch: pytest.MonkeyPatch, args: list[str], missing: str, extra: str
) -> None:
    real_find_spec = common.find_spec
    monkeypatch.setattr(
        common, "find_spec", lambda name: None if name == missing else real_find_spec(name)
    )
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert f"needs {missing}: pip install 'speechgate[{extra}]'" in " ".join(result.output.split())
