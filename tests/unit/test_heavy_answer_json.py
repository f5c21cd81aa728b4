"""A heavy read's answer is encoded a field at a time (`http/common.encode_in_pieces`):
the very text `json.dumps` makes, with the event loop free between the fields."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from commonroom.http.common import encode_in_pieces

ANSWERS: list[Any] = [
    {"proposal_id": "pr_1", "content": "## Risks\n\n\u00e9t\u00e9 \"quoted\"\n" * 50,
     "diff": "--- a\n+++ b\n", "warnings": ["[x]: also changes"], "pruned": False,
     "original_content": None, "revision": 2, "nested": {"a": [1, 2.5, {"b": None}]}},
    {"only": "one field"}, {}, [1, 2], "text", None,
]


@pytest.mark.parametrize("answer", ANSWERS)
async def test_the_text_is_json_dumps_own(answer: Any) -> None:
    assert await encode_in_pieces(answer) == json.dumps(answer)


async def test_other_tasks_run_between_the_fields() -> None:
    ran: list[str] = []
    answer = {f"field{k}": "x" * 10 for k in range(3)}

    async def other() -> None:
        ran.append("other")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        text = await encode_in_pieces(answer)
        ran.append("encoded")
    assert ran == ["other", "encoded"] and json.loads(text) == answer
