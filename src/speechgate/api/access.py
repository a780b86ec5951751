"""Keys, limits and metering at the HTTP edge.

`UsageMiddleware` gives every speech request its `Call` (`speechgate.serving`) and, when the
request is over (answered, failed or abandoned by its client), finishes it: its limits freed,
its usage recorded (a cloning request is admitted by its call too). `authenticate` guards the
/v1 routes; `require_admin` guards the admin API.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from starlette.datastructures import Headers, MutableHeaders
from starlette.exceptions import WebSocketException
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from speechgate import tracing
from speechgate.api.state import app_state, started
from speechgate.errors import AuthenticationFailed, NotConfigured, PermissionDenied, SpeechgateError
from speechgate.metering.key_secrets import bearer_token
from speechgate.metering.meter import Meter
from speechgate.metering.records import CLIENT_CLOSED, is_billable
from speechgate.metering.tenancy import Principal, Tenancy

# Cloning is metered like speech: it takes a worker (a usage record with no audio out).
_METERED = {("POST", "/v1/audio/speech"), ("POST", "/v1/audio/voices")}
# ElevenLabs' speech routes carry the voice in the path: `/v1/text-to-speech/{voice_id}[/...]`.
_METERED_PREFIX = ("POST", "/v1/text-to-speech/")
_WS_POLICY_VIOLATION = 1008


def get_tenancy(connection: HTTPConnection) -> Tenancy:
    return app_state(connection).tenancy


async def authenticate(connection: HTTPConnection) -> Principal:
    """The /v1 routes' guard: who is asking (401 if keys are required and this one is not
    good). A WebSocket is refused at the handshake."""
    tenancy = get_tenancy(connection)
    try:
        principal = await tenancy.authenticate(credentials(connection))
    except SpeechgateError as error:
        if connection.scope["type"] == "websocket":
            raise WebSocketException(_WS_POLICY_VIOLATION, error.message) from None
        raise
    connection.state.principal = principal
    meter: Meter | None = getattr(connection.state, "meter", None)
    if meter is not None:
        meter.principal = principal
    return principal


def credentials(connection: HTTPConnection) -> str | None:
    """The `Authorization` header, or else ElevenLabs' `xi-api-key` as a bearer token: its
    clients send the key there, and it is the same key."""
    authorization = connection.headers.get("authorization")
    xi_key = connection.headers.get("xi-api-key")
    if authorization is None and xi_key:
        return f"Bearer {xi_key}"
    return authorization


def is_metered(method: str, path: str) -> bool:
    """Whether a request is a speech (or cloning) request, which gets a `Meter`."""
    return (method, path) in _METERED or (
        method == _METERED_PREFIX[0] and path.startswith(_METERED_PREFIX[1])
    )


CurrentPrincipal = Annotated[Principal, Depends(authenticate)]


async def require_admin(request: Request) -> Principal:
    """The admin API's guard: the admin key, and nothing else."""
    tenancy = get_tenancy(request)
    if not tenancy.admin_enabled:
        raise NotConfigured(
            "The admin API is off: set SPEECHGATE_AUTH__ADMIN_KEY to turn it on.",
            code="admin_not_configured",
        )
    token = bearer_token(request.headers.get("authorization"))
    if tenancy.is_admin(token):
        return await tenancy.authenticate(request.headers.get("authorization"))
    if token is None:
        raise AuthenticationFailed("The admin API needs 'Authorization: Bearer <admin key>'.")
    raise PermissionDenied("The admin API needs the admin key.", code="admin_key_required")


class UsageMiddleware:
    """Every metered request's `Call`, made as it comes in (routes open it) and finished
    however it ends: one usage record each, its key's limits freed."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_metered(scope["method"], scope["path"]):
            await self.app(scope, receive, send)
            return
        app_state = started(scope["app"])
        if app_state is None:  # not started: nothing can be served, nor recorded
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        call = app_state.serving.call(state.get("request_id", ""))
        state["call"] = call
        meter = state["meter"] = call.meter
        status: int | None = None
        client_left = False

        async def watch_receive() -> Message:
            nonlocal client_left
            message = await receive()
            client_left = client_left or message["type"] == "http.disconnect"
            return message

        async def watch_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                # The key's limits, as OpenAI sends them: on every answer, errors included.
                headers = MutableHeaders(scope=message)
                for name, value in meter.headers.items():
                    headers.setdefault(name, value)
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                await _free_before_last_byte(scope, meter, status, client_left)
            await send(message)

        failed = False
        # The request's trace: its root span is current for everything the app does for it.
        with tracing.request(front_end(scope["path"]), trace_context(scope)):
            try:
                await self.app(scope, watch_receive, watch_send)
            except BaseException:
                failed = True
                raise
            finally:
                call.finish(recorded_status(meter, status, failed, client_left))


def front_end(path: str) -> str:
    """Which API a metered request came through, as its trace names it."""
    return "elevenlabs" if path.startswith(_METERED_PREFIX[1]) else "openai"


def trace_context(scope: Scope) -> dict[str, str] | None:
    """The W3C trace context (`traceparent`) a client sent, if tracing is on: the request's
    trace goes on from the client's."""
    if not tracing.enabled():
        return None
    headers = Headers(scope=scope)
    return {name: headers[name] for name in ("traceparent", "tracestate") if name in headers}


async def _free_before_last_byte(
    scope: Scope, meter: Meter, status: int | None, client_left: bool
) -> None:
    """Free the key's slot before the client can know that the answer is complete, on every
    gateway sharing the limits: a client that sends its next request then is not refused."""
    state = started(scope["app"])
    if meter.admission is None or status is None or state is None or client_left:
        return  # a client that left is not waiting: its slot is freed once its job has ended
    billable = is_billable(recorded_status(meter, status, failed=False, client_left=False))
    await state.tenancy.release_before_answering(meter.admission, billable)


def recorded_status(meter: Meter, status: int | None, failed: bool, client_left: bool) -> int:
    """The status to record: the response's, unless its audio was cut short."""
    if status is None:
        return CLIENT_CLOSED if client_left and not failed else 500
    if meter.stream is None or meter.stream.completed or status >= 400:
        return status
    # Headers said 200, but the audio stopped early: the client left, or synthesis failed
    # (an exception here, or an error event inside a server-sent-event stream).
    return CLIENT_CLOSED if client_left and not failed else 500
