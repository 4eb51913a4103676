"""The root notices between sharded nodes (transport/notices.py) on the real NATS server.

A host (``App``, in memory, with a client subscribed to the root channel over a
real WebSocket) hears the notice subject through :class:`RootNotices`; another
node's notices are sent by a second :class:`RootNotices`, and what no node would
send (unsigned, forged, oversize, unreadable) is published raw on the same NATS
connection before it, so the order they arrive in is the order they were sent.
Every wait is bounded by ``TIMEOUT``; assertions are on counts and on what the
host and its client were told. docs/scale-out.md "Root state: one view",
"Authentication".
"""

from __future__ import annotations

import contextlib

import msgspec
import nats

from ahp_server.agents.echo import EchoAgent
from ahp_server.app import App
from ahp_server.client import AhpClient
from ahp_server.config import Settings
from ahp_server.protocol import codec
from ahp_server.protocol.types import SessionAddedParams, SessionSummary
from ahp_server.store.sharded import ROOT
from ahp_server.transport.notices import MAX_NOTICE_BYTES, RootNotices
from ahp_server.transport.relay_format import Signer
from tests.cluster.helpers import nats_or_skip, new_cluster_name

TIMEOUT = 20.0
SECRET = b"root-notices-test-secret-4f9a21c"


def added(summary: SessionSummary, session: str, **changes: object) -> SessionAddedParams:
    """``root/sessionAdded`` for ``session``, as the node owning it would send it."""
    return SessionAddedParams(
        channel=ROOT, summary=msgspec.structs.replace(summary, resource=session, **changes)
    )


def notice(node: str, params: SessionAddedParams) -> bytes:
    """A notice as ``RootNotices.publish`` encodes it (before it is signed)."""
    return msgspec.json.encode(
        {
            "node": node,
            "method": "root/sessionAdded",
            "session": params.summary.resource,
            "owner": None,
            "params": msgspec.Raw(codec.encode(params)),
        }
    )


def announced(client: AhpClient) -> list[str]:
    """The sessions ``client`` was told of by ``root/sessionAdded``, in order."""
    return [
        n.params["summary"]["resource"]
        for n in list(client.notifications)
        if n.method == "root/sessionAdded"
    ]


async def test_notices_that_do_not_verify_or_read_are_dropped_and_a_good_one_still_arrives(
    stack: contextlib.AsyncExitStack,
) -> None:
    url, cluster = nats_or_skip(), new_cluster_name()
    subject = f"ahp.{cluster}.notice"
    signer = Signer(SECRET, cluster)
    app = App(Settings(port=0), providers=[EchoAgent()])
    await app.start()
    stack.push_async_callback(app.stop)
    host = app.host
    client = await stack.enter_async_context(AhpClient.connect(app.urls[0], subscriptions=[ROOT]))
    # A real session's summary: what the notices below name other sessions with.
    made = await client.create_session("echo", timeout=TIMEOUT)
    summary = host.sessions[made].summary
    await client.wait_for(lambda c: made in announced(c), timeout=TIMEOUT)

    listening = await nats.connect(url, connect_timeout=TIMEOUT)
    stack.push_async_callback(listening.close)
    heard = RootNotices(listening, cluster, "node-a", host, signer)
    await heard.start()
    stack.push_async_callback(heard.aclose)
    sending = await nats.connect(url, connect_timeout=TIMEOUT)
    stack.push_async_callback(sending.close)
    other = RootNotices(sending, cluster, "node-b", host, signer)
    await other.start()
    stack.push_async_callback(other.aclose)

    bad = {name: f"ahp-session:/{name}" for name in ("unsigned", "forged", "oversize")}
    # Unsigned: a well-formed notice without the cluster's MAC.
    await sending.publish(subject, notice("node-b", added(summary, bad["unsigned"])))
    # Forged: signed, with a key derived from another secret.
    forger = Signer(b"not-the-cluster-secret-0000000", cluster)
    forged = forger.seal(subject, notice("node-b", added(summary, bad["forged"])))
    await sending.publish(subject, forged)
    # Oversize: signed with the cluster's key, well-formed, past MAX_NOTICE_BYTES.
    big = notice("node-b", added(summary, bad["oversize"], title="x" * MAX_NOTICE_BYTES))
    assert len(big) > MAX_NOTICE_BYTES
    await sending.publish(subject, signer.seal(subject, big))
    # Unreadable: signed with the cluster's key, not a notice.
    await sending.publish(subject, signer.seal(subject, b"{not json"))
    await sending.publish(subject, signer.seal(subject, b'{"node": "node-b"}'))
    # Then a good notice from node-b, on the same connection: it arrives after them.
    good = "ahp-session:/from-node-b"
    params = added(summary, good)
    other.publish("root/sessionAdded", params, good, None)

    await client.wait_for(lambda c: good in announced(c), timeout=TIMEOUT)
    assert heard.dropped == 5
    assert heard.heard == 1
    # None of the bad ones reached the host: not in its catalogue, not told its client.
    assert announced(client) == [made, good]
    assert good in host.session_index
    assert not set(bad.values()) & set(host.session_index)
    # node-b skips its own notice (its host told its subscribers already).
    assert other.heard == 0
