"""The owner listener: the host's page and the host API, on 127.0.0.1 only.

The room prints a one-time URL (`/?token=...`). Opening it sets an HttpOnly,
SameSite=Strict cookie and redirects to the page; the token is then spent. A
spent or unknown link, or the page without the cookie, is answered with a
small HTML page that says how to get a new link (`ce open FILE`).

Routes:
- `/` the page (src/commonroom/gui/static/index.html with the CSRF token in
  `<meta name="commonroom-csrf">`); `/static/<file>` its scripts and styles
  (no secrets in them, so no cookie needed: the login pages use the styles).
- `/owner/api/<operation path>` mirrors the ingress operations and runs them
  with the room's host session; every state-changing call also needs the CSRF
  header (`X-Commonroom-CSRF`) whose value only the served page knows.
- `/owner/api/workspace/observe` the event stream as server-sent events, the
  same stream the ingress serves, run with the host session (a thin adapter:
  the page opens one EventSource on it).
- `POST /owner/login-link` mints a fresh one-time URL; authenticated by the
  host bearer (`Authorization: Bearer`, from the 0600 credential file), for
  `ce open FILE`. It exists on this listener only, never on the ingress.

Every answer carries a strict Content-Security-Policy (scripts and styles from
this origin only, no inline script, no remote images): a second wall behind the
page's rule of never turning a string into HTML. `/mcp` here is 404: MCP lives
on the session ingress only.
"""

from __future__ import annotations

import hmac
import html
import secrets
from collections import OrderedDict
from collections.abc import Iterable
from importlib import resources
from typing import Any, Final

import attrs
from quart import Response, redirect, request
from quart_trio import QuartTrio

from commonroom.engine.operations import CALLS
from commonroom.http import stream_views
from commonroom.http.common import bearer_from_header, error_response, json_response, operation_view
from commonroom.http.guards import host_and_origin, origin_allowed
from commonroom.http.hardened_app import HEADER_CHECK
from commonroom.protocol.errors import CommonroomError
from commonroom.room.core import Room

COOKIE = "commonroom_owner"
CSRF_HEADER = "X-Commonroom-CSRF"
LOGIN_LINK_PATH = "/owner/login-link"
# Unspent one-time links kept at once (`ce open` run many times); the oldest is dropped.
MAX_PENDING_LOGINS: Final = 8
CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
    " connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none';"
    " frame-ancestors 'none'"
)
_STATIC_TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}


@attrs.define
class OwnerAuth:
    """One-time login tokens, cookie secrets and the CSRF token, all in memory."""

    host_session: str
    login_token: str = attrs.field(factory=lambda: secrets.token_urlsafe(24))
    csrf_token: str = attrs.field(factory=lambda: secrets.token_urlsafe(24))
    cookies: set[str] = attrs.field(factory=set)
    pending: OrderedDict[str, None] = attrs.field(factory=OrderedDict)

    def __attrs_post_init__(self) -> None:
        self.pending[self.login_token] = None

    def mint_login(self) -> str:
        """A fresh one-time token (`ce open`); older unspent ones stay valid, up to a few."""
        token = secrets.token_urlsafe(24)
        self.pending[token] = None
        while len(self.pending) > MAX_PENDING_LOGINS:
            self.pending.popitem(last=False)
        return token

    def redeem(self, token: str) -> str | None:
        match = next((t for t in self.pending if hmac.compare_digest(token, t)), None)
        if match is None:
            return None
        del self.pending[match]  # one time
        if match == self.login_token:
            self.login_token = ""
        cookie = secrets.token_urlsafe(32)
        self.cookies.add(cookie)
        return cookie

    def cookie_ok(self, value: str | None) -> bool:
        return value is not None and any(hmac.compare_digest(value, c) for c in self.cookies)

    def csrf_ok(self, value: str | None) -> bool:
        return value is not None and hmac.compare_digest(value, self.csrf_token)

    def host_bearer_ok(self, value: str | None) -> bool:
        return value is not None and hmac.compare_digest(value, self.host_session)


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


def _login_page(title: str, text: str, status: int, file_name: str) -> Response:
    """A small HTML page for the browser (a spent link, no cookie): what to do next."""
    body = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)} — commonroom</title>
<link rel="stylesheet" href="/static/app.css"></head>
<body class="login"><main class="login-box">
<h1>{html.escape(title)}</h1>
<p>{html.escape(text)}</p>
<p>Get a fresh one-time link for the running room:</p>
<pre><code>ce open {html.escape(file_name)}</code></pre>
<p class="muted">Run it in the folder of {html.escape(file_name)}, the file the room is open around.
The link works once; after that this browser keeps its login until the room stops.</p>
</main></body></html>"""
    return Response(body, status=status, content_type="text/html; charset=utf-8")


def create_owner_app(room: Room, auth: OwnerAuth, *, heartbeat_seconds: float = 15.0) -> QuartTrio:
    app = QuartTrio("commonroom.owner", static_folder=None)  # our /static/ serves gui/static

    def owner_host_ok(host: str | None = None) -> bool:
        host = request.headers.get("Host", "") if host is None else host
        name, _, port = host.partition(":")
        return name in ("127.0.0.1", "localhost") and (port == "" or port.isdigit())

    def header_check(headers: Iterable[tuple[bytes, bytes]]) -> CommonroomError | None:
        """Host and Origin also before a too-large body is refused: 403 beats 413."""
        host, origin = host_and_origin(headers)
        if not owner_host_ok(host or ""):
            return CommonroomError("permission_denied", "Host not allowed")
        if not origin_allowed(origin):
            return CommonroomError("permission_denied", "Origin not allowed")
        return None

    app.extensions[HEADER_CHECK] = header_check

    @app.before_request
    async def guard() -> Response | None:
        if not owner_host_ok():
            return error_response(CommonroomError("permission_denied", "Host not allowed"))
        if not origin_allowed(request.headers.get("Origin")):
            return error_response(CommonroomError("permission_denied", "Origin not allowed"))
        if request.path == "/" or request.path.startswith("/static/"):
            return None  # the page decides (login, login help); static files hold no secrets
        if request.path == LOGIN_LINK_PATH:
            try:
                ok = auth.host_bearer_ok(bearer_from_header())
            except CommonroomError as error:
                return error_response(error)
            if not ok:
                return error_response(CommonroomError("unauthorized", "needs the host bearer"))
            return None
        if not auth.cookie_ok(request.cookies.get(COOKIE)):
            return error_response(CommonroomError(
                "unauthorized", "open a one-time owner link (`ce open FILE` prints one) to use this page"
            ))
        if request.method not in ("GET", "HEAD") and not auth.csrf_ok(
            request.headers.get(CSRF_HEADER)
        ):
            return error_response(CommonroomError(
                "permission_denied", f"state-changing requests need the {CSRF_HEADER} header"
            ))
        return None

    @app.after_request
    async def harden(response: Response) -> Response:
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["X-Frame-Options"] = "DENY"
        return response

    @app.get("/")
    async def page() -> Any:
        token = request.args.get("token")
        if token is not None:
            cookie = auth.redeem(token)
            if cookie is None:
                return _login_page(
                    "This link was already used",
                    "Each owner link opens the page once, so that a copied or logged URL is"
                    " worth nothing.", 401, room.engine.path.name,
                )
            login = redirect("/", 303)
            login.set_cookie(COOKIE, cookie, httponly=True, samesite="Strict", path="/")
            return login
        if not auth.cookie_ok(request.cookies.get(COOKIE)):
            return _login_page(
                "Open your owner link", "This browser is not logged in to the room (or the room"
                " restarted since).", 401, room.engine.path.name,
            )
        template = _static_file("index.html")
        assert template is not None, "the packaged page is missing"
        body = template.decode().replace("{{CSRF}}", html.escape(auth.csrf_token))
        response = Response(body, content_type="text/html; charset=utf-8")
        response.headers["Cache-Control"] = "no-store"
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

    @app.post(LOGIN_LINK_PATH)
    async def login_link() -> Response:
        token = auth.mint_login()
        port = request.host.partition(":")[2]
        return json_response({"url": f"http://127.0.0.1:{port}/?token={token}"})

    async def host_bearer() -> str | None:
        return auth.host_session

    for op in CALLS:
        if op.capability is None:
            continue  # joining is for guests, on the ingress
        app.add_url_rule(
            "/owner/api" + op.path, endpoint=op.name,
            view_func=operation_view(op, room, host_bearer), methods=[op.method],
        )

    @app.get("/owner/api/workspace/observe")
    async def observe() -> Response:
        """The observe stream with the host session (the page's live view)."""
        try:
            start = await stream_views.open_start(
                room, "workspace.observe", auth.host_session, stream_views.observe_params()
            )
        except CommonroomError as error:
            return error_response(error)
        return stream_views.sse_response(room, start, heartbeat_seconds=heartbeat_seconds)

    return app


def _not_found() -> Response:
    error = CommonroomError("invalid_request", "no such file")
    return json_response(error.to_wire(), 404)
