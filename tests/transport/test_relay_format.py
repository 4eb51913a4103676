"""The cluster relay's message format (``transport/relay_format.py``): pure, no bus.

Round trips of every shape a message can take, and ``ValueError`` for what a
broken peer could send; ``tests/transport/test_relay.py`` drives the relay
itself over a real NATS server.
"""

from __future__ import annotations

import pytest

from ahp_server.transport.relay_format import (
    Pieces,
    decode,
    encode,
    pack_frames,
    parse_primary,
    same_frames,
    sendable,
    unpack_frames,
)


@pytest.mark.parametrize("epoch", [None, 0, 7])
@pytest.mark.parametrize("payload", [b"", b"x", b"two\nlines\n", bytes(range(256))])
def test_encode_decode_round_trip(epoch: int | None, payload: bytes) -> None:
    assert decode(encode("t", 12, 345, payload, epoch)) == ("t", 12, 345, epoch, payload)


@pytest.mark.parametrize(
    "data",
    [
        b"t1 1",  # no newline
        b"\npayload",  # empty header
        b"t\n",  # too short
        b"t1\n",  # one field
        b"ta 1\n",  # non-numeric conn
        b"t1 b\n",  # non-numeric n
        b"t1 1 c\n",  # non-numeric epoch
        b"t1 1 2 3\n",  # too many fields
        b"t1  1\n",  # an empty field
    ],
)
def test_malformed_headers_raise_value_error(data: bytes) -> None:
    with pytest.raises(ValueError, match=r"relay|invalid literal"):
        decode(data)


@pytest.mark.parametrize(
    "frames",
    [[], [b""], [b"", b"", b""], [b"a\nb", b"\n", b"12\n34"], [b'{"x": 1}', b"\xff\x00" * 500]],
)
def test_pack_unpack_round_trip(frames: list[bytes]) -> None:
    assert unpack_frames(pack_frames(frames)) == frames


@pytest.mark.parametrize(
    "data",
    [
        pack_frames([b"hello"])[:-1],  # short by one byte
        b"5\nabc",
        b"5",  # no newline after the length
        b"x\nabc",  # non-numeric length
        b"-1\n",  # negative length
        pack_frames([b"ok"]) + b"9\nshort",  # a good frame, then a truncated one
    ],
)
def test_truncated_packed_frames_raise_value_error(data: bytes) -> None:
    with pytest.raises(ValueError, match=r"truncated|not found|invalid literal"):
        unpack_frames(data)


def test_pieces_are_bounded_and_joined() -> None:
    pieces = Pieces(limit=10)
    assert pieces.join(b"alone") == b"alone"
    assert pieces.add(b"12345")
    assert pieces.add(b"67890")  # exactly the limit
    assert pieces.join(b"") == b"1234567890"
    assert pieces.size == 0
    assert pieces.parts == []
    assert pieces.add(b"123456")
    assert not pieces.add(b"78901")  # 11 > 10


def test_primary_records_parse_or_are_none() -> None:
    assert parse_primary(b"node-1 7") == ("node-1", 7)
    for bad in (b"", b"node-1", b"node-1 seven", b"a b c", b"\xff 1"):
        assert parse_primary(bad) is None


def test_only_codes_a_close_frame_may_carry_are_sendable() -> None:
    assert all(sendable(code) for code in (1000, 1008, 1011, 1012, 1013, 3000, 4999))
    assert not any(sendable(code) for code in (999, 1004, 1005, 1006, 1015, 2000, 5000))


def test_frames_are_the_same_only_when_they_are_the_same_objects() -> None:
    frame = b'{"a": 1}'
    assert same_frames([frame], [frame])
    assert not same_frames([frame], [bytes(bytearray(frame))])  # equal bytes, another object
    assert not same_frames([frame], [frame, frame])
