"""An operation is its spec and its handler, nothing else: `workspace.ping` is everywhere.

`workspace.ping` was added as one `OperationSpec` (protocol/operations.py), its result
record (protocol/records.py) and one handler (engine/reads.ping + HANDLERS). Against a
real room (hypercorn on 127.0.0.1): the REST route on both listeners, the MCP tool (listed
and called), the served OpenAPI document, /protocol (and the page's /owner/api/protocol),
and a method of both Python clients all have it, without a line written for any of them.
"""

from __future__ import annotations

import commonroom
from commonroom.client.generated import OPERATION_METHODS
from commonroom.protocol import records
from tests.service.conftest import LiveRoom
from tests.service.mcp_helpers import rpc, tool


async def test_workspace_ping_is_on_every_surface(live: LiveRoom) -> None:
    agent = await live.join("pinger", capabilities=["read"])
    bearer, pid = agent["session_id"], agent["participant_id"]

    rest = await live.call("GET", "/workspace/ping", bearer)
    assert rest.status == 200, rest.body
    assert rest.json()["participant_id"] == pid and rest.json()["version"] == 1
    owner_headers = await live.owner_login()
    owner = await live.raw("GET", "/owner/api/workspace/ping", headers=owner_headers,
                           port=live.ready.owner_port)
    assert owner.status == 200 and owner.json()["version"] == 1

    listed = (await rpc(live, "tools/list", {}, bearer)).json()["result"]["tools"]
    ping_tool = next(t for t in listed if t["name"] == "workspace_ping")
    assert ping_tool["annotations"]["readOnlyHint"] is True
    called = await tool(live, "workspace_ping", bearer)
    assert called["structuredContent"]["participant_id"] == pid

    openapi = (await live.call("GET", "/openapi.json")).json()
    assert openapi["paths"]["/workspace/ping"]["get"]["operationId"] == "workspace.ping"

    for document in ((await live.call("GET", "/protocol")).json(),
                     (await live.raw("GET", "/owner/api/protocol", headers=owner_headers,
                                     port=live.ready.owner_port)).json()):
        spec = next(op for op in document["operations"] if op["name"] == "workspace.ping")
        assert (spec["method"], spec["path"], spec["capability"]) == ("GET", "/workspace/ping", "read")
        assert set(spec["result"]["properties"]) == {"participant_id", "version", "server_time"}

    assert OPERATION_METHODS["workspace.ping"] == "ping"
    client = commonroom.AsyncClient(live.ready.invitation, session=bearer)
    pong = await client.ping()
    assert isinstance(pong, records.Pong) and pong.participant_id == pid and pong.version == 1
