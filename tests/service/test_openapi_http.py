"""GET /openapi.json on a real room, and real answers checked against the document's own schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jsonschema
import referencing
import trio
from referencing.jsonschema import DRAFT202012

from tests.service.conftest import LiveRoom, start_room

BASE = "urn:commonroom:openapi"


class Contract:
    """The document's response schemas, with `$ref`s resolved against the document itself."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        resource = referencing.Resource.from_contents(doc, default_specification=DRAFT202012)
        self.registry: referencing.Registry[Any] = referencing.Registry().with_resource(BASE, resource)

    def check(self, method: str, path: str, status: int, body: Any) -> None:
        responses = self.doc["paths"][path][method.lower()]["responses"]
        schema = responses[str(status)]["content"]["application/json"]["schema"]
        ref = schema["$ref"]
        assert ref.startswith("#/")
        validator = jsonschema.Draft202012Validator({"$ref": BASE + ref}, registry=self.registry)
        validator.validate(body)


async def _document(live: LiveRoom) -> dict[str, Any]:
    answer = await live.raw("GET", "/openapi.json")
    assert answer.status == 200, answer.body
    doc: dict[str, Any] = answer.json()
    return doc


async def test_served_without_a_bearer_and_holds_no_secret(live: LiveRoom) -> None:
    invite = (await live.call("POST", "/workspace/invite", live.host_session, {})).json()
    joined = (await live.call("POST", "/session/join", None,
                              {"invite": invite["invitation"], "name": "a"})).json()
    answer = await live.raw("GET", "/openapi.json")
    assert answer.status == 200
    text = answer.body.decode()
    assert json.loads(text)["openapi"] == "3.1.0"
    for secret in (joined["session_id"], live.host_session, invite["invitation"],
                   invite["invitation"].rsplit("/", 1)[-1], "127.0.0.1",
                   str(live.ready.ingress_port), str(live.ready.owner_port)):
        assert secret not in text


async def test_unauthenticated_rate_limit_applies(doc: Path) -> None:
    async with trio.open_nursery() as nursery:
        live = await start_room(nursery, doc, anonymous_per_minute=3, rate_clock=lambda: 0.0)
        codes = [(await live.raw("GET", "/openapi.json")).status for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        live.stop.set()


async def test_real_answers_validate_against_the_documents_schemas(live: LiveRoom) -> None:
    contract = Contract(await _document(live))
    checked: set[str] = set()

    async def call(method: str, path: str, bearer: str | None, params: dict[str, Any] | None = None,
                   status: int = 200) -> Any:
        if method == "GET":
            query = f"?{urlencode(params)}" if params else ""
            answer = await live.call(method, path + query, bearer)
        else:
            answer = await live.call(method, path, bearer, params or {})
        assert answer.status == status, answer.body
        body = answer.json()
        contract.check(method, path, status, body)
        checked.add(f"{method} {path} {status}")
        return body

    host = live.host_session
    invite = await call("POST", "/workspace/invite", host,
                        {"capabilities": ["read", "observe", "checkout", "propose", "commit"]})
    agent = await call("POST", "/session/join", None, {"invite": invite["invitation"], "name": "a"})
    bearer = agent["session_id"]
    for path in ("/workspace/status", "/workspace/regions", "/workspace/room",
                 "/workspace/participants", "/workspace/diagnostics"):
        await call("GET", path, bearer)
    read = await call("GET", "/workspace/read", bearer, {"region": "Goals"})
    lease = await call("POST", "/workspace/checkout", bearer, {"region": "Goals"})
    proposal = await call("POST", "/workspace/propose", bearer, {
        "region": "Goals", "base_version": read["version"], "summary": "sharper",
        "content": "## Goals\n\n- ship it well\n\n"})
    await call("GET", "/workspace/proposal", bearer, {"proposal_id": proposal["proposal_id"]})
    await call("POST", "/workspace/proposal/review", host,
               {"proposal_id": proposal["proposal_id"], "revision": proposal["revision"], "decision": "approve"})
    await call("POST", "/workspace/commit", bearer, {"proposal_id": proposal["proposal_id"]})
    await call("POST", "/workspace/release", bearer, {"lease_id": lease["lease_id"]})
    await call("GET", "/workspace/wait", bearer, {"cursor": 0})
    # Errors answer in the document's Error shape, recovery fields included.
    stale = await call("POST", "/workspace/propose", bearer, {
        "region": "Goals", "base_version": read["version"], "summary": "late",
        "content": "## Goals\n\n- late\n\n"}, status=409)
    assert stale["error"] == "stale_version" and "diff" in stale
    await call("GET", "/workspace/status", None, status=401)
    await call("GET", "/workspace/invitations", bearer, status=403)
    await call("GET", "/workspace/proposal", bearer, {"proposal_id": "prp_none"}, status=404)
    await call("GET", "/workspace/read", bearer, {"max_lines": "many"}, status=400)
    assert len(checked) == 20
    # The check can fail: a status answer missing a required field does not validate.
    status = await call("GET", "/workspace/status", bearer)
    del status["version"]
    try:
        contract.check("GET", "/workspace/status", 200, status)
    except jsonschema.ValidationError:
        pass
    else:
        raise AssertionError("a status without its version validated")
