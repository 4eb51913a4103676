"""store/group.py: log segments, and joining many commits' segments into few rows."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ahp_server.store.group import SEGMENT, merge_segments, segments

CHANNELS = ("ahp-chat:/a", "ahp-chat:/b", "ahp-session:/s")

#: Commits: each a list of (channel index, envelope size) in serverSeq order.
COMMITS = st.lists(
    st.lists(st.tuples(st.integers(0, 2), st.integers(2, 200)), min_size=1, max_size=8),
    max_size=40,
)


def commit_runs(commits: list[list[tuple[int, int]]]) -> list[tuple[str, int, int, bytes]]:
    """The segments the store's commits would fold, numbered from 1 in order."""
    runs, seq = [], 0
    for commit in commits:
        rows = []
        for channel, size in commit:
            seq += 1
            rows.append((seq, CHANNELS[channel], float(seq), b'"' + b"x" * size + b'"'))
        runs.extend(segments(rows))
    return runs


def entries_by_channel(
    runs: list[tuple[str, int, int, bytes]],
) -> dict[str, list[tuple[int, float, bytes]]]:
    out: dict[str, list[tuple[int, float, bytes]]] = {}
    for channel, first, last, blob in runs:
        decoded = [(seq, at, bytes(raw)) for seq, at, raw in SEGMENT.decode(blob)]
        assert (decoded[0][0], decoded[-1][0]) == (first, last)
        out.setdefault(channel, []).extend(decoded)
    return out


@given(COMMITS, st.sampled_from([64, 300, 4096, 1 << 20]))
def test_joined_rows_hold_every_entry_in_order(
    commits: list[list[tuple[int, int]]], cap: int
) -> None:
    runs = commit_runs(commits)
    rows = merge_segments(runs, cap)
    assert entries_by_channel(rows) == entries_by_channel(runs)
    firsts = [first for _, first, _, _ in rows]
    assert firsts == sorted(firsts)
    assert len(set(firsts)) == len(firsts)
    assert len(rows) <= len(runs)
    for row in rows:  # past the cap only when one commit's segment is larger alone
        assert len(row[3]) <= cap + 2 or row in runs


def test_a_chat_per_commit_becomes_a_row_per_chat() -> None:
    runs = commit_runs([[(0, 10), (1, 10), (2, 10)] for _ in range(50)])
    assert len(runs) == 150
    rows = merge_segments(runs)
    assert [(channel, first, last) for channel, first, last, _ in rows] == [
        ("ahp-chat:/a", 1, 148),
        ("ahp-chat:/b", 2, 149),
        ("ahp-session:/s", 3, 150),
    ]


def test_rows_stop_growing_at_the_cap() -> None:
    runs = commit_runs([[(0, 1000)] for _ in range(10)])
    rows = merge_segments(runs, 3 * 1100)
    assert [len(SEGMENT.decode(blob)) for _, _, _, blob in rows] == [3, 3, 3, 1]
