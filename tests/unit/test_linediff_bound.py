"""Past its work bound a diff is both texts in full, every line ended (engine/linediff.py)."""

from __future__ import annotations

from commonroom.engine.linediff import TOO_LARGE, unified_diff


def test_past_the_bound_every_line_is_removed_then_added_and_ended() -> None:
    before = "one\ntwo\r\nfeed\x0cend"  # a form feed ends a line for splitlines, not for diff
    after = "uno\ndos"
    assert unified_diff(before, after, "a", "b", work=0) == (
        f"--- a ({TOO_LARGE})\n+++ b\n@@ -1,4 +1,2 @@\n"
        "-one\n-two\r\n-feed\x0c\n-end\n+uno\n+dos\n")
    assert unified_diff(before, before, "a", "b", work=0) == ""
