"""The server's log output: text or JSON, the libraries' start-up chatter at DEBUG."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from speechgate.logs import configure_logging


@pytest.fixture
def root_logging() -> Iterator[None]:
    """The root logger as `speechgate serve` leaves it, restored after: uvicorn's loggers
    propagating to it (a test server run earlier in this process, with uvicorn's own logging
    config, gave them handlers of their own and stopped their propagation)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    uvicorn = [logging.getLogger(name) for name in ("uvicorn", "uvicorn.error", "uvicorn.access")]
    saved = [(lg.handlers[:], lg.propagate, lg.level, lg.disabled) for lg in uvicorn]
    for logger in uvicorn:
        logger.handlers[:], logger.propagate, logger.disabled = [], True, False
        logger.setLevel(logging.NOTSET)
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for logger, (kept, propagate, kept_level, disabled) in zip(uvicorn, saved, strict=True):
        logger.handlers[:], logger.propagate, logger.disabled = kept, propagate, disabled
        logger.setLevel(kept_level)


def _start_up_lines() -> None:
    logging.getLogger("alembic.runtime.migration").info("Context impl SQLiteImpl.")
    logging.getLogger("uvicorn.error").info("Started server process [%d]", 42)
    logging.getLogger("speechgate").info("speechgate serving")
    logging.getLogger("uvicorn.error").info(
        "Uvicorn running on %s://%s:%d (Press CTRL+C to quit)", "http", "127.0.0.1", 8000
    )
    logging.getLogger("uvicorn.error").warning("a library's warning stays one")
    logging.getLogger("uvicorn.error").info("Shutting down")


@pytest.mark.usefixtures("root_logging")
def test_library_start_up_lines_are_debug(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("text", "info")
    _start_up_lines()
    shown = capsys.readouterr().err

    assert "Context impl" not in shown and "Started server process" not in shown
    assert "INFO speechgate: speechgate serving" in shown
    assert "Uvicorn running on http://127.0.0.1:8000" in shown
    assert "WARNING uvicorn.error: a library's warning stays one" in shown
    assert "INFO uvicorn.error: Shutting down" in shown

    configure_logging("text", "debug")  # replaces the handler, does not add a second
    _start_up_lines()
    shown = capsys.readouterr().err
    assert "DEBUG alembic.runtime.migration: Context impl SQLiteImpl." in shown
    assert "DEBUG uvicorn.error: Started server process [42]" in shown
    assert shown.count("speechgate serving") == 1


@pytest.mark.usefixtures("root_logging")
def test_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("json", "info")
    _start_up_lines()
    logging.getLogger("speechgate").info("serving", extra={"serving": {"keys": False}})
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]

    assert [(line["level"], line["logger"]) for line in lines] == [
        ("info", "speechgate"),
        ("info", "uvicorn.error"),
        ("warning", "uvicorn.error"),
        ("info", "uvicorn.error"),
        ("info", "speechgate"),
    ]
    assert lines[1]["message"] == "Uvicorn running on http://127.0.0.1:8000 (Press CTRL+C to quit)"
    assert "color_message" not in lines[1]
    assert lines[4]["serving"] == {"keys": False}
    assert lines[0]["time"].endswith("+00:00")
