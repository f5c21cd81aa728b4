"""MCP revision 2026-07-28 on the session ingress (docs/spec/PROTOCOL.md section 12).

`wire` (envelope, headers, JSON-RPC errors), `tools` (from the operation
table), `resources`, `notify` (subscriptions and the two streams), `tasks`
(the tasks extension) and `endpoint` (the `/mcp` route). Adapters only:
every rule is the engine's, reached through `Room.execute`.
"""
