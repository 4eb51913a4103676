"""The hub tells a listener when a channel's last subscriber leaves (host/core/sequencer.py)."""

from __future__ import annotations

from ahp_server.host.core.fanout import Connection
from ahp_server.host.core.sequencer import Hub


class NullTransport:
    """A transport that sends nowhere (the hub never writes in these tests)."""

    async def send_text(self, frame: bytes) -> None:
        return None

    async def send_texts(self, frames: list[bytes]) -> None:
        return None

    async def close(self, code: int, reason: str) -> None:
        return None

    def abort(self) -> None:
        return None


def connection() -> Connection:
    return Connection(NullTransport(), max_frames=10, max_bytes=1000)


def test_the_last_subscriber_leaving_is_reported_once() -> None:
    hub = Hub(replay_max_envelopes=10, replay_max_bytes=1000)
    vacated: list[str] = []
    dropped: list[Connection] = []
    hub.on_vacated(vacated.append, dropped.append)
    a, b = connection(), connection()
    hub.subscribe(a, "ch")
    hub.subscribe(b, "ch")
    hub.unsubscribe(a, "ch")
    assert vacated == []
    hub.unsubscribe(a, "ch")  # not subscribed any more: nothing
    hub.unsubscribe(b, "ch")
    assert vacated == ["ch"]
    hub.unsubscribe(b, "never-subscribed")
    assert vacated == ["ch"]


def test_a_dropped_connection_vacates_its_channels_then_is_reported() -> None:
    hub = Hub(replay_max_envelopes=10, replay_max_bytes=1000)
    events: list[str] = []
    hub.on_vacated(lambda ch: events.append(f"vacated {ch}"), lambda c: events.append("dropped"))
    a, b = connection(), connection()
    hub.subscribe(a, "only-a")
    hub.subscribe(a, "shared")
    hub.subscribe(b, "shared")
    hub.drop_connection(a)
    assert events == ["vacated only-a", "dropped"]
    hub.drop_channel("shared")  # a disposed channel is not "vacated"
    assert events == ["vacated only-a", "dropped"]
