"""The echo agent's text chunking, against its plain definition."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from ahp_server.agents.echo import _chunks

#: Texts made of short and very long words, single and repeated whitespace.
TEXT = st.lists(st.sampled_from(["a", "bb", "é", " ", "  ", "\n", "\t", "x" * 70])).map("".join)


def chunks_by_definition(text: str, words: int) -> list[str]:
    """A piece is a word and the whitespace after it (or leading whitespace);
    a chunk is ``words`` consecutive pieces."""
    pieces = re.findall(r"\S+\s*|\s+", text)
    return ["".join(pieces[i : i + words]) for i in range(0, len(pieces), words)] or [""]


@given(TEXT, st.integers(min_value=1, max_value=4))
def test_chunks_follow_the_definition_and_keep_every_character(text: str, words: int) -> None:
    chunks = _chunks(text, words)
    assert chunks == chunks_by_definition(text, words)
    assert "".join(chunks) == text
