"""The wire: how every client reaches a room (the Python clients, `ce`, `ce mcp`).

    http11.py   sans-I/O HTTP/1.1 (h11): request encoder, head reader, SSE parser, failures
    calls.py    an operation call as bytes and back (query/JSON body, bearer, error mapping)
    plans.py    stream reconnection and long-polls, as sans-I/O generators
    timeouts.py the one set of timeouts (connect, call, silence, retry)
    aio.py      the trio driver: exchanges, streams, `Connection`, `Runner` (plans)
    sync.py     the blocking driver, GENERATED from aio.py by tools/unasync_wire.py
    _trio_io.py / _socket_io.py  the only code that differs: trio streams vs sockets

Importing this package imports nothing: `wire.sync` over a loopback hint never
loads trio, so a one-shot `ce read` starts fast. The wire imports neither
`cli/`, `client/` nor `engine/`; its errors (`wire/errors.py`) are the library's, re-exported
by `commonroom.client.errors`.
"""
