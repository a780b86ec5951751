"""The summary a server logs once it has started, built in-process from the fake engine."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from speechgate.catalog import Catalog
from speechgate.engines.base import EngineInfo
from speechgate.engines.fake import FakeEngine
from speechgate.logs import JsonFormatter
from speechgate.settings import Settings
from speechgate.startup_summary import startup_summary


def _catalog(settings: Settings) -> Catalog:
    return Catalog(
        {"fake": EngineInfo.of(FakeEngine())},
        settings.resolved_model_aliases(),
        settings.voice_aliases,
        settings.models_dir,
    )


def test_the_summary_says_what_is_served_where(tmp_path: Path) -> None:
    settings = Settings(engines=["fake"], data_dir=tmp_path, server={"port": 8123})

    text = startup_summary(settings, _catalog(settings)).text()

    lines = text.splitlines()
    assert lines[0].startswith("speechgate ") and lines[0].endswith("http://127.0.0.1:8123")
    # alloy's voice first: the one a first request hears.
    assert "fake (default): 3 voices (en-high, en-low, de-mid)" in text
    assert "base_url=http://127.0.0.1:8123/v1" in text
    assert "playground  http://127.0.0.1:8123/" in text
    assert "http://127.0.0.1:8123/docs" in text
    assert "keys        off: open; admin API off" in text
    assert f"data        {tmp_path}" in text
    assert "wyoming" not in text
    assert len(lines) <= 8


def test_keys_a_closed_playground_and_any_interface(tmp_path: Path) -> None:
    settings = Settings(
        engines=["fake"],
        data_dir=tmp_path,
        server={"host": "0.0.0.0", "playground": False},
        auth={"mode": "keys", "admin_key": "a" * 32},
    )

    summary = startup_summary(settings, _catalog(settings))

    assert summary.url == "http://127.0.0.1:8000"  # what a browser here can open
    assert summary.playground is None
    assert "off (SPEECHGATE_SERVER__PLAYGROUND=false)" in summary.text()
    assert "on: /v1 needs a key (speechgate keys create); admin API on" in summary.text()


def test_the_json_line_carries_the_same_facts(tmp_path: Path) -> None:
    settings = Settings(engines=["fake"], data_dir=tmp_path)
    summary = startup_summary(settings, _catalog(settings))
    record = logging.makeLogRecord(
        {"name": "speechgate", "levelno": logging.INFO, "levelname": "INFO", "msg": "serving"}
    )
    record.serving = summary.fields()

    line = json.loads(JsonFormatter().format(record))

    assert line["message"] == "serving" and line["level"] == "info"
    assert line["serving"]["engines"] == [
        {"name": "fake", "voices": 3, "examples": ["en-high", "en-low", "de-mid"], "default": True}
    ]
    assert line["serving"]["playground"] == "http://127.0.0.1:8000/"
    assert line["serving"]["api_docs"] == "http://127.0.0.1:8000/docs"
    assert line["serving"]["keys"] is False
    assert line["serving"]["data_dir"] == str(tmp_path)
