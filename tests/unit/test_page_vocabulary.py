"""The page's words come from /protocol's `vocabulary`, and that says what the machines do.

The host's page (gui/static/*.js) branches on event types and proposal statuses; it reads them
from `GET /owner/api/protocol` (`vocabulary`), never from a list of its own. That the served
vocabulary says what the machines do is `tests/service/test_page_vocabulary_served.py`.
"""

from __future__ import annotations

import re
from importlib import resources

from commonroom.discovery import vocabulary_document

_BRACKETS = re.compile(r"\[([^\[\]]*)\]")
_QUOTED = re.compile(r'"([^"\\]*)"|\'([^\'\\]*)\'')


def test_no_script_of_the_page_keeps_a_list_of_vocabulary_words() -> None:
    words = vocabulary_document()
    known = set(words["events"]) | set(words["capabilities"]) | {
        status for names in words["statuses"].values() for status in names}
    found = []
    for script in resources.files("commonroom.gui").joinpath("static").iterdir():
        if not script.name.endswith(".js"):
            continue
        text = script.read_text(encoding="utf-8")
        for listed in _BRACKETS.finditer(text):
            quoted = {a or b for a, b in _QUOTED.findall(listed.group(1))} & known
            if len(quoted) >= 2:  # one word is a branch on it; two or more are a copied list
                found.append((script.name, text.count("\n", 0, listed.start()) + 1, sorted(quoted)))
    assert not found, found
