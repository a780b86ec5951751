"""The server's log output, readable lines or JSON, with the libraries' start-up chatter
demoted to DEBUG so that what speechgate says at start-up is read."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal

LogFormat = Literal["text", "json"]
# What a record carries beyond these came in `extra`.
_RECORD_ATTRIBUTES = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
# uvicorn's start-up lines but "Uvicorn running on ..."; its shutdown lines stay.
_UVICORN_CHATTER = (
    "Started server process",
    "Waiting for application startup",
    "Application startup complete",
)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, with whatever the record was given in `extra`."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            # uvicorn's `color_message` is its message again, with terminal colours.
            if key not in _RECORD_ATTRIBUTES and key != "color_message":
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class LibraryChatter(logging.Filter):
    """Logs libraries' INFO start-up lines as DEBUG. A handler filter, as a logger's misses
    its children's records (`alembic.runtime.migration`)."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.INFO and _is_chatter(record):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return self.level <= logging.DEBUG
        return True


def _is_chatter(record: logging.LogRecord) -> bool:
    if record.name == "alembic" or record.name.startswith("alembic."):
        return True
    if record.name == "uvicorn.error":
        return str(record.msg).startswith(_UVICORN_CHATTER)
    return False


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """Told apart from other handlers, so a second `configure_logging` replaces it."""


def configure_logging(log_format: LogFormat = "text", level: str = "info") -> None:
    """Send every logger's records (uvicorn's too: serve it with `log_config=None`) to stderr in
    `log_format`, at `level` and above."""
    threshold = logging.getLevelNamesMapping()[level.upper()]
    handler = _Handler(sys.stderr)
    handler.setFormatter(
        JsonFormatter()
        if log_format == "json"
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    handler.addFilter(LibraryChatter(threshold))
    root = logging.getLogger()
    for old in [old for old in root.handlers if isinstance(old, _Handler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(threshold)
