"""The owner listener: the host's page and the host API, on 127.0.0.1 only.

The room prints a one-time URL (`/?token=...`). Opening it sets an HttpOnly,
SameSite=Strict cookie and redirects to the page; the token is then spent.
The host API mirrors the ingress operations under `/owner/api/` and runs them
with the room's host session; every state-changing call also needs the CSRF
header (`X-Commonroom-CSRF`) whose value only the served page knows. `/mcp`
here is 404: MCP lives on the session ingress only.
"""

from __future__ import annotations

import hmac
import html
import json
import secrets
from typing import Any

import attrs
from quart import Response, redirect, request
from quart_trio import QuartTrio

from commonroom.engine.operations import CALLS
from commonroom.http.common import error_response, operation_view
from commonroom.http.ingress import origin_allowed
from commonroom.protocol.errors import CommonroomError
from commonroom.room.core import Room

COOKIE = "commonroom_owner"
CSRF_HEADER = "X-Commonroom-CSRF"


@attrs.define
class OwnerAuth:
    """One-time login token, cookie secrets and the CSRF token, all in memory."""

    host_session: str
    login_token: str = attrs.field(factory=lambda: secrets.token_urlsafe(24))
    csrf_token: str = attrs.field(factory=lambda: secrets.token_urlsafe(24))
    cookies: set[str] = attrs.field(factory=set)

    def redeem(self, token: str) -> str | None:
        if not self.login_token or not hmac.compare_digest(token, self.login_token):
            return None
        self.login_token = ""  # one time
        cookie = secrets.token_urlsafe(32)
        self.cookies.add(cookie)
        return cookie

    def cookie_ok(self, value: str | None) -> bool:
        return value is not None and any(hmac.compare_digest(value, c) for c in self.cookies)

    def csrf_ok(self, value: str | None) -> bool:
        return value is not None and hmac.compare_digest(value, self.csrf_token)


def create_owner_app(room: Room, auth: OwnerAuth) -> QuartTrio:
    app = QuartTrio("commonroom.owner")

    def owner_host_ok() -> bool:
        host = request.headers.get("Host", "")
        name, _, port = host.partition(":")
        return name in ("127.0.0.1", "localhost") and (port == "" or port.isdigit())

    @app.before_request
    async def guard() -> Response | None:
        if not owner_host_ok():
            return error_response(CommonroomError("permission_denied", "Host not allowed"))
        if not origin_allowed(request.headers.get("Origin")):
            return error_response(CommonroomError("permission_denied", "Origin not allowed"))
        if request.path == "/" and "token" in request.args:
            return None  # the login itself
        if not auth.cookie_ok(request.cookies.get(COOKIE)):
            return error_response(CommonroomError(
                "unauthorized", "open the one-time URL the room printed to use this page"
            ))
        if request.method not in ("GET", "HEAD") and not auth.csrf_ok(
            request.headers.get(CSRF_HEADER)
        ):
            return error_response(CommonroomError(
                "permission_denied", f"state-changing requests need the {CSRF_HEADER} header"
            ))
        return None

    @app.get("/")
    async def page() -> Any:
        token = request.args.get("token")
        if token is not None:
            cookie = auth.redeem(token)
            if cookie is None:
                return error_response(CommonroomError(
                    "unauthorized", "this one-time URL was already used; restart the room for a new one"
                ))
            response = redirect("/", 303)
            response.set_cookie(COOKIE, cookie, httponly=True, samesite="Strict", path="/")
            return response
        status = await room.call("workspace.room", auth.host_session, {})
        return Response(_render(status, auth.csrf_token), content_type="text/html; charset=utf-8")

    async def host_bearer() -> str | None:
        return auth.host_session

    for op in CALLS:
        if op.capability is None:
            continue  # joining is for guests, on the ingress
        app.add_url_rule(
            "/owner/api" + op.path, endpoint=op.name,
            view_func=operation_view(op, room, host_bearer), methods=[op.method],
        )
    return app


def _render(snapshot: dict[str, Any], csrf: str) -> str:
    status = snapshot["status"]
    people = "".join(
        f"<li>{html.escape(p['name'])} ({html.escape(p['kind'])})"
        f"{' — present' if p['present'] else ''}</li>"
        for p in snapshot["participants"]
    )
    leases = "".join(
        f"<li>{html.escape(x['region'])} — until {html.escape(x['expires_at'])}</li>"
        for x in snapshot["leases"]
    ) or "<li>none</li>"
    proposals = "".join(
        f"<li data-proposal='{html.escape(p['proposal_id'])}'>{html.escape(p['summary'])}"
        f" on <code>{html.escape(p['region'])}</code> ({html.escape(p['status'])})</li>"
        for p in snapshot["proposals"]
    ) or "<li>none</li>"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="commonroom-csrf" content="{html.escape(csrf)}">
<title>{html.escape(status['name'])} — commonroom</title>
<style>body{{font:15px/1.5 system-ui,sans-serif;max-width:50rem;margin:2rem auto;padding:0 1rem}}
code{{background:#f3f3f3;padding:0 .2em}}</style></head>
<body><h1>{html.escape(status['name'])}</h1>
<p>Version <strong>{status['version']}</strong> · {status['participants']} participants ·
{status['active_leases']} leases · {status['pending_proposals']} pending proposals ·
room <code>{html.escape(status['workspace_id'])}</code> ({html.escape(status['lifecycle'])})</p>
<h2>Participants</h2><ul>{people}</ul>
<h2>Leases</h2><ul>{leases}</ul>
<h2>Open proposals</h2><ul>{proposals}</ul>
<p>Review from a terminal with <code>ce proposals FILE</code> and
<code>ce review FILE PROPOSAL_ID --approve</code>.</p>
<script type="application/json" id="latest">{json.dumps(snapshot['latest_event_id'])}</script>
</body></html>"""
