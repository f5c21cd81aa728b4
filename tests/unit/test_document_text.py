"""A version's text kept unjoined (engine/document_text.py): every form answers the text
it stands for, a stretch at a time or whole, and an outline over it the full scan's."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commonroom.engine.document_text import (
    MAX_SPLICE_DEPTH,
    DocumentText,
    JoinedText,
    OneByteText,
    SplicedText,
)
from commonroom.engine.regions import Outline, Span
from commonroom.engine.text import decode_text, encode_text

TEXT = st.text(alphabet="ab#\n\r é-\udc80", max_size=60)


def check_same(text: DocumentText, expected: str, data: st.DataObject) -> None:
    assert len(text) == len(expected)
    for _ in range(6):
        a = data.draw(st.integers(0, len(expected) + 3))
        b = data.draw(st.integers(0, len(expected) + 3))
        assert text.window(a, b) == expected[a:b]
    for char in ("\n", "é"):  # an ASCII one (the bytes' own search) and one that is not
        for _ in range(3):
            a = data.draw(st.integers(0, len(expected) + 3))
            b = data.draw(st.integers(0, len(expected) + 3))
            assert text.find(char, a) == expected.find(char, a)
            assert text.rfind(char, b) == expected.rfind(char, 0, b)
            assert text.count(char, a, b) == expected.count(char, a, b)
    assert text.joined() == expected
    assert text.window(0, len(expected) + 1) == expected  # and from the joined text too
    assert text.find("\n", 0) == expected.find("\n") and text.count("\n", 0, 9) == expected.count("\n", 0, 9)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXT, st.lists(st.tuples(st.integers(0, 80), st.integers(0, 80), TEXT), max_size=2 * MAX_SPLICE_DEPTH + 2),
       st.data())
def test_splices_over_splices_answer_the_spliced_text(
    base: str, edits: list[tuple[int, int, str]], data: st.DataObject
) -> None:
    text: DocumentText = JoinedText(base)
    expected = base
    for a, b, content in edits:
        start, end = sorted((min(a, len(expected)), min(b, len(expected))))
        text = SplicedText(text, start, end, content)
        expected = expected[:start] + content + expected[end:]
        assert text.depth <= MAX_SPLICE_DEPTH + 1
        assert len(text) == len(expected)
        a, width = data.draw(st.integers(0, len(expected))), data.draw(st.integers(0, 9))
        assert text.window(a, a + width) == expected[a : a + width]
    check_same(text, expected, data)


# Bytes each of which is one character: ASCII, and bytes no UTF-8 sequence starts with
# (they decode one by one, as lone surrogates).
ONE_BYTE = st.lists(st.sampled_from([b"a", b"\n", b"#", b"\r", b" ", b"\x80", b"\xbf", b"\xff"]),
                    max_size=80).map(b"".join)


@settings(max_examples=200, deadline=None)
@given(ONE_BYTE, st.data())
def test_one_byte_text_answers_its_bytes_decoded(raw: bytes, data: st.DataObject) -> None:
    expected = decode_text(raw)
    assert len(expected) == len(raw)
    check_same(OneByteText(raw), expected, data)


def test_a_splice_outside_its_base_is_refused() -> None:
    with pytest.raises(ValueError, match="outside"):
        SplicedText(JoinedText("abc"), 2, 4, "x")


# -- an outline's scan reads windows of the text: long lines and long front matter ----


def _same_as_full_scan(text: str, start: int, end: int, content: str, *, bytes_backed: bool) -> None:
    outline = Outline(text)
    if bytes_backed:
        outline.backed_by(encode_text(text))
    new_text = text[:start] + content + text[end:]
    new = outline.replaced(Span("x", start, end), content)
    full = Outline(new_text)
    assert new.headings == full.headings
    assert new.window(0, len(new_text)) == new_text
    assert new.text == new_text


LONG = "x" * 5000


@pytest.mark.parametrize("bytes_backed", [False, True])
@pytest.mark.parametrize(
    ("text", "start", "end", "content"),
    [
        # a heading line far longer than the first windows a line ending is looked for in
        (f"# A\n\n# B {LONG}\nb\n\n# C\nc\n", 5, 5, "more\n"),
        (f"# A\n\n# B\nb\n\n# C {LONG}\r\nc\n# D\n", 9, 12, "x\n"),
        # front matter longer than the first prefix looked at: closed, and then closed by the change
        (f"---\ntitle: {LONG}\n---\n# A\n# B\n", 5015, 5018, "# Z\n"),
        (f"---\ntitle: {LONG}\n# A\n# B\n", 5012, 5012, "---\n"),
        # not front matter: a long first line that starts like it
        (f"--- {LONG}\n# A\n# B\n", 5005, 5009, "# Q\n"),
    ],
)
def test_windowed_scans_equal_the_full_scan(text: str, start: int, end: int, content: str,
                                            bytes_backed: bool) -> None:
    assert 0 <= start <= end <= len(text)
    _same_as_full_scan(text, start, end, content, bytes_backed=bytes_backed)


def test_a_version_over_its_bytes_keeps_no_text_of_its_own() -> None:
    text = "# A\n\nbody\n\n# B\n\nmore\n"
    outline = Outline(text)
    outline.backed_by(encode_text(text))
    assert outline.region_text(outline.resolve("B")) == "# B\n\nmore\n"
    assert outline._doc._joined is None  # a region read joined nothing
    accented = "# Á\n"
    other = Outline(accented)
    other.backed_by(encode_text(accented))  # two bytes for Á: the text stays as it was
    assert isinstance(other._doc, JoinedText)
