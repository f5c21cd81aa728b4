"""The OpenAPI 3.1 document: valid, complete against the operation table, and committed as generated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
from openapi_spec_validator import validate

from commonroom import __version__
from commonroom.openapi import openapi_document, openapi_text
from commonroom.protocol.errors import RECOVERY_FIELDS, STATUS
from commonroom.protocol.operations import OPERATIONS
from commonroom.protocol.schema import json_schema

COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def _schemas(node: Any) -> list[dict[str, Any]]:
    """Every `schema` object anywhere in the document."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "schema" and isinstance(value, dict):
                found.append(value)
            found.extend(_schemas(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_schemas(value))
    return found


def test_the_document_is_valid_openapi_3_1() -> None:
    doc = openapi_document()
    validate(doc)  # raises on any violation of the OpenAPI 3.1 schema
    assert doc["openapi"] == "3.1.0"
    assert doc["info"]["title"] == "commonroom"
    assert doc["info"]["version"] == __version__
    assert doc["servers"] == [{"url": "/"}]
    bearer = doc["components"]["securitySchemes"]["bearer"]
    assert (bearer["type"], bearer["scheme"]) == ("http", "bearer")
    for schema in [*doc["components"]["schemas"].values(), *_schemas(doc["paths"])]:
        jsonschema.Draft202012Validator.check_schema(schema)


def test_every_operation_appears_with_its_method_path_and_id() -> None:
    doc = openapi_document()
    for op in OPERATIONS:
        entry = doc["paths"][op.path][op.method.lower()]
        assert entry["operationId"] == op.name
        assert entry["summary"] == op.summary
        assert entry["tags"] == [op.name.split(".")[0]]
        assert entry["security"] == ([] if op.capability is None else [{"bearer": []}])
        params = json_schema(op.params, params=True)
        if op.method == "GET":
            by_name = {p["name"]: p for p in entry["parameters"] if p["in"] == "query"}
            assert set(by_name) == set(params["properties"])
            for name, parameter in by_name.items():
                assert parameter["required"] == (name in params.get("required", []))
                assert parameter["schema"] == params["properties"][name]
        else:
            assert entry["requestBody"]["content"]["application/json"]["schema"] == params
            assert "413" in entry["responses"]
        if op.kind == "call" or op.name == "workspace.wait":
            assert op.result is not None
            ok = entry["responses"]["200"]["content"]["application/json"]["schema"]
            assert ok == {"$ref": f"#/components/schemas/{op.result.__name__}"}
            assert doc["components"]["schemas"][op.result.__name__] == json_schema(op.result)
        for status in ("400", "401", "403", "404", "409", "429", "500", "503"):
            error = entry["responses"][status]["content"]["application/json"]["schema"]
            assert error == {"$ref": "#/components/schemas/Error"}
        assert "Retry-After" in entry["responses"]["429"]["headers"]
    operation_ids = [entry["operationId"] for item in doc["paths"].values()
                     for entry in item.values()]
    assert len(operation_ids) == len(set(operation_ids))
    assert doc["paths"]["/session/join"]["post"]["security"] == []
    observe = doc["paths"]["/workspace/observe"]["get"]["responses"]["200"]["content"]
    assert list(observe) == ["text/event-stream"]
    assert "101" in doc["paths"]["/workspace/observe/ws"]["get"]["responses"]


def test_discovery_routes_and_mcp_are_documented_without_auth() -> None:
    paths = openapi_document()["paths"]
    for path in ("/.well-known/agent-workspace", "/protocol", "/skills", "/skills/commonroom",
                 "/openapi.json"):
        assert paths[path]["get"]["security"] == []
    assert paths["/mcp"]["post"]["requestBody"]["content"]["application/json"]


def test_the_error_schema_is_the_protocols() -> None:
    error = openapi_document()["components"]["schemas"]["Error"]
    assert error["properties"]["error"]["enum"] == list(STATUS)
    assert error["required"] == ["error", "message", "details"]
    assert set(error["properties"]) == {"error", "message", "details", *RECOVERY_FIELDS}
    stale = {"error": "stale_version", "message": "m", "details": {}, "base_version": 1,
             "current_version": 2, "expected_version": 1, "diff": "-a\n+b\n",
             "changes": [{"version": 2, "summary": "s", "participant_id": None,
                          "created_at": "2026-12-01T10:00:00Z"}], "region": "Goals"}
    jsonschema.validate(stale, error)
    bad = dict(stale, error="no_such_code")
    try:
        jsonschema.validate(bad, error)
    except jsonschema.ValidationError:
        pass
    else:
        raise AssertionError("an unknown error code validated")


def test_the_committed_copy_is_what_the_generator_writes() -> None:
    """Regenerate with `.venv/bin/python tools/gen_openapi.py`."""
    assert COMMITTED.read_text(encoding="utf-8") == openapi_text()
    assert json.loads(openapi_text()) == openapi_document()


def test_links_carry_only_what_their_targets_take() -> None:
    """Each OpenAPI link names a real target and only parameters or body fields it declares."""
    doc = openapi_document()
    by_id = {entry["operationId"]: entry for item in doc["paths"].values() for entry in item.values()}
    found = 0
    for entry in by_id.values():
        for name, link in entry["responses"].get("200", {}).get("links", {}).items():
            found += 1
            target = by_id[link["operationId"]]
            query = {p["name"] for p in target.get("parameters", [])}
            for key in link.get("parameters", {}):
                assert key == "header.Authorization" or key in query, (name, key)
                if key == "header.Authorization":
                    assert target["security"] == [{"bearer": []}]
            body = target.get("requestBody", {}).get("content", {}).get("application/json", {})
            for key, expression in link.get("requestBody", {}).items():
                assert key in body["schema"]["properties"], (name, key)
                assert expression.startswith("$response.body#/"), (name, expression)
    assert found >= 20
    # The join answer's bearer is carried as a template, never as a value.
    join_links = by_id["session.join"]["responses"]["200"]["links"]
    assert all(link["parameters"] == {"header.Authorization": "Bearer {$response.body#/session_id}"}
               for link in join_links.values())
