"""The app-level half of the hardened server: what quart and quart-trio get wrong.

`serving.py` lists the pitfalls (DESIGN.md "Known pitfalls of this stack");
this module fixes the ones that live in the ASGI app:

1. (first half) hypercorn sends ``http.disconnect`` from inside the app's final
   ``http.response.body`` send and quart-trio's reader cancels the request
   nursery in the middle of hypercorn's recycling: `HardenedHTTPConnection`
   shields that one final send (the socket write under it has its own deadline,
   see `connection.py`).
2. Streams are cut by ``RESPONSE_TIMEOUT``: `streaming_response` sets the
   response's timeout to none, and any ``text/event-stream`` response without
   an explicit timeout is treated as unbounded.
6. ``MAX_CONTENT_LENGTH`` only bites when the body is read: a declared
   ``Content-Length`` over the limit is answered 413 before the app runs (after
   the app's own `HEADER_CHECK`, so a refused origin hears 403, not 413); a
   chunked body is counted as it arrives and nothing past the limit is kept
   (`HardenedRequest`, with `_compat.BoundedBody`).

`install_json_errors` turns every error quart would render as HTML into the
protocol's JSON error shape. The hooks into quart-trio's handler and quart's
body these fixes ride on are in `_compat.py` (`QuartTrioHTTPConnection`,
`BoundedBody`).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from inspect import isasyncgen
from typing import Any, Final, cast

import trio
from hypercorn.typing import ASGIReceiveCallable, ASGISendCallable, ASGISendEvent
from quart import Response, current_app, request
from quart.wrappers import Request
from quart_trio import QuartTrio
from quart_trio.wrappers import TrioRequest
from werkzeug.exceptions import HTTPException, MethodNotAllowed
from werkzeug.wrappers import Response as WerkzeugResponse

from commonroom.http._compat import STOCK_HTTP_CONNECTION, BoundedBody, QuartTrioHTTPConnection
from commonroom.protocol.errors import CommonroomError, body_too_large, internal_error

__all__ = [
    "EARLY_REFUSAL",
    "HEADER_CHECK",
    "HardenedHTTPConnection",
    "HardenedRequest",
    "after_send",
    "harden",
    "install_json_errors",
    "streaming_response",
]

log = logging.getLogger("commonroom.http.serving")  # one logger for the serving layer

_HARDENED_MARK: Final = "commonroom.http.hardened"
_AFTER_SEND: Final = "commonroom_after_send"


def after_send(response: Response, callback: Callable[[], None]) -> Response:
    """Run `callback` once `response` has been written (or its sending ended otherwise).

    The room uses it to wake event subscribers only after the caller has its
    answer, and a stream to give back its slot. Callbacks run in the order added.
    """
    callbacks: list[Callable[[], None]] | None = getattr(response, _AFTER_SEND, None)
    if callbacks is None:
        callbacks = []
        setattr(response, _AFTER_SEND, callbacks)
    callbacks.append(callback)
    return response

EARLY_REFUSAL: Final = "commonroom.http.early_refusal"
"""``app.extensions[EARLY_REFUSAL]``: ``f(asgi_scope) -> None | (async () -> CommonroomError)``,
asked for every HTTP request before quart builds it (after a declared-too-large body's
413): a request it refuses is answered that error (which it may take its time to
make: pacing) with ``Connection: close``, without routing it or reading its body. The
ingress's rate gate (`http/guards.Gate.early`)."""

HEADER_CHECK: Final = "commonroom.http.header_check"
"""``app.extensions[HEADER_CHECK]``: ``f(asgi_scope) -> CommonroomError | None``, run
before a declared-too-large body is refused (that refusal skips the app). The scope
gives the headers and the listener's own address (``scope["server"]``)."""



class HardenedRequest(TrioRequest):
    """quart-trio's request with a body bounded while it is received."""

    body_class = BoundedBody


class HardenedHTTPConnection(QuartTrioHTTPConnection):
    """quart-trio's per-request ASGI handler with pitfalls 1, 2 and 6 fixed."""

    def _body_limit(self) -> int | None:
        """The app's body limit, or the one its `BODY_LIMITS` (path -> bytes) grants this path."""
        limit = cast(int | None, self.app.config["MAX_CONTENT_LENGTH"])
        return cast(int | None, self.app.config.get("BODY_LIMITS", {}).get(self.scope["path"], limit))

    def prepare_request(self, request: Request) -> None:
        # The body was built with the app-wide limit: rebuild it with the path's own.
        limit = self._body_limit()
        if limit != self.app.config["MAX_CONTENT_LENGTH"]:
            request.max_content_length = limit
            request.body = request.body_class(request.content_length, limit)

    async def __call__(self, receive: ASGIReceiveCallable, send: ASGISendCallable) -> None:
        limit = self._body_limit()
        if limit is not None:
            declared = _declared_length(self.scope["headers"])
            if declared is not None and declared > limit:
                # The app's own header check (say Host/Origin) still comes
                # first: a refused origin is told 403, not 413.
                check = self.app.extensions.get(HEADER_CHECK)
                refusal = check(self.scope) if check is not None else None
                await self._refuse_body(receive, send, refusal or body_too_large(limit))
                return
        early = self.app.extensions.get(EARLY_REFUSAL)
        if early is not None:
            # A flood of requests its windows refuse costs a header scan each, not a request.
            refused = early(self.scope)
            if refused is not None:
                await self._refuse_body(receive, send, refused)
                return
        await super().__call__(receive, send)

    async def _refuse_body(
        self, receive: ASGIReceiveCallable, send: ASGISendCallable,
        error: CommonroomError | Callable[[], Awaitable[CommonroomError]],
    ) -> None:
        """Answer `error` (or what it makes, when it is ready) without running the app and
        without reading the body."""
        async with trio.open_nursery() as nursery:
            # hypercorn hands the app whatever body bytes already arrived, over
            # a bounded channel; keep taking (and dropping) them so it never blocks.
            nursery.start_soon(_discard_until_disconnect, receive)
            if not isinstance(error, CommonroomError):
                error = await error()
            await self.send_response(send, _error_response(self.app.response_class, error, close=True))
            nursery.cancel_scope.cancel()

    async def respond(self, request: Request, send: ASGISendCallable) -> None:
        async def send_with_a_shielded_end(message: ASGISendEvent) -> None:
            event = cast(Mapping[str, Any], message)
            if event["type"] == "http.response.body" and not event.get("more_body", False):
                # hypercorn sends the app its http.disconnect from inside this
                # call, then recycles or closes the connection: nothing may
                # cancel it half way. The socket write has its own deadline.
                with trio.CancelScope(shield=True):
                    await send(message)
            else:
                await send(message)

        response = await self.app.handle_request(request)
        timeout = _response_timeout(response, self.app.config["RESPONSE_TIMEOUT"])
        try:
            with trio.move_on_after(math.inf if timeout is None else timeout):
                await self.send_response(send_with_a_shielded_end, response)
        finally:
            for callback in getattr(response, _AFTER_SEND, ()):
                callback()


async def _discard_until_disconnect(receive: ASGIReceiveCallable) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _declared_length(headers: Any) -> int | None:
    for name, value in headers:
        if name.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # h11 refuses a malformed Content-Length before we get here
    return None


def _response_timeout(response: Response | WerkzeugResponse, default: Any) -> float | None:
    if isinstance(response, Response):
        if response.timeout is not Ellipsis:
            return cast(float | None, response.timeout)
        if response.mimetype == "text/event-stream":
            return None
    return cast(float | None, default)


def _error_response(
    response_class: type[Response],
    error: CommonroomError,
    *,
    close: bool = False,
    headers: Mapping[str, str] | None = None,
) -> Response:
    response = response_class(
        json.dumps(error.to_wire()),
        status=error.http_status,
        headers=dict(headers or {}),
        content_type="application/json",
    )
    seconds = error.recovery.get("retry_after_seconds")
    if error.http_status == 429 and seconds is not None:
        # As `http/common.error_response` answers it (PROTOCOL §11: the header too).
        response.headers["Retry-After"] = str(seconds)
        response.headers["Cache-Control"] = "no-store"
    if close:
        response.headers["Connection"] = "close"
    return response


_HTTP_MESSAGES: Final[dict[int, str]] = {
    400: "malformed request",
    404: "no such resource",
    405: "method not allowed",
    408: "request body not received in time",
    415: "unsupported content type",
}


async def _on_http_exception(error: HTTPException) -> Response:
    response_class: type[Response] = current_app.response_class
    status = error.code or 500
    if status == 413:
        limit = request.max_content_length  # the route's own limit when it has one
        too_large = (
            body_too_large(limit)
            if limit is not None
            else CommonroomError("limit_exceeded", "request body too large", http_status=413)
        )
        return _error_response(response_class, too_large, close=True)
    if status >= 500:
        log.error("HTTP %s raised in %s %s", status, request.method, request.path, exc_info=error)
        return _error_response(response_class, internal_error())
    headers: dict[str, str] = {}
    if isinstance(error, MethodNotAllowed) and error.valid_methods:
        headers["Allow"] = ", ".join(sorted(error.valid_methods))
    message = _HTTP_MESSAGES.get(status, error.name.lower())
    return _error_response(
        response_class,
        CommonroomError("invalid_request", message, http_status=status),
        headers=headers,
    )


async def _on_commonroom_error(error: CommonroomError) -> Response:
    return _error_response(current_app.response_class, error)


async def _on_unexpected(error: Exception) -> Response:
    # A bug: logged once here with its traceback (quart does not log an
    # exception it hands to a registered handler); the client sees only the code.
    log.error("unhandled error in %s %s", request.method, request.path, exc_info=error)
    return _error_response(current_app.response_class, internal_error())


def install_json_errors(app: QuartTrio) -> None:
    """Answer every error in the protocol's JSON shape, never quart's HTML.

    HTTP errors (404, 405, 400, ...) become ``invalid_request`` with their own
    status; 413 becomes ``limit_exceeded``; a `CommonroomError` that escapes a
    view is sent as is; any other exception is a bug: it is logged with its
    traceback and answered ``internal_error`` with status 500.
    """
    app.register_error_handler(HTTPException, _on_http_exception)
    app.register_error_handler(CommonroomError, _on_commonroom_error)
    app.register_error_handler(Exception, _on_unexpected)


def harden(app: QuartTrio, *, max_body_bytes: int) -> None:
    """Install the app-level fixes on ``app``: connection class, body limit, JSON errors.

    `serve` calls it; calling it again (say with another limit) is harmless.
    An app that brings its own ASGI HTTP class or request class must derive
    them from `HardenedHTTPConnection` and `HardenedRequest`.
    """
    if max_body_bytes <= 0:
        raise ValueError("max_body_bytes must be positive")
    if app.has_static_folder or "static" in app.view_functions:
        # Quart's default static route serves `static/**` of the process's working
        # folder (following symlinks) to anyone: every app is built without it.
        raise ValueError(f"app {app.name!r} has a static route: create it with static_folder=None")
    app.config["MAX_CONTENT_LENGTH"] = max_body_bytes
    if not issubclass(app.asgi_http_class, HardenedHTTPConnection):
        if app.asgi_http_class is not STOCK_HTTP_CONNECTION:
            raise TypeError("the app's asgi_http_class must derive from HardenedHTTPConnection")
        app.asgi_http_class = HardenedHTTPConnection
    if not issubclass(app.request_class, HardenedRequest):
        if app.request_class is not TrioRequest:
            raise TypeError("the app's request_class must derive from HardenedRequest")
        app.request_class = HardenedRequest
    if not app.extensions.get(_HARDENED_MARK):
        install_json_errors(app)
        app.extensions[_HARDENED_MARK] = True


def streaming_response(
    body: AsyncIterator[bytes],
    *,
    headers: Mapping[str, str],
    status: int = 200,
    content_type: str = "text/event-stream",
) -> Response:
    """A response streaming ``body`` for as long as it yields: no `RESPONSE_TIMEOUT`.

    ``headers`` may override ``content_type``. The body is closed (``aclose``)
    when the client goes away or the server shuts down. The server cancels
    open streams ``graceful_timeout`` seconds after the shutdown trigger; end
    your streams yourself when your own shutdown starts to not wait for that.
    """
    response = Response(_as_async_generator(body), status=status, content_type=content_type)
    response.headers.update(dict(headers))
    response.timeout = None
    return response


def _as_async_generator(body: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
    # quart-trio iterates anything that is not an async generator synchronously.
    if isasyncgen(body):
        return cast(AsyncGenerator[bytes, None], body)
    return _relay(body)


async def _relay(body: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
    try:
        async for chunk in body:
            yield chunk
    finally:
        aclose = getattr(body, "aclose", None)
        if aclose is not None:
            await aclose()
