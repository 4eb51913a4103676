"""Small pure helpers of the actors module."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ahp_server.host.actors import _title_from


@given(
    st.lists(st.sampled_from(["a", "bb", "é", " ", "  ", "\n", "x" * 70])).map("".join),
    st.integers(min_value=2, max_value=80),
)
def test_a_session_title_is_the_collapsed_text_cut_to_the_limit(text: str, limit: int) -> None:
    line = " ".join(text.split())
    expected = line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
    assert _title_from(text, limit) == expected
