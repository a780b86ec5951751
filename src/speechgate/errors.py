"""One error hierarchy. Each class knows its HTTP status and OpenAI error `type`.

Code raises these; `speechgate.api.error_handlers` turns any of them into OpenAI's envelope
`{"error": {"message", "type", "param", "code"}}`. Nothing branches on message text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping


class SpeechgateError(Exception):
    """Root of every error speechgate answers to a client."""

    status_code = 500
    error_type = "server_error"
    default_code: str | None = None

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code or self.default_code
        self.headers = dict(headers or {})


# --- the client's fault -------------------------------------------------------------------


class InvalidRequest(SpeechgateError):
    status_code = 400
    error_type = "invalid_request_error"
    default_code = "invalid_value"


class VoiceNotFound(InvalidRequest):
    default_code = "voice_not_found"

    # espeak-ng alone has hundreds of voices.
    listed = 40

    def __init__(self, voice: str, valid: list[str]) -> None:
        names = ", ".join(valid[: self.listed])
        if len(valid) > self.listed:
            names += f" and {len(valid) - self.listed} more (GET /v1/audio/voices lists all)"
        super().__init__(
            f"Voice {voice!r} is not available for this model. Valid voices: {names}.",
            param="voice",
        )


class VoiceNotInstalled(InvalidRequest):
    """A voice speechgate knows that is not installed here; `ref` is what pulls it."""

    default_code = "voice_not_installed"

    def __init__(self, voice: str, target: str, ref: str | None) -> None:
        means = f"{voice!r} means {target!r}" if voice != target else f"{voice!r}"
        how = (
            f" Install it with `speechgate voices pull {ref}`."
            if ref
            else " The loaded engine does not have it."
        )
        super().__init__(f"The voice {means}, which is not installed.{how}", param="voice")
        self.voice = target
        self.ref = ref


class UnsupportedLanguage(InvalidRequest):
    """No voice of the language asked for (or the voice named speaks another one)."""

    default_code = "unsupported_language"


class ModelNotFound(InvalidRequest):
    status_code = 404
    default_code = "model_not_found"

    def __init__(self, model: str, valid: list[str], hint: str | None = None) -> None:
        reason = hint or "does not exist."
        super().__init__(
            f"The model {model!r} {reason} Available models: {', '.join(valid)}.",
            param="model",
        )


class Unprocessable(InvalidRequest):
    """A field of the right type with a value the API does not take: ElevenLabs' 422."""

    status_code = 422


class NotFound(InvalidRequest):
    status_code = 404
    default_code = "not_found"


class Conflict(InvalidRequest):
    status_code = 409
    default_code = "conflict"


class MethodNotAllowed(InvalidRequest):
    status_code = 405
    default_code = "method_not_allowed"


class PayloadTooLarge(InvalidRequest):
    status_code = 413
    default_code = "payload_too_large"


class UnsupportedMediaType(InvalidRequest):
    status_code = 415
    default_code = "unsupported_media_type"


class NotPullable(NotFound):
    """A `voices pull` reference that no index knows."""

    default_code = "not_pullable"


class RequestTimeout(InvalidRequest):
    """The client stopped sending its request body part-way."""

    status_code = 408
    default_code = "request_timeout"


class SessionExpired(SpeechgateError):
    """A streaming session reached `sessions.max_seconds` and was closed."""

    status_code = 408
    error_type = "invalid_request_error"
    default_code = "session_expired"


# --- capacity: try again later ------------------------------------------------------------


def _retry_headers(retry_after: float) -> dict[str, str]:
    # Retry-After is whole seconds (RFC 9110); OpenAI's SDKs prefer the millisecond header.
    return {
        "Retry-After": str(max(1, math.ceil(retry_after))),
        "retry-after-ms": str(max(1, round(retry_after * 1000))),
    }


class QueueFull(SpeechgateError):
    """Refused before waiting, the predicted wait being its Retry-After."""

    status_code = 429
    error_type = "rate_limit_error"
    default_code = "queue_full"

    def __init__(self, retry_after: float) -> None:
        super().__init__(
            "The server is at capacity: no worker can be expected within its queue's limit; "
            "retry after the indicated delay.",
            headers=_retry_headers(retry_after),
        )
        self.retry_after = retry_after


class QueueStalled(SpeechgateError):
    """An admitted request waited far beyond any predicted wait: no worker is serving."""

    status_code = 503
    error_type = "server_error"
    default_code = "queue_stalled"

    def __init__(self, waited: float, retry_after: float) -> None:
        super().__init__(
            f"No worker served this engine's queue for {waited:.0f} s; retry later.",
            headers=_retry_headers(retry_after),
        )


# --- our fault ----------------------------------------------------------------------------


class EngineFailed(SpeechgateError):
    status_code = 500
    default_code = "engine_error"


class SlowReader(SpeechgateError):
    """The client read nothing for too long, so its job was given up: seen mid-stream only."""

    status_code = 408
    error_type = "invalid_request_error"
    default_code = "slow_reader"


class WorkerLost(SpeechgateError):
    """The worker running a job died; the request may be retried."""

    status_code = 503
    default_code = "worker_lost"

    def __init__(self, message: str = "The synthesis worker stopped unexpectedly; retry.") -> None:
        super().__init__(message, headers=_retry_headers(1))


class WorkerStalled(WorkerLost):
    """The worker running a job went silent and was replaced; the request may be retried."""

    default_code = "worker_stalled"

    def __init__(self, silent: float) -> None:
        super().__init__(
            f"The synthesis worker made no progress for {silent:g} s and was replaced; retry."
        )


class NotReady(SpeechgateError):
    status_code = 503
    default_code = "not_ready"


# --- the LLM upstream (the chat relay) ----------------------------------------------------


class NotConfigured(NotFound):
    """A route whose backing service is not configured: 404, as OpenAI's SDKs retry any 5xx
    and clients such as Open WebUI read 404 as "no such endpoint here"."""

    default_code = "not_configured"


class UpstreamError(SpeechgateError):
    """The LLM upstream failed us: 502 (bad gateway) unless a subclass says otherwise."""

    status_code = 502
    default_code = "upstream_error"


class UpstreamUnavailable(UpstreamError):
    """The upstream could not be reached, or dropped the connection."""

    default_code = "upstream_unavailable"


class UpstreamTimeout(UpstreamError):
    status_code = 504
    default_code = "upstream_timeout"


class UpstreamBadResponse(UpstreamError):
    """The upstream answered outside OpenAI's protocol (an HTML page, a 200 that is not JSON)."""

    default_code = "upstream_bad_response"


class UpstreamRejected(UpstreamError):
    """The upstream answered an OpenAI error, relayed as it was."""

    def __init__(
        self,
        status_code: int,
        message: str,
        *,
        error_type: str,
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message, param=param, headers=headers)
        self.status_code = status_code
        self.error_type = error_type
        self.code = code


# --- tenancy: keys, limits, quotas --------------------------------------------------------


class AuthenticationFailed(SpeechgateError):
    """No key, or one that is unknown, revoked or expired (OpenAI's type and code)."""

    status_code = 401
    error_type = "invalid_request_error"
    default_code = "invalid_api_key"

    def __init__(self, message: str) -> None:
        super().__init__(message, headers={"WWW-Authenticate": "Bearer"})


class PermissionDenied(SpeechgateError):
    """A valid key asking for something it is not allowed (a model, the admin API)."""

    status_code = 403
    error_type = "permission_error"
    default_code = "permission_denied"


class RateLimited(SpeechgateError):
    """A key over its requests-per-second or concurrency limit."""

    status_code = 429
    error_type = "rate_limit_error"
    default_code = "rate_limit_exceeded"

    def __init__(
        self,
        message: str,
        retry_after: float,
        *,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            message, code=code, headers={**(headers or {}), **_retry_headers(retry_after)}
        )
        self.retry_after = retry_after


class InsufficientQuota(RateLimited):
    """A key whose monthly character quota cannot cover the request (OpenAI's type and code)."""

    error_type = "insufficient_quota"
    default_code = "insufficient_quota"


class LimitsUnavailable(SpeechgateError):
    """The shared per-key limits (`store.limits_url`) cannot be reached."""

    status_code = 503
    default_code = "limits_unavailable"

    def __init__(self) -> None:
        super().__init__(
            "The server cannot reach its rate-limit store (Redis at store.limits_url), so it "
            "cannot check this key's limits; retry after the indicated delay.",
            headers=_retry_headers(1),
        )


# --- provider routing ---------------------------------------------------------------------


class NoProviderAvailable(SpeechgateError):
    """Every provider of a route is disabled or has its circuit breaker open."""

    status_code = 503
    default_code = "no_provider_available"

    def __init__(self, route: str) -> None:
        super().__init__(
            f"No provider of model {route!r} is available now; retry after the indicated delay.",
            headers=_retry_headers(1),
        )


# --- pulling voices and models from the hub -----------------------------------------------


class PullFailed(SpeechgateError):
    """A pull could not complete: the hub failed or was unreachable (502, like any upstream)."""

    status_code = 502
    default_code = "pull_failed"


class ChecksumMismatch(PullFailed):
    """A downloaded file does not match its index's checksum; nothing was installed."""

    default_code = "checksum_mismatch"


# --- the server's own resources -----------------------------------------------------------


class InsufficientStorage(SpeechgateError):
    """The disk (or the database's) is full: what was being written was not kept."""

    status_code = 507
    default_code = "insufficient_storage"

    def __init__(self, what: str) -> None:
        super().__init__(
            f"{what} failed: the server's disk is full. Free space on it (or give the server "
            "more), then retry."
        )


_SQLITE_FULL = 13
_POSTGRES_DISK_FULL = "53100"


def disk_full(error: BaseException) -> bool:
    """Whether `error`, or one it was raised from, says a disk is full (OS, SQLite or
    PostgreSQL)."""
    import errno

    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if getattr(current, "sqlite_errorcode", None) == _SQLITE_FULL:
            return True
        if getattr(current, "sqlstate", None) == _POSTGRES_DISK_FULL:
            return True
        pending += [current.__cause__, current.__context__, getattr(current, "orig", None)]
    return False
