"""The JSON depth bound (protocol/jsondepth.py): never lets the parser recurse, never counts string text."""

from __future__ import annotations

import json
import time

import pytest

from commonroom.http.common import parse_json_object
from commonroom.protocol.errors import CommonroomError
from commonroom.protocol.jsondepth import MAX_JSON_DEPTH, nests_deeper_than


@pytest.mark.parametrize(("body", "deep"), [
    (b"[[1]]", False),
    (b"[" * 16 + b"]" * 16, False),
    (b"[" * 17 + b"]" * 17, True),
    (b"[" * 5000, True),  # unclosed: the parser would still recurse 5,000 times
    (b'{"a": ' + b"[" * 5000, True),
    (b'{"a": "' + b"[" * 5000 + b'"}', False),  # text, not nesting
    (b'["\\"[[[[[[[[[[[[[[[[[[[[["]', False),  # an escaped quote does not end the string
    (b'["\\\\", ' + b"[" * 17 + b"1" + b"]" * 17 + b"]", True),  # an escaped backslash does
    (b"[{]" * 20, True),
    (b"{[{[{[{[]}]}]}]}" + b"[]" * 30, False),
    (b"[[]" * 8 + b"]" * 8, False),  # depth 9: an empty sibling at every level
    (b"[[]" * 40 + b"]" * 40, True),  # the same, 41 deep: a run of openers once peeled
    (b"[" * 17 + b"]" * 16, True),
    (b"[" * 16 + b"[]" * 3 + b"]" * 16, True),  # 17 deep through the siblings
    (b"[" * 15 + b"[]" * 3 + b"]" * 15, False),
])
def test_depth_bound(body: bytes, deep: bool) -> None:
    assert nests_deeper_than(body, 16) is deep  # the cases are written around a bound of 16


def test_the_bound_is_cheap_on_a_megabyte_of_brackets() -> None:
    body = b"[]" * (1 << 19) + b"[" * (MAX_JSON_DEPTH + 1)
    started = time.process_time()
    assert nests_deeper_than(body, MAX_JSON_DEPTH)
    assert time.process_time() - started < 0.2


def test_parse_refuses_deep_and_accepts_flat() -> None:
    with pytest.raises(CommonroomError) as refused:
        parse_json_object(b"[" * 5000)
    assert refused.value.code == "invalid_request" and refused.value.details == {"field": "body"}
    assert parse_json_object(json.dumps({"content": "[" * 5000}).encode()) == {"content": "[" * 5000}
