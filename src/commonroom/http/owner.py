"""The owner listener: the host's page and the host API, on 127.0.0.1 only.

Who may act as the owner (docs/protocol.md "Owner page login").
A browser sends a cookie for 127.0.0.1 to *every* port of 127.0.0.1, so a
link an agent put in a proposal (`http://127.0.0.1:<its port>/`) once carried
the owner's cookie to the agent. Nothing here is a cookie:

- The room prints a one-time link `http://127.0.0.1:PORT/#token=T`. The token
  is in the fragment, which a browser never sends to any server (nor in a
  Referer). An unspent link expires after 10 minutes; at most 8 wait at once.
- `GET /` is the page, to anyone: it holds no secret (only the file's name).
  Its script takes the token from the fragment, clears the address bar and
  exchanges the token once: `POST /owner/login {"token"}` -> `{"credential",
  "expires_at"}`.
- The page keeps the credential in `sessionStorage` (per origin, port
  included, so no page on another port can read it) and sends it as
  `X-Commonroom-Owner` on every owner call. A custom header is also the
  CSRF defence: another origin cannot send it (it would need a CORS
  preflight, which this listener never grants).
- An `EventSource` cannot send headers: `POST /owner/stream-ticket` gives a
  single-use ticket good for 30 s, spent by
  `GET /owner/api/workspace/observe?ticket=...`. Other clients may send the
  header on the observe stream instead.
- A login is valid for 12 h from its last use. Its sha256 is kept in the
  sidecar (`engine/owner_logins.py`; refreshed at most every 5 minutes of
  use), so after a restart on the same port an open tab carries on by itself.
  `POST /owner/logout-all` (the host bearer; `ce open FILE --logout-all`)
  ends every login, its tickets and its open streams.
- `Origin`, when sent, must be this listener's own origin,
  `http://127.0.0.1:<this port>` (a page on another port or on `localhost`
  is another origin).

Routes besides those: `/static/<file>` the page's scripts and styles (no
secret, no login); `/owner/api/<operation path>` every authenticated
operation of the table, run with the room's host session;
`POST /owner/login-link` mints a fresh one-time link for `ce open FILE`
(host bearer, from the 0600 credential file). None of them exist on the
ingress. Task apps' requests (docs/spec/PROTOCOL.md 20, `room/app_hosts.py`): a page that
runs apps opens one `GET /owner/app-host?ticket=...` event stream (its first
event names its `host_id`; then one `app_request` event per request), says
which tasks' apps it runs with `POST /owner/app-host/apps` and answers with
`POST /owner/app-host/reply`; the stream's end ends its hosting.

Every answer carries a strict Content-Security-Policy (scripts and styles from
this origin only, no remote images): a second wall behind the page's rule of
never turning a string into HTML. The page itself adds one nonce, new for each
answer of `GET /`, which the page's own code reads from a meta tag: a task
app's `<iframe srcdoc>` inherits this policy (Chromium, per CSP 3), so its one
inline style and scripts carry the nonce; its own meta policy then allows no
network, and this policy's `frame-src` (through `default-src 'none'`) refuses
the frame any navigation (a srcdoc frame loads without a fetch, so it is not
refused). `/mcp` here is 404.
"""

from __future__ import annotations

import hmac
import html
import json
import secrets
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from importlib import resources
from typing import Any, Final

import trio
from quart import Response, g, request
from quart_trio import QuartTrio

from commonroom import discovery
from commonroom.engine.facade import end_owner_logins, hash_secret, save_owner_login
from commonroom.http import framing, stream_views
from commonroom.http.common import (
    bearer_from_header,
    error_response,
    json_response,
    operation_view,
    parse_json_object,
    stream_view,
)
from commonroom.http.guards import OWNER_HEADERS, own_origin
from commonroom.http.hardened_app import HEADER_CHECK, after_send, streaming_response
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.operations import CALLS, OPERATIONS_BY_NAME, STREAMS
from commonroom.protocol.timefmt import Clock, format_ts
from commonroom.room.core import Room

OWNER_HEADER: Final = "X-Commonroom-Owner"
LOGIN_PATH: Final = "/owner/login"
TICKET_PATH: Final = "/owner/stream-ticket"
PROTOCOL_PATH: Final = "/owner/api/protocol"
LOGIN_LINK_PATH: Final = "/owner/login-link"
LOGOUT_ALL_PATH: Final = "/owner/logout-all"
OBSERVE_PATH: Final = "/owner/api" + OPERATIONS_BY_NAME["workspace.observe"].path
APP_HOST_PATH: Final = "/owner/app-host"
APP_HOST_APPS_PATH: Final = "/owner/app-host/apps"
APP_HOST_REPLY_PATH: Final = "/owner/app-host/reply"
TICKET_STREAM_PATHS: Final = frozenset(
    "/owner/api" + op.path for op in STREAMS if op.framing == "sse"
)
"""The streams an EventSource opens, so a ticket stands in for the header there."""
LINK_LIFETIME: Final = timedelta(minutes=10)  # a one-time link is short-lived: it passes through argv and terminals
LOGIN_LIFETIME: Final = timedelta(hours=12)  # from the last use (the page stays logged in while used)
SAVE_EVERY: Final = timedelta(minutes=5)  # a login in use is written back at most this often
TICKET_LIFETIME: Final = timedelta(seconds=30)
MAX_PENDING_LINKS: Final = 8  # unspent one-time links at once (`ce open` run many times)
MAX_TICKETS: Final = 64  # unspent stream tickets at once, all logins together
CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
    " connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none';"
    " frame-ancestors 'none'"
)
# The page's answer: the same, and its task apps' inline code by the answer's nonce.
PAGE_CSP: Final = CSP.replace("script-src 'self';", "script-src 'self' 'nonce-{nonce}';").replace(
    "style-src 'self';", "style-src 'self' 'nonce-{nonce}';")
FAVICON_PATH: Final = "/favicon.ico"
_STATIC_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}

StopStream = Callable[[], None]


class OwnerAuth:
    """The owner's one-time links, page logins, stream tickets and their open streams.

    Every secret is looked up by its sha256 (a dict lookup, like sessions), so
    a presented value cannot leak through comparison timing, and only hashes
    are kept. Logins are written to the sidecar through `room` (None: in
    memory only, for tests of this class alone).
    """

    def __init__(self, host_session: str, *, clock: Clock, room: Room | None = None) -> None:
        self.host_session = host_session
        self.clock = clock
        self.room = room
        self._links: OrderedDict[bytes, datetime] = OrderedDict()  # link hash -> expires
        self._logins: dict[bytes, datetime] = {}  # credential hash -> expires
        self._saved: dict[bytes, datetime] = {}  # the expiry last written to the sidecar
        self._tickets: OrderedDict[bytes, tuple[datetime, bytes]] = OrderedDict()
        self._streams: dict[bytes, set[StopStream]] = {}
        self.login_token = self.mint_login()  # the link `ce serve` prints

    def restore(self, logins: Mapping[bytes, datetime]) -> None:
        """The logins the sidecar kept (a restart): each valid until its stored expiry."""
        self._logins.update(logins)
        self._saved.update(logins)

    # -- one-time links ------------------------------------------------------------

    def mint_login(self) -> str:
        """A fresh one-time link token; older unspent ones stay valid, up to a few."""
        token = secrets.token_urlsafe(24)
        self._links[hash_secret(token)] = self.clock() + LINK_LIFETIME
        while len(self._links) > MAX_PENDING_LINKS:
            self._links.popitem(last=False)
        return token

    async def redeem(self, token: str) -> tuple[str, datetime] | None:
        """Spend a link token: a new page credential and its expiry, or None."""
        now = self.clock()
        expires = self._links.pop(_hash(token), None)
        if expires is None or expires <= now:
            return None
        credential = "own_" + secrets.token_urlsafe(32)
        key = hash_secret(credential)
        self._logins[key] = now + LOGIN_LIFETIME
        await self._save(key)
        return credential, self._logins[key]

    # -- page logins ---------------------------------------------------------------

    async def authenticate(self, credential: str | None) -> bytes | None:
        """The login a credential names, refreshed for 12 h more; None when not valid."""
        if not credential:
            return None
        key = _hash(credential)
        now = self.clock()
        expires = self._logins.get(key)
        if expires is None or expires <= now:
            self._logins.pop(key, None)
            return None
        self._logins[key] = now + LOGIN_LIFETIME
        saved = self._saved.get(key)
        if saved is None or self._logins[key] - saved >= SAVE_EVERY:
            await self._save(key)
        return key

    async def end_all(self) -> int:
        """End every login, its unspent tickets and its open streams; how many were valid."""
        now = self.clock()
        valid = sum(1 for expires in self._logins.values() if expires > now)
        self._logins.clear()
        self._saved.clear()
        self._tickets.clear()
        streams, self._streams = self._streams, {}
        for stops in streams.values():
            for stop in tuple(stops):
                stop()
        if self.room is not None:
            stored = await self.room.run_sync(end_owner_logins, self.room.engine)
            valid = max(valid, stored)
        return valid

    async def _save(self, key: bytes) -> None:
        expires = self._logins[key]
        if self.room is not None:
            await self.room.run_sync(save_owner_login, self.room.engine, key, expires)
        self._saved[key] = expires

    # -- stream tickets ------------------------------------------------------------

    def mint_ticket(self, login: bytes) -> str:
        """A single-use ticket for one EventSource of `login`, good for 30 s."""
        now = self.clock()
        while self._tickets and next(iter(self._tickets.values()))[0] <= now:
            self._tickets.popitem(last=False)
        ticket = secrets.token_urlsafe(24)
        self._tickets[hash_secret(ticket)] = (now + TICKET_LIFETIME, login)
        while len(self._tickets) > MAX_TICKETS:
            self._tickets.popitem(last=False)
        return ticket

    def redeem_ticket(self, ticket: str) -> bytes | None:
        """Spend a ticket: its login while that login is still valid, else None."""
        found = self._tickets.pop(_hash(ticket), None)
        now = self.clock()
        if found is None or found[0] <= now:
            return None
        login = found[1]
        expires = self._logins.get(login)
        return login if expires is not None and expires > now else None

    def track_stream(self, login: bytes, stop: StopStream) -> StopStream:
        """Remember an open stream of `login` (ended with its login); returns its untracker."""
        self._streams.setdefault(login, set()).add(stop)

        def untrack() -> None:
            stops = self._streams.get(login)
            if stops is not None:
                stops.discard(stop)
                if not stops:
                    del self._streams[login]

        return untrack

    # -- the host bearer -----------------------------------------------------------

    def host_bearer_ok(self, value: str | None) -> bool:
        return value is not None and hmac.compare_digest(value, self.host_session)


def _hash(secret: str) -> bytes:
    """sha256 of a presented secret (b"" for one with a lone surrogate: never minted)."""
    try:
        return hash_secret(secret)
    except UnicodeEncodeError:
        return b""


def _static_file(name: str) -> bytes | None:
    """A file of the packaged page, or None; never a path outside gui/static."""
    parts = name.split("/")
    if not name or any(part in ("", ".", "..") or part.startswith(".") for part in parts):
        return None
    node = resources.files("commonroom.gui").joinpath("static")
    for part in parts:
        node = node.joinpath(part)
    try:
        return node.read_bytes() if node.is_file() else None
    except OSError:
        return None


def owner_link(port: int, token: str) -> str:
    """The one-time link: the token in the fragment, which no browser sends to a server."""
    return f"http://127.0.0.1:{port}/#token={token}"  # the same shape `POST /owner/login-link` answers


def _not_logged_in() -> CommonroomError:
    return CommonroomError(
        "unauthorized", f"the owner API needs the page's {OWNER_HEADER} login; open a one-time"
        " link (`ce open FILE` prints one)")


def create_owner_app(room: Room, auth: OwnerAuth, *, heartbeat_seconds: float = 15.0) -> QuartTrio:
    app = QuartTrio("commonroom.owner", static_folder=None)  # our /static/ serves gui/static
    host_bearer_paths = (LOGIN_LINK_PATH, LOGOUT_ALL_PATH)

    app.extensions[HEADER_CHECK] = OWNER_HEADERS  # also before a too-large body is refused

    @app.before_request
    async def guard() -> Response | None:
        refusal = OWNER_HEADERS(request.scope)
        if refusal is not None:
            return error_response(refusal)
        path = request.path
        if path in ("/", FAVICON_PATH) or path.startswith("/static/") or path == LOGIN_PATH:
            return None  # the page, its files and the link exchange hold no owner authority
        if path in host_bearer_paths:
            try:
                ok = auth.host_bearer_ok(bearer_from_header())
            except CommonroomError as error:
                return error_response(error)
            return None if ok else error_response(
                CommonroomError("unauthorized", "needs the host bearer"))
        if (path in TICKET_STREAM_PATHS or path == APP_HOST_PATH) and "ticket" in request.args:
            g.owner_login = auth.redeem_ticket(request.args["ticket"])
        else:
            g.owner_login = await auth.authenticate(request.headers.get(OWNER_HEADER))
        if g.owner_login is None:
            return error_response(_not_logged_in())
        return None

    @app.after_request
    async def harden(response: Response) -> Response:
        nonce = g.get("frame_nonce")
        response.headers["Content-Security-Policy"] = (
            CSP if nonce is None else PAGE_CSP.format(nonce=nonce))
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["X-Frame-Options"] = "DENY"
        return response

    @app.get("/")
    async def page() -> Response:
        template = _static_file("index.html")
        assert template is not None, "the packaged page is missing"
        g.frame_nonce = secrets.token_urlsafe(18)
        body = template.decode().replace("{{FILE}}", html.escape(room.engine.path.name)).replace(
            "{{NONCE}}", g.frame_nonce)
        response = Response(body, content_type="text/html; charset=utf-8")
        response.headers["Cache-Control"] = "no-store"
        return response

    @app.get(FAVICON_PATH)
    async def favicon() -> Response:
        # Browsers ask for it on every load; the page also names it (index.html).
        data = _static_file("favicon.svg")
        assert data is not None, "the packaged page is missing its icon"
        response = Response(data, content_type=_STATIC_TYPES[".svg"])
        response.headers["Cache-Control"] = "max-age=86400"
        return response

    @app.get("/static/<path:name>")
    async def static_file(name: str) -> Response:
        data = _static_file(name)
        suffix = "." + name.rsplit(".", 1)[-1] if "." in name else ""
        if data is None or suffix not in _STATIC_TYPES or name == "index.html":
            return _not_found()
        response = Response(data, content_type=_STATIC_TYPES[suffix])
        response.headers["Cache-Control"] = "no-cache"
        return response

    @app.post(LOGIN_PATH)
    async def login() -> Response:
        raw = await request.get_data(cache=False, as_text=False)
        try:
            body = parse_json_object(raw if isinstance(raw, bytes) and raw.strip() else b"{}")
        except CommonroomError as error:
            return error_response(error)
        token = body.get("token")
        if not isinstance(token, str) or not token:
            return error_response(CommonroomError(
                "invalid_request", "the body must be {\"token\": <the link's token>}", {"field": "token"}))
        redeemed = await auth.redeem(token)
        if redeemed is None:
            return error_response(CommonroomError(
                "unauthorized", "this one-time link was already used or has expired (a link lasts"
                f" {int(LINK_LIFETIME.total_seconds() // 60)} minutes); run `ce open"
                f" {room.engine.path.name}` for a new one", {"reason": "login_link"}))
        credential, expires = redeemed
        return json_response({"credential": credential, "expires_at": format_ts(expires)})

    @app.post(TICKET_PATH)
    async def stream_ticket() -> Response:
        return json_response({"ticket": auth.mint_ticket(g.owner_login),
                              "expires_in_seconds": int(TICKET_LIFETIME.total_seconds())})

    @app.post(LOGIN_LINK_PATH)
    async def login_link() -> Response:
        return json_response({"url": f"{own_origin(request.scope)}/#token={auth.mint_login()}"})

    @app.post(LOGOUT_ALL_PATH)
    async def logout_all() -> Response:
        return json_response({"ended": await auth.end_all()})

    @app.get(PROTOCOL_PATH)
    async def protocol_doc() -> Response:
        """The protocol document for the page: its event and status vocabularies come from here."""
        return json_response(discovery.protocol_document())

    async def host_bearer() -> str | None:
        return auth.host_session

    for op in CALLS:
        if op.capability is None:
            continue  # joining is for guests, on the ingress
        app.add_url_rule(
            "/owner/api" + op.path, endpoint=op.name,
            view_func=operation_view(op, room, host_bearer), methods=[op.method],
        )

    async def sse(name: str) -> Response:
        """An event stream with the host session (the page's live view), ended with its login."""
        params = stream_views.observe_params()
        params.pop("ticket", None)
        stops: list[StopStream] = []
        try:
            start = await stream_views.open_start(room, name, auth.host_session, params)
            response = stream_views.sse_response(
                room, start, heartbeat_seconds=heartbeat_seconds, on_stop=stops.append)
        except CommonroomError as error:
            return error_response(error)
        return after_send(response, auth.track_stream(g.owner_login, stops[0]))

    async def long_poll(name: str) -> Response:
        try:
            params = dict(request.args.items())
            start = await stream_views.open_start(room, name, auth.host_session, params)
            again = stream_views.reopener(room, name, auth.host_session, params)
            return await stream_views.wait_response(room, start, again)
        except CommonroomError as error:
            return error_response(error)

    # The table's streams, mirrored like the calls; the page has no WebSocket (it uses SSE).
    framings: dict[str, Callable[[str], Awaitable[Response]]] = {"sse": sse, "long_poll": long_poll}
    for op in STREAMS:
        if op.framing in framings:
            app.add_url_rule(
                "/owner/api" + op.path, endpoint=op.name,
                view_func=stream_view(framings[op.framing], op.name), methods=[op.method],
            )

    _app_host_routes(app, room, auth, heartbeat_seconds)
    return app


def _app_host_routes(app: QuartTrio, room: Room, auth: OwnerAuth, heartbeat_seconds: float) -> None:
    """The page's line for task apps' requests (see the module docstring)."""
    hosts = room.app_hosts

    @app.get(APP_HOST_PATH)
    async def app_host() -> Response:
        line = hosts.open()
        untrack = auth.track_stream(g.owner_login, lambda: hosts.close(line.host_id))

        async def body() -> AsyncGenerator[bytes, None]:
            try:
                yield framing.SSE_PREAMBLE
                yield _sse("host", {"host_id": line.host_id})
                while True:
                    with trio.move_on_after(heartbeat_seconds) as idle:
                        item = await line.receive.receive()
                    if idle.cancelled_caught:
                        yield b": heartbeat\n\n"
                    else:
                        yield _sse("app_request", item.wire())
            except trio.EndOfChannel:
                return
            finally:
                hosts.close(line.host_id)

        def ended() -> None:
            hosts.close(line.host_id)
            untrack()

        return after_send(streaming_response(body(), headers=stream_views.SSE_HEADERS), ended)

    @app.post(APP_HOST_APPS_PATH)
    async def app_host_apps() -> Response:
        try:
            body = await _json_body()
            host_id, task_ids = body.get("host_id"), body.get("task_ids")
            if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
                raise CommonroomError("invalid_request", "task_ids must be a list of task ids",
                                      {"field": "task_ids"})
            hosting = hosts.host(_host_id(host_id), task_ids[:256])
        except CommonroomError as error:
            return error_response(error)
        return json_response({"host_id": host_id, "hosting": hosting})

    @app.post(APP_HOST_REPLY_PATH)
    async def app_host_reply() -> Response:
        try:
            body = await _json_body()
            request_id, error = body.get("request_id"), body.get("error")
            if not isinstance(request_id, str):
                raise CommonroomError("invalid_request", "request_id must be a string",
                                      {"field": "request_id"})
            if error is not None and not isinstance(error, str):
                raise CommonroomError("invalid_request", "error must be a string",
                                      {"field": "error"})
            hosts.answer(_host_id(body.get("host_id")), request_id, body.get("reply"), error)
        except CommonroomError as error_:
            return error_response(error_)
        return json_response({"answered": True})


def _sse(event: str, data: object) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _host_id(value: object) -> str:
    if not isinstance(value, str):
        raise CommonroomError("invalid_request", "host_id must be a string", {"field": "host_id"})
    return value


async def _json_body() -> dict[str, Any]:
    raw = await request.get_data(cache=False, as_text=False)
    return parse_json_object(raw if isinstance(raw, bytes) and raw.strip() else b"{}")


def _not_found() -> Response:
    error = CommonroomError("invalid_request", "no such file")
    return json_response(error.to_wire(), 404)
