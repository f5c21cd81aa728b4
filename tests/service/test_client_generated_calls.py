"""Methods generated from the parameter records, against a real room (hypercorn on 127.0.0.1).

The resident runtime's operations were the client's only methods made from their records at
import (keyword-only); generated, they take their required fields by position, and a field
typed as a record (a permission request's options) is sent as its JSON.
"""

from __future__ import annotations

import commonroom
from commonroom.protocol import records
from commonroom.protocol.requests import PermissionOption
from tests.service.conftest import LiveRoom


async def test_the_resident_runtime_verbs_by_position_and_records_as_parameters(live: LiveRoom) -> None:
    host = commonroom.AsyncClient(live.ready.invitation, session=live.host_session)
    invitation = (await host.invite(capabilities=["read", "observe"])).invitation
    async with await commonroom.AsyncClient.join(invitation, name="resident") as agent:
        assert agent.joined is not None
        reported = await agent.runtime("running", "acp:gemini", turn=1)
        assert isinstance(reported, records.Participant)
        asked = await agent.permission_request(
            "Run the tests?", tool="bash", input_preview="pytest -q",
            options=[PermissionOption("yes", "Allow once", "allow_once"),
                     PermissionOption("no", "Reject", "reject_once")])
        assert [(o.option_id, o.kind) for o in asked.options] == [("yes", "allow_once"),
                                                                  ("no", "reject_once")]
        assert (asked.title, asked.tool, asked.status) == ("Run the tests?", "bash", "pending")
        answered = await host.permission_answer(asked.permission_id, "yes")
        assert (answered.status, answered.option_id) == ("answered", "yes")

        second = await agent.permission_request("Delete the cache?", options=[
            PermissionOption("ok", "Allow", "allow_once")])
        withdrawn = await agent.permission_withdraw(second.permission_id)
        assert withdrawn.status == "withdrawn"
        pending = await host.permissions()
        assert second.permission_id not in {p.permission_id for p in pending.permissions}

        control = await host.runtime_interrupt(agent.joined.participant_id, 1)
        assert control.turn == 1
