"""The sharded feed's record format (transport/feed_format.py): pure, no I/O."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ahp_server.transport.feed_format import (
    RecordLimits,
    decode_record,
    encode_record,
    record_size,
    spliced,
    split,
)

LIMITS = RecordLimits(max_count=100, max_bytes=10_000)
envelopes = st.lists(st.binary(max_size=50), min_size=1, max_size=30)


@given(st.integers(1, 2**62), envelopes)
def test_a_record_round_trips_within_its_size_bound(first: int, items: list[bytes]) -> None:
    data = encode_record(first, items)
    assert len(data) <= record_size(items)
    assert decode_record(data, LIMITS) == (first, items)


@given(st.binary(max_size=300))
def test_garbage_is_no_record_and_never_raises(data: bytes) -> None:
    record = decode_record(data, LIMITS)
    if record is not None:  # a valid record by chance: then it is a well-formed one
        first, items = record
        assert first >= 1
        assert 1 <= len(items) <= LIMITS.max_count


@given(st.integers(1, 1000), envelopes, st.data())
def test_a_damaged_record_is_dropped_or_well_formed(
    first: int, items: list[bytes], data: st.DataObject
) -> None:
    raw = bytearray(encode_record(first, items))
    at = data.draw(st.integers(0, len(raw) - 1))
    raw[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    record = decode_record(bytes(raw[:cut]), LIMITS)
    if record is not None:
        assert record[0] >= 1
        assert 1 <= len(record[1]) <= LIMITS.max_count


@pytest.mark.parametrize(
    "value",
    [
        (0, 1, [b"x"]),  # no number 0
        (-5, 1, [b"x"]),
        (1, 0, []),  # an empty record
        (1, 2, [b"x"]),  # count and envelopes disagree
        (1, 101, [b"x"] * 101),  # over max_count
        (1, 1, ["text, not bytes"]),
        [1, 1, [b"x"], b"extra"],
        {"first": 1},
        (2**64, 1, [b"x"]),
    ],
)
def test_what_is_not_a_record_within_the_limits_is_refused(value: object) -> None:
    try:
        data = msgspec.msgpack.encode(value)
    except OverflowError:
        data = b"\xcf" + b"\xff" * 9
    assert decode_record(data, LIMITS) is None


def test_a_record_over_max_bytes_is_refused_before_decoding() -> None:
    data = encode_record(1, [b"x" * 200])
    assert decode_record(data, RecordLimits(max_count=10, max_bytes=len(data) - 1)) is None
    assert decode_record(data, RecordLimits(max_count=10, max_bytes=len(data))) == (1, [b"x" * 200])


def test_encode_refuses_an_empty_or_unnumbered_record() -> None:
    with pytest.raises(ValueError, match="at least one"):
        encode_record(1, [])
    with pytest.raises(ValueError, match="at least one"):
        encode_record(0, [b"x"])


@given(
    st.integers(1, 1000),
    st.lists(st.binary(max_size=120), min_size=1, max_size=40),
    st.integers(1, 8),
    st.integers(60, 400),
)
def test_split_keeps_number_order_within_limits_and_leaves_out_only_the_too_large(
    first: int, items: list[bytes], max_count: int, max_bytes: int
) -> None:
    limits = RecordLimits(max_count=max_count, max_bytes=max_bytes)
    records = list(split(first, items, limits))
    covered: dict[int, bytes] = {}
    for start, part in records:
        assert part
        assert len(part) <= max_count
        assert len(encode_record(start, part)) <= max_bytes
        assert decode_record(encode_record(start, part), limits) == (start, part)
        for n, item in enumerate(part, start):
            assert n not in covered
            covered[n] = item
    starts = [start for start, _ in records]
    assert starts == sorted(starts)
    for n, item in enumerate(items, first):
        fits = record_size([item]) <= max_bytes
        assert (covered.get(n) == item) if fits else n not in covered


def test_spliced_puts_server_seq_first() -> None:
    assert spliced(7, b'{"channel":"c"}') == b'{"serverSeq":7,"channel":"c"}'
