"""How deep a JSON text could nest, found before it is parsed.

Every JSON the room parses from outside (a request body, an MCP message, an invitation) is
refused when it could nest deeper than `MAX_JSON_DEPTH`, before the parser sees it: the
parser's own limit is the interpreter's recursion limit, which differs between Python
versions (3.12 parses 1,300 levels that 3.11 refuses), so the answer would too.
"""

from __future__ import annotations

import functools
import re
from typing import Final

# An operation's parameters are flat (strings, integers, booleans, lists of
# strings) but for the task surfaces' JSON values (docs/spec/PROTOCOL.md section 20): a live
# view of 8 levels of nodes nests two JSON levels per node, 21 in an MCP message. Deeper
# JSON is refused before it is parsed, so it can never reach the parser's recursion limit.
MAX_JSON_DEPTH: Final = 32


_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")


@functools.cache
def _opener_run(length: int) -> re.Pattern[bytes]:
    return re.compile(rb"[\[{]{%d}" % length)


def nests_deeper_than(raw: bytes, limit: int) -> bool:
    """Whether a JSON parser could nest the arrays/objects of `raw` more than `limit` deep.

    Brackets inside strings do not count. Every step is a C-speed pass (a
    body with few brackets costs two `count`s): strings are cut out, all but
    brackets deleted, then `[]` and `{}` pairs are removed by `bytes.replace`,
    which peels at most one level per call. After k calls that changed
    something, the openers left are unclosed (or mismatched), each one more
    level the parser would enter, so k + those openers bounds the depth from
    above (mixing both kinds can count a level twice: depth 8 always passes).
    """
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKET)
    # limit + 1 openers in a row (empty siblings between them peeled away) are that
    # many levels the parser enters: certainly too deep, found in one pass. The
    # usual deep body is such a run; without this it cost a peeling pass a level.
    too_deep = _opener_run(limit + 1)
    levels = 0
    while brackets and levels <= limit:
        before = brackets
        for pair in (b"[]", b"{}"):
            peeled = brackets.replace(pair, b"")
            if peeled != brackets:
                levels += 1
                brackets = peeled
        if brackets == before:
            break
        if too_deep.search(brackets):
            return True
    return levels + brackets.count(b"[") + brackets.count(b"{") > limit
