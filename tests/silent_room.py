"""A fake room on 127.0.0.1 that answers an event stream, then goes silent without closing.

That is what a half-open connection looks like from the client: the TCP
connection stays up and nothing more arrives (a laptop that slept, a NAT
that forgot the flow). Each accepted connection gets the next script of
`events_per_connection` (head, one `retry:` line, its events), then silence;
the test reads `requests` to see what each reconnection asked for.

Threads and plain sockets, so a blocking client or a real `ce` process can
be pointed at it; everything it starts is stopped by `close()`.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from typing import Any

from commonroom.protocol.invitation import Invitation, TransportHint, encode

HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n")


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def started_event(event_id: int) -> bytes:
    """One SSE frame of a real event type (`workspace.started`), as the room writes it."""
    data = json.dumps({"event_id": event_id, "type": "workspace.started",
                       "created_at": "2026-01-01T00:00:00.000000+00:00", "payload": {"version": 1}})
    return f"id: {event_id}\nevent: workspace.started\ndata: {data}\n\n".encode()


def invitation_for(port: int) -> str:
    return encode(Invitation(
        capabilities=("read", "observe"), expires_at="2099-01-01T00:00:00.000000+00:00",
        secret="s" * 32, transport=TransportHint("loopback", False, "private", "127.0.0.1", port),
        version="1", workspace_id="ws_silent", protocol="commonroom"))


class SilentRoom:
    def __init__(self, events_per_connection: list[list[int]], *, retry_ms: int = 50) -> None:
        self.scripts = list(events_per_connection)
        self.retry_ms = retry_ms
        self.requests: list[bytes] = []
        self.accepted = threading.Semaphore(0)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._closed = threading.Event()
        self._spawn(self._accept)

    def hint(self) -> dict[str, Any]:
        return {"type": "loopback", "encrypted": False, "mode": "private", "address": "127.0.0.1",
                "port": self.port}

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._open.append(conn)
            self._spawn(self._serve, conn)

    def _serve(self, conn: socket.socket) -> None:
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                received = conn.recv(65536)
                if not received:
                    return
                data += received
            with self._lock:
                self.requests.append(data)
                events = self.scripts.pop(0) if self.scripts else []
            body = chunk(b"retry: %d\n\n" % self.retry_ms)
            for event_id in events:
                body += chunk(started_event(event_id))
            conn.sendall(HEAD + body)
            self.accepted.release()
            self._closed.wait()  # silence: the connection stays open, nothing more is sent
        except OSError:
            return

    def last_event_ids(self) -> list[str | None]:
        """The `Last-Event-ID` each request carried (None when it had none)."""
        found: list[str | None] = []
        for request in self.requests:
            value = None
            for line in request.decode("latin-1").split("\r\n")[1:]:
                name, _, rest = line.partition(":")
                if name.strip().lower() == "last-event-id":
                    value = rest.strip()
            found.append(value)
        return found

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept
        self._listener.close()
        with self._lock:
            for conn in self._open:
                conn.close()
        for thread in self._threads:
            thread.join(5)
