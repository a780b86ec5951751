"""One handler table: every error leaves as OpenAI's envelope with the right status."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from speechgate.errors import (
    InsufficientStorage,
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    SpeechgateError,
    disk_full,
)

log = logging.getLogger(__name__)


def error_body(error: SpeechgateError) -> dict[str, Any]:
    return {
        "error": {
            "message": error.message,
            "type": error.error_type,
            "param": error.param,
            "code": error.code,
        }
    }


def openai_error_response(error: SpeechgateError) -> JSONResponse:
    return JSONResponse(error_body(error), status_code=error.status_code, headers=error.headers)


def validation_error(exc: RequestValidationError) -> InvalidRequest:
    first = exc.errors()[0]
    if first["type"] == "json_invalid":
        return InvalidRequest(
            "We could not parse the JSON body of your request. The body must be a JSON object.",
            code="invalid_json",
        )
    # ("body", "speed") -> "speed"; ("body", "voice", "VoiceRef", "id") -> "voice".
    location = [str(part) for part in first["loc"] if part not in ("body", "query", "path")]
    param = location[0] if location else None
    if param is None:
        return InvalidRequest(f"Invalid request body: {first['msg']}.", code="invalid_body")
    reason = first["msg"][0].lower() + first["msg"][1:]
    code = "missing_required_parameter" if first["type"] == "missing" else "invalid_value"
    return InvalidRequest(f"Invalid value for '{param}': {reason}.", param=param, code=code)


def http_error(exc: HTTPException) -> SpeechgateError:
    """Starlette's and FastAPI's own errors (no route, a body that cannot be parsed) as ours."""
    error: SpeechgateError
    if exc.status_code == 404:
        error = NotFound("Unknown route. See GET /docs for the API.")
    elif exc.status_code == 405:
        error = MethodNotAllowed("Method not allowed for this route.")
    else:
        error = InvalidRequest(str(exc.detail), code=None)
        error.status_code = exc.status_code
    error.headers.update(exc.headers or {})
    return error


def install_error_handlers(app: FastAPI) -> None:
    async def on_speechgate_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, SpeechgateError)
        if exc.status_code >= 500:
            log.error("%s: %s", type(exc).__name__, exc.message)
        return openai_error_response(exc)

    async def on_validation_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return openai_error_response(validation_error(exc))

    async def on_http_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        return openai_error_response(http_error(exc))

    async def on_unexpected(_: Request, exc: Exception) -> JSONResponse:
        if disk_full(exc):  # a key or a voice written to a full disk: not a bug of ours
            log.error("disk full: %s", exc)
            return openai_error_response(InsufficientStorage("Saving what the request made"))
        log.exception("unhandled error", exc_info=exc)
        unhandled = SpeechgateError("The server had an error processing your request.")
        return openai_error_response(unhandled)

    app.add_exception_handler(SpeechgateError, on_speechgate_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(HTTPException, on_http_error)
    app.add_exception_handler(Exception, on_unexpected)
