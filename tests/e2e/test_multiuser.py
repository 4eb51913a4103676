"""Multi-user mode over real sockets (issue 16, item 2): the identity comes from the
token used at the door; a session belongs to its creator; another user can neither
see nor touch it; an admin sees all. docs/protocol.md "Identity and ownership".
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from msgspec import UnsetType
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from ahp_server.client import AhpClient, RemoteError
from ahp_server.config import Settings, UserConfig
from ahp_server.protocol.types import (
    ChatDraftChangedAction,
    ChatState,
    CreateTerminalParams,
    Message,
    MessageOrigin,
    RootState,
    RootTerminalsChangedAction,
    TerminalClaimedAction,
    TerminalSessionClaim,
)
from tests.conftest import RunningHost, start_host
from tests.e2e.helpers import TIMEOUT, default_chat_of, session_of, turn_done
from tests.e2e.test_identity import echoed
from tests.e2e.test_resource_watch import watch
from tests.e2e.test_terminals import create_terminal
from tests.postgres import postgres_schema

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef"
ROOT_TOKEN = "admin-token-0123456789abcdef"
PERMISSION_DENIED = -32009
NOT_FOUND = -32008
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
ROOT = "ahp-root://"
USERS = (
    UserConfig(name="alice", token=ALICE),
    UserConfig(name="bob", token=BOB),
    UserConfig(name="root", token=ROOT_TOKEN, admin=True),
)


@pytest.fixture
async def shared(tmp_path: Path) -> AsyncIterator[RunningHost]:
    running = await start_host(Settings(users=USERS, data_dir=str(tmp_path / "data")))
    try:
        yield running
    finally:
        await running.stop()


def as_user(running: RunningHost, token: str, **kwargs: Any) -> Any:
    return AhpClient.connect(running.url, token=token, **kwargs)


async def refused(call: Any) -> RemoteError:
    with pytest.raises(RemoteError) as caught:
        await call
    return caught.value


async def listed(client: AhpClient) -> set[str]:
    return {s.resource for s in (await client.list_sessions(timeout=TIMEOUT)).items}


_ids = itertools.count(1)


async def rpc(ws: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """One JSON-RPC request over a raw socket; its answer (notifications skipped)."""
    request_id = next(_ids)
    await ws.send(
        json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
    )
    async with asyncio.timeout(TIMEOUT):
        while True:
            answer: dict[str, Any] = json.loads(await ws.recv())
            if answer.get("id") == request_id:
                return answer


def http_status(url: str, token: str | None) -> int:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=TIMEOUT):
            return 200
    except urllib.error.HTTPError as error:
        return error.code


# -- the door ---------------------------------------------------------------------------------


async def test_each_user_token_opens_the_door_and_others_get_401(shared: RunningHost) -> None:
    for token in (ALICE, BOB, ROOT_TOKEN):
        async with as_user(shared, token) as client:
            await client.ping()
    for headers in ({}, {"Authorization": "Bearer not-a-user-token-at-all"}):
        with pytest.raises(InvalidStatus) as caught:
            async with connect(shared.url, additional_headers=headers):
                pass
        assert caught.value.response.status_code == 401
    metrics = shared.url.replace("ws://", "http://") + "/metrics"
    assert await asyncio.to_thread(http_status, metrics, None) == 401
    assert await asyncio.to_thread(http_status, metrics, "wrong") == 401
    assert await asyncio.to_thread(http_status, metrics, BOB) == 200
    healthz = shared.url.replace("ws://", "http://") + "/healthz"
    assert await asyncio.to_thread(http_status, healthz, None) == 200


# -- seeing -----------------------------------------------------------------------------------


async def test_another_users_session_is_not_listed_and_an_admin_sees_all(
    shared: RunningHost,
) -> None:
    async with (
        as_user(shared, ALICE) as alice,
        as_user(shared, BOB) as bob,
        as_user(shared, ROOT_TOKEN) as root,
    ):
        mine = await alice.create_session()
        theirs = await bob.create_session()
        assert await listed(alice) == {mine}
        assert await listed(bob) == {theirs}
        assert await listed(root) == {mine, theirs}


async def test_root_notifications_only_tell_of_visible_sessions(shared: RunningHost) -> None:
    async with (
        as_user(shared, ALICE, subscriptions=["ahp-root://"]) as alice,
        as_user(shared, BOB, subscriptions=["ahp-root://"]) as bob,
    ):
        hers = await alice.create_session()
        chat = await alice.open_chat()  # its summary changes as the turn runs
        await alice.ask(chat, "hello", timeout=TIMEOUT)
        own = await bob.create_session()  # bob's own: told after alice's

        def about(client: AhpClient, session: str) -> list[str]:
            return [
                n.method
                for n in client.notifications
                if n.method.startswith("root/session")
                and session in json.dumps(n.params if isinstance(n.params, dict) else {})
            ]

        def told(client: AhpClient) -> bool:
            return any(
                n.method == "root/sessionAdded" and own in json.dumps(n.params)
                for n in client.notifications
            )

        await bob.wait_for(told, timeout=TIMEOUT)
        assert "root/sessionAdded" in about(alice, hers)
        alice_sessions = {hers, session_of(shared.host, chat)}
        for session in alice_sessions:
            assert about(bob, session) == []


# -- touching -----------------------------------------------------------------------------------


async def test_another_users_session_and_chats_refuse_every_command(
    shared: RunningHost,
) -> None:
    async with (
        as_user(shared, ALICE) as alice,
        as_user(shared, BOB) as bob,
        # A session fork (createSession.fork) exists only at 0.7.
        as_user(shared, BOB, protocol_versions=["0.7.0"]) as older_bob,
    ):
        chat = await alice.open_chat()
        session = session_of(shared.host, chat)
        for call in (
            bob.subscribe(session, timeout=TIMEOUT),
            bob.subscribe(chat, timeout=TIMEOUT),
            bob.request("fetchTurns", {"channel": chat}, timeout=TIMEOUT),
            bob.create_chat(session, timeout=TIMEOUT),
            bob.dispose_chat(chat, timeout=TIMEOUT),
            bob.dispose_session(session, timeout=TIMEOUT),
            older_bob.request(
                "createSession",
                {
                    "channel": "ahp-session:/00000000-0000-4000-8000-000000000001",
                    "fork": {"session": session, "turnId": "t"},
                },
                timeout=TIMEOUT,
            ),
        ):
            error = await refused(call)
            assert error.code == PERMISSION_DENIED, error
            assert "another user" in error.message
        await bob.ping()  # the connection survives
        # Alice's session is whole and still hers.
        await alice.subscribe(chat)
        await alice.ask(chat, "still mine", timeout=TIMEOUT)
        assert await listed(alice) == {session}


async def test_a_dispatch_to_another_users_chat_is_rejected_and_not_applied(
    shared: RunningHost,
) -> None:
    async with as_user(shared, ALICE) as alice, as_user(shared, BOB) as bob:
        chat = await alice.open_chat()
        await alice.subscribe(chat)
        draft = ChatDraftChangedAction(
            draft=Message(text="bob was here", origin=MessageOrigin(kind="user"))
        )
        seq = await bob.dispatch(chat, draft)

        def answered(c: AhpClient) -> bool:
            return any(getattr(e.origin, "client_seq", None) == seq for e in c.envelopes)

        await bob.wait_for(answered, timeout=TIMEOUT)
        echo = next(e for e in bob.envelopes if getattr(e.origin, "client_seq", None) == seq)
        assert "permission denied" in str(echo.rejection_reason)
        await alice.ask(chat, "hi", timeout=TIMEOUT)  # a later envelope has reached alice
        state = alice.confirmed(chat, ChatState)
        assert turn_done(alice, chat)
        assert not isinstance(state.draft, Message)


async def test_a_flood_of_dispatches_to_another_users_chat_never_reaches_its_actor(
    shared: RunningHost,
) -> None:
    async with as_user(shared, ALICE) as alice, as_user(shared, BOB) as bob:
        chat = await alice.open_chat()
        actor = await shared.host.actor(chat)
        assert actor is not None
        # Alice's chat is busy: anything sent to its actor now waits in its inbox.
        gate = asyncio.Event()
        busy = asyncio.ensure_future(actor.call(gate.wait))
        draft = ChatDraftChangedAction(draft=Message(text="x", origin=MessageOrigin(kind="user")))
        seqs = [await bob.dispatch(chat, draft) for _ in range(20)]

        def refused(c: AhpClient) -> bool:
            answered = {getattr(e.origin, "client_seq", None) for e in c.envelopes}
            return answered >= set(seqs)

        # Bob is answered while alice's chat is still held, and its inbox holds none of it.
        await bob.wait_for(refused, timeout=TIMEOUT)
        assert actor.inbox.qsize() == 0
        gate.set()
        await asyncio.wait_for(busy, TIMEOUT)


async def test_an_admin_may_subscribe_to_any_users_session(shared: RunningHost) -> None:
    async with as_user(shared, ALICE) as alice, as_user(shared, ROOT_TOKEN) as root:
        chat = await alice.open_chat()
        await root.subscribe(chat)
        await root.subscribe(session_of(shared.host, chat))


# -- client ids ---------------------------------------------------------------------------------


async def test_another_user_cannot_take_over_a_client_id(shared: RunningHost) -> None:
    async with as_user(shared, ALICE) as alice:
        chat = await alice.open_chat()
        for connecting in (
            as_user(shared, BOB, client_id=alice.client_id),
            as_user(shared, ROOT_TOKEN, client_id=alice.client_id),
        ):
            error = await refused(connecting)
            assert error.code == PERMISSION_DENIED
        async with connect(shared.url, additional_headers={"Authorization": f"Bearer {BOB}"}) as ws:
            await ws.send(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "reconnect",
                        "params": {
                            "channel": "ahp-root://",
                            "clientId": alice.client_id,
                            "lastSeenServerSeq": 0,
                            "subscriptions": [chat],
                        },
                    }
                )
            )
            async with asyncio.timeout(TIMEOUT):
                answer = json.loads(await ws.recv())
            assert answer["error"]["code"] == PERMISSION_DENIED
        # Alice was not disturbed.
        assert not alice.closed
        await alice.ask(chat, "still here", timeout=TIMEOUT)


async def test_a_refused_handshake_leaves_the_connection_uninitialized(
    shared: RunningHost, tmp_path: Path
) -> None:
    """Issue 26: an ``initialize`` or ``reconnect`` refused with -32009 changes nothing
    about the connection. It is not left READY under the id it may not hold — so it
    cannot create a terminal claimed by that id, which would land in its user's
    catalogue: its next requests get -32600 as before ``initialize``, and it may
    still initialize as itself."""
    work = tmp_path / "bob-work"
    work.mkdir()
    async with (
        as_user(shared, ALICE, subscriptions=[ROOT]) as alice,
        as_user(shared, BOB) as bob,
    ):
        await bob.create_session(working_directories=[work.as_uri()])
        hers = {"channel": ROOT, "clientId": alice.client_id}
        terminal = {
            "channel": "ahp-terminal:/00000000-0000-4000-8000-0000000000bb",
            "claim": {"kind": "client", "clientId": alice.client_id},
            "cwd": work.as_uri(),
        }
        bearer = {"Authorization": f"Bearer {BOB}"}
        async with connect(shared.url, additional_headers=bearer) as ws:
            for method, params in (
                ("initialize", {**hers, "protocolVersions": ["0.7.0"]}),
                ("reconnect", {**hers, "lastSeenServerSeq": 0, "subscriptions": []}),
            ):
                answer = await rpc(ws, method, params)
                assert answer["error"]["code"] == PERMISSION_DENIED, answer
                for later, later_params in (
                    ("listSessions", {"channel": ROOT}),
                    ("createTerminal", terminal),
                ):
                    answer = await rpc(ws, later, later_params)
                    assert answer["error"]["code"] == INVALID_REQUEST, (method, later, answer)
            own = {"channel": ROOT, "protocolVersions": ["0.7.0"], "clientId": "bobs-raw-client"}
            assert (await rpc(ws, "initialize", own))["result"]["protocolVersion"] == "0.7.0"
        assert not alice.closed
        await alice.ping()
        assert terminals(alice) == set()
        assert shared.host.live_clients[alice.client_id].user == "alice"


# -- the workspace ------------------------------------------------------------------------------


async def test_resource_commands_are_confined_to_the_users_own_sessions(
    shared: RunningHost, tmp_path: Path
) -> None:
    hers = tmp_path / "alice-work"
    hers.mkdir()
    (hers / "plan.md").write_text("alice's plan")
    uri = (hers / "plan.md").as_uri()
    async with as_user(shared, ALICE) as alice, as_user(shared, BOB) as bob:
        await alice.create_session(working_directories=[hers.as_uri()])
        read = await alice.request(
            "resourceRead", {"channel": "ahp-root://", "uri": uri, "encoding": "utf-8"}
        )
        assert read["data"] == "alice's plan"
        error = await refused(
            bob.request(
                "resourceRead",
                {"channel": "ahp-root://", "uri": uri, "encoding": "utf-8"},
                timeout=TIMEOUT,
            )
        )
        assert error.code == PERMISSION_DENIED


# -- ownership survives a restart ---------------------------------------------------------------


async def test_ownership_is_kept_across_a_restart(tmp_path: Path) -> None:
    settings = Settings(users=USERS, data_dir=str(tmp_path / "data"))
    running = await start_host(settings)
    try:
        async with as_user(running, ALICE) as alice:
            session = await alice.create_session()
    finally:
        await running.stop()
    running = await start_host(settings)
    try:
        async with as_user(running, ALICE) as alice, as_user(running, BOB) as bob:
            assert await listed(alice) == {session}
            assert await listed(bob) == set()
            error = await refused(bob.subscribe(session, timeout=TIMEOUT))
            assert error.code == PERMISSION_DENIED
    finally:
        await running.stop()


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
async def test_a_client_id_stays_its_users_across_a_restart(tmp_path: Path, store: str) -> None:
    """The clientId -> user binding is kept with the remembered clients: after a
    restart another user still cannot claim alice's client id (-32009), alice can."""
    async with contextlib.AsyncExitStack() as stack:
        if store == "sqlite":
            settings = Settings(users=USERS, data_dir=str(tmp_path / "data"))
        else:
            url = await stack.enter_async_context(postgres_schema())
            settings = Settings(users=USERS, store=url)
        running = await start_host(settings)
        try:
            async with as_user(running, ALICE) as alice:
                client_id = alice.client_id
                await alice.ping()
        finally:
            await running.stop()
        running = await start_host(settings)
        try:
            for token in (BOB, ROOT_TOKEN):
                error = await refused(as_user(running, token, client_id=client_id))
                assert error.code == PERMISSION_DENIED
            async with as_user(running, ALICE, client_id=client_id) as alice:
                await alice.ping()
        finally:
            await running.stop()


async def test_no_flood_of_new_client_ids_frees_a_live_or_claimed_id(tmp_path: Path) -> None:
    """Issue 26: remembered client ids are bounded per user (``limits.known_clients``
    each). Another user's flood of new ids forgets only their own; a user's own flood
    forgets their oldest idle ids but never a live one nor one a terminal's client
    claim names. So nobody else can take such an id over (-32009) — neither closing
    its live connection (1008) nor reaching the terminal it claims."""
    settings = Settings(users=USERS, data_dir=str(tmp_path / "data"), known_clients=3)
    running = await start_host(settings)
    work = tmp_path / "alice-work"
    work.mkdir()

    async def flood(token: str, count: int) -> None:
        for _ in range(count):
            async with as_user(running, token) as client:
                await client.ping()

    async def bob_takes(client_id: str) -> int:
        return (await refused(as_user(running, BOB, client_id=client_id))).code

    try:
        async with as_user(running, ALICE) as alice:
            await alice.create_session(working_directories=[work.as_uri()])
            async with as_user(running, ALICE) as second:
                terminal = await create_terminal(second, cwd=work.as_uri())
            claimed = second.client_id  # gone, but its terminal's claim names it
            async with as_user(running, ALICE) as third:
                await third.ping()
            idle = third.client_id
            # Alice's ids fill her bound (3): bob's new ids never touch them.
            await flood(BOB, 5)
            for client_id in (alice.client_id, claimed, idle):
                assert await bob_takes(client_id) == PERMISSION_DENIED
            # Her own new ids: her idle one goes, the live and the claimed ones stay hers.
            await flood(ALICE, 5)
            for client_id in (alice.client_id, claimed):
                assert await bob_takes(client_id) == PERMISSION_DENIED
            assert not alice.closed
            await alice.ping()
            async with as_user(running, BOB) as bob:
                error = await refused(bob.subscribe(terminal, timeout=TIMEOUT))
                assert error.code == PERMISSION_DENIED
            await alice.request("disposeTerminal", {"channel": terminal}, timeout=TIMEOUT)
    finally:
        await running.stop()


async def test_a_terminal_claimed_by_another_users_session_is_refused(
    shared: RunningHost, tmp_path: Path
) -> None:
    work = tmp_path / "alice-work"
    work.mkdir()
    async with as_user(shared, ALICE) as alice, as_user(shared, BOB) as bob:
        session = await alice.create_session(working_directories=[work.as_uri()])
        terminal = "ahp-terminal:/00000000-0000-4000-8000-0000000000aa"
        claim = TerminalSessionClaim(session=session, chat=await default_chat_of(alice, session))
        error = await refused(
            bob.request(
                "createTerminal",
                CreateTerminalParams(channel=terminal, claim=claim),
                timeout=TIMEOUT,
            )
        )
        assert error.code == PERMISSION_DENIED
        await alice.request(
            "createTerminal", CreateTerminalParams(channel=terminal, claim=claim), timeout=TIMEOUT
        )
        await alice.subscribe(terminal)
        for call in (
            bob.subscribe(terminal, timeout=TIMEOUT),
            bob.request("disposeTerminal", {"channel": terminal}, timeout=TIMEOUT),
        ):
            error = await refused(call)
            assert error.code == PERMISSION_DENIED
        await alice.request("disposeTerminal", {"channel": terminal}, timeout=TIMEOUT)


# -- the root channel's terminal catalogue ------------------------------------------------------


def terminals(client: AhpClient) -> set[str]:
    listed = client.confirmed("ahp-root://", RootState).terminals
    return set() if isinstance(listed, UnsetType) else {t.resource for t in listed}


async def test_each_user_sees_only_their_own_terminals_in_the_root_channel(
    shared: RunningHost, tmp_path: Path
) -> None:
    """RootState.terminals and root/terminalsChanged carry only the terminals of the
    sessions and clients the user may see — live, in a snapshot and in a replay
    alike (same serverSeq, no gap); an admin sees all. docs/protocol.md."""
    hers, his = tmp_path / "alice-work", tmp_path / "bob-work"
    hers.mkdir()
    his.mkdir()
    root_channel = ["ahp-root://"]
    async with (
        as_user(shared, ALICE, subscriptions=root_channel) as alice,
        as_user(shared, BOB, subscriptions=root_channel) as bob,
        as_user(shared, ROOT_TOKEN, subscriptions=root_channel) as admin,
    ):
        session = await alice.create_session(working_directories=[hers.as_uri()])
        await bob.create_session(working_directories=[his.as_uri()])
        chat = await default_chat_of(alice, session)
        by_session = await create_terminal(
            alice, claim=TerminalSessionClaim(session=session, chat=chat)
        )
        by_alice = await create_terminal(alice, cwd=hers.as_uri())
        by_bob = await create_terminal(bob, cwd=his.as_uri())
        await admin.wait_for(
            lambda c: terminals(c) == {by_session, by_alice, by_bob}, timeout=TIMEOUT
        )
        await alice.wait_for(lambda c: terminals(c) == {by_session, by_alice}, timeout=TIMEOUT)
        await bob.wait_for(lambda c: terminals(c) == {by_bob}, timeout=TIMEOUT)
        # Every root envelope reached every root subscriber (no gap), each showing
        # only its user's terminals.
        root_seqs = {
            client.client_id: [e.server_seq for e in client.envelopes if e.channel == "ahp-root://"]
            for client in (alice, bob, admin)
        }
        assert root_seqs[alice.client_id] == root_seqs[bob.client_id] == root_seqs[admin.client_id]
        for envelope in bob.envelopes:
            if isinstance(envelope.action, RootTerminalsChangedAction):
                assert {t.resource for t in envelope.action.terminals} <= {by_bob}
        # A snapshot, and a replay, show the same.
        async with as_user(shared, BOB, subscriptions=root_channel) as later:
            assert terminals(later) == {by_bob}
        assert await bob.reconnect(timeout=TIMEOUT) == "replay"
        assert terminals(bob) == {by_bob}
        assert await alice.reconnect(timeout=TIMEOUT) == "replay"
        assert terminals(alice) == {by_session, by_alice}
        # Another user's terminal channels, session- or client-claimed, are refused.
        for uri in (by_session, by_alice):
            error = await refused(bob.subscribe(uri, timeout=TIMEOUT))
            assert error.code == PERMISSION_DENIED
        # Nor can bob hand his terminal to alice's session: he would lose it to her.
        seq = await bob.dispatch(
            by_bob, TerminalClaimedAction(claim=TerminalSessionClaim(session=session, chat=chat))
        )
        assert "permission denied" in str((await echoed(bob, seq)).rejection_reason)
        assert terminals(bob) == {by_bob}
        for client, uri in ((alice, by_alice), (alice, by_session), (bob, by_bob)):
            await client.request("disposeTerminal", {"channel": uri}, timeout=TIMEOUT)


# -- every channel has an owner (issue 26) ------------------------------------------------------


async def test_a_changeset_uri_is_checked_as_the_session_it_serves(shared: RunningHost) -> None:
    """Issue 26: ``ahp-changeset:/alice%2Fsecret/…`` is a changeset of
    ``ahp-session:/alice/secret`` — its key is percent-decoded — for the access check
    as for the changeset service (both read it with ``protocol/uris.py``). Bob's own
    ``ahp-session:/alice%2Fsecret`` does not open alice's changesets to him."""
    async with as_user(shared, ALICE) as alice, as_user(shared, BOB) as bob:
        await alice.create_session(session="ahp-session:/alice/secret")
        await bob.create_session(session="ahp-session:/alice%2Fsecret")
        for uri in (
            "ahp-changeset:/alice%2Fsecret/changeset/session",
            "ahp-changeset:/alice%2Fsecret/turns/t1",
        ):
            error = await refused(bob.subscribe(uri, timeout=TIMEOUT))
            assert error.code == PERMISSION_DENIED, uri
        await alice.subscribe(  # hers
            "ahp-changeset:/alice%2Fsecret/changeset/session", timeout=TIMEOUT
        )
        # Issue 29: a turn nobody made has no changeset (no actor is made for it).
        error = await refused(alice.subscribe("ahp-changeset:/alice%2Fsecret/turns/t1"))
        assert error.code == NOT_FOUND
        # Bob's session's changesets are his: its id is one segment, encoded once more.
        await bob.subscribe("ahp-changeset:/alice%252Fsecret/changeset/session", timeout=TIMEOUT)


async def test_session_and_chat_uris_must_be_in_normal_form(shared: RunningHost) -> None:
    """Issue 26: ``createSession``/``createChat`` refuse (-32602) a URI that is not in
    RFC 3986 normal form — an escaped unreserved character, lowercase hex in an
    escape, a dot-segment — so two spellings never name one session; and a session
    URI that would name another session's annotations channel."""
    async with as_user(shared, ALICE) as alice:
        for uri in (
            "ahp-session:/alice%2fsecret",
            "ahp-session:/%61lice",
            "ahp-session:/x/../alice",
            "ahp-session:/alice%zz",
            "ahp-session:/alice/annotations",
        ):
            error = await refused(alice.create_session(session=uri, timeout=TIMEOUT))
            assert error.code == INVALID_PARAMS, uri
        chat = await alice.open_chat()
        session = session_of(shared.host, chat)
        for uri in ("ahp-chat:/%7Eme", "ahp-chat:/me%2f", "ahp-chat:/./me"):
            error = await refused(alice.create_chat(session, chat=uri, timeout=TIMEOUT))
            assert error.code == INVALID_PARAMS, uri
        await alice.create_session(session="ahp-session:/alice%2Fsecret", timeout=TIMEOUT)
        await alice.create_chat(session, chat="ahp-chat:/~me", timeout=TIMEOUT)
        assert "ahp-session:/alice%2Fsecret" in await listed(alice)


async def test_another_users_resource_watch_is_refused(shared: RunningHost, tmp_path: Path) -> None:
    """Issue 26: a resource watch is its creator's user's: another user who learns its
    ``ahp-resource-watch:`` URI is refused (-32009), on ``subscribe`` and in a
    ``reconnect`` (missing); an admin may subscribe."""
    hers = tmp_path / "alice-work"
    hers.mkdir()
    async with (
        as_user(shared, ALICE) as alice,
        as_user(shared, BOB) as bob,
        as_user(shared, ROOT_TOKEN) as admin,
    ):
        await alice.create_session(working_directories=[hers.as_uri()])
        channel = await watch(alice, hers)
        await alice.subscribe(channel, timeout=TIMEOUT)
        error = await refused(bob.subscribe(channel, timeout=TIMEOUT))
        assert error.code == PERMISSION_DENIED
        async with connect(shared.url, additional_headers={"Authorization": f"Bearer {BOB}"}) as ws:
            answer = await rpc(
                ws,
                "reconnect",
                {
                    "channel": ROOT,
                    "clientId": bob.client_id,
                    "lastSeenServerSeq": 0,
                    "subscriptions": [channel],
                },
            )
            assert answer["result"]["missing"] == [channel], answer
        await admin.subscribe(channel, timeout=TIMEOUT)


async def test_a_user_at_the_watch_quota_is_refused_and_another_user_still_watches(
    tmp_path: Path,
) -> None:
    """``workspace.max_watches_per_user``: a user's watches count across their connections;
    over the quota -32602 names the setting; another user is unaffected."""
    settings = Settings(users=USERS, data_dir=str(tmp_path / "data"), max_watches_per_user=2)
    running = await start_host(settings)
    hers, his = tmp_path / "alice-work", tmp_path / "bob-work"
    hers.mkdir()
    his.mkdir()
    try:
        async with (
            as_user(running, ALICE) as alice,
            as_user(running, ALICE) as alice_again,
            as_user(running, BOB) as bob,
        ):
            await alice.create_session(working_directories=[hers.as_uri()])
            await bob.create_session(working_directories=[his.as_uri()])
            await watch(alice, hers)
            await watch(alice_again, hers)  # another connection: the user's count, not its own
            for client in (alice, alice_again):
                error = await refused(
                    client.request(
                        "createResourceWatch",
                        {"channel": ROOT, "uri": hers.as_uri()},
                        timeout=TIMEOUT,
                    )
                )
                assert error.code == INVALID_PARAMS
                assert "workspace.max_watches_per_user" in error.message
            assert await watch(bob, his)
            assert await watch(bob, his)
    finally:
        await running.stop()


async def test_a_connection_without_a_user_sees_only_the_root_channel(
    shared: RunningHost, tmp_path: Path
) -> None:
    """Issue 26: in multi-user mode no user never means "everything". A connection
    whose identity is lost (as a relayed one's is when its edge forwards none,
    ``transport/relay.py``) lists no session, sees no terminal in the root channel,
    and is refused (-32009) every other channel — even those of the user whose token
    it came in with."""
    work = tmp_path / "alice-work"
    work.mkdir()
    async with as_user(shared, ALICE) as alice, as_user(shared, ALICE) as nobody:
        chat = await alice.open_chat()
        session = await alice.create_session(working_directories=[work.as_uri()])
        terminal = await create_terminal(alice, cwd=work.as_uri())
        channel = await watch(alice, work)
        await alice.subscribe(channel, timeout=TIMEOUT)
        changeset = f"ahp-changeset:/{session.removeprefix('ahp-session:/')}/changeset/session"
        connection = shared.host.live_clients[nobody.client_id]
        connection.user, connection.admin = None, False  # its identity is lost
        assert await listed(nobody) == set()
        await nobody.subscribe(ROOT, timeout=TIMEOUT)
        assert terminals(nobody) == set()
        for uri in (session_of(shared.host, chat), chat, session, terminal, channel, changeset):
            error = await refused(nobody.subscribe(uri, timeout=TIMEOUT))
            assert error.code == PERMISSION_DENIED, uri
        # Nor may it make anything or touch a file: no owner, no roots.
        error = await refused(nobody.create_session(timeout=TIMEOUT))
        assert error.code == PERMISSION_DENIED
        error = await refused(create_terminal(nobody, cwd=work.as_uri()))
        assert error.code == PERMISSION_DENIED
        error = await refused(
            nobody.request("resourceRead", {"channel": ROOT, "uri": work.as_uri()}, timeout=TIMEOUT)
        )
        assert error.code == PERMISSION_DENIED
        assert await listed(alice) == {session_of(shared.host, chat), session}


async def test_a_user_at_the_terminal_quota_is_refused_and_another_is_not(
    tmp_path: Path,
) -> None:
    """Issue 29: terminals are bounded per user (``workspace.max_terminals_per_user``)
    as well as per host, so one user cannot take every terminal."""
    settings = Settings(
        users=USERS, max_terminals=8, max_terminals_per_user=2, terminal_shell=("/bin/sh",)
    )
    running = await start_host(settings)
    hers, his = tmp_path / "alice-work", tmp_path / "bob-work"
    hers.mkdir()
    his.mkdir()
    try:
        async with as_user(running, ALICE) as alice, as_user(running, BOB) as bob:
            session = await alice.create_session(working_directories=[hers.as_uri()])
            await bob.create_session(working_directories=[his.as_uri()])
            chat = await default_chat_of(alice, session)
            # Two of Alice's: one her client holds, one her session does.
            await create_terminal(alice, cwd=hers.as_uri())
            await create_terminal(alice, claim=TerminalSessionClaim(session=session, chat=chat))
            error = await refused(create_terminal(alice, cwd=hers.as_uri()))
            assert error.code == INVALID_PARAMS
            assert "max_terminals_per_user" in str(error)
            assert "'alice' already has 2 terminals" in str(error)
            # Bob is not held back by Alice's terminals (the host has room for 8).
            await create_terminal(bob, cwd=his.as_uri())
            await create_terminal(bob, cwd=his.as_uri())
            assert (await refused(create_terminal(bob, cwd=his.as_uri()))).code == INVALID_PARAMS
            assert len(running.host.workspace_channels) == 4
    finally:
        await running.stop()
