"""Who may see what, and which client ids are remembered (host/host.py; issue 26).

The end-to-end tests over real sockets are in ``tests/e2e/test_multiuser.py``;
these pin the two decisions they cannot reach directly: a channel whose session
cannot be told is refused in multi-user mode, and the per-user order of known
client ids is rebuilt from the store at start.
"""

from __future__ import annotations

from pathlib import Path

from ahp_server.config import Settings, UserConfig
from ahp_server.host.core.fanout import Connection
from ahp_server.host.host import Host
from tests.host.test_hub_vacated import NullTransport

USERS = (
    UserConfig(name="alice", token="alice-token-0123456789abcdef"),
    UserConfig(name="root", token="admin-token-0123456789abcdef", admin=True),
)
#: Channels whose session the host cannot tell: no kind it knows, and a changeset
#: URI that is not the canonical spelling of any.
UNTOLD = ("ahp-other:/x", "ahp-changeset:/alice%2fsecret/changeset/session")


def connection(user: str | None = None, *, admin: bool = False) -> Connection:
    made = Connection(NullTransport(), max_frames=10, max_bytes=1000)
    made.user, made.admin = user, admin
    return made


async def test_no_user_and_no_session_mean_nothing_in_multi_user_mode() -> None:
    host = Host(Settings(users=USERS))
    alice, nobody, admin = connection("alice"), connection(), connection("root", admin=True)
    for channel in UNTOLD:
        assert not host.may_access(alice, channel), channel
        assert not host.may_access(nobody, channel), channel
        assert host.may_access(admin, channel), channel
    for viewer in (alice, nobody, admin):
        assert host.may_access(viewer, "ahp-root://")
    assert not host.may_see(nobody, "ahp-session:/s1")


async def test_without_users_everyone_is_the_one_user() -> None:
    host = Host(Settings())
    for channel in (*UNTOLD, "ahp-root://", "ahp-session:/s1"):
        assert host.may_access(connection(), channel)


async def test_the_per_user_order_of_known_clients_is_rebuilt_at_start(tmp_path: Path) -> None:
    settings = Settings(users=USERS, data_dir=str(tmp_path), known_clients=2)
    host = Host(settings)
    await host.start()
    for client_id, user in (("a1", "alice"), ("a2", "alice"), ("r1", "root")):
        host.client_users[client_id] = user
        host.remember_client(client_id, "0.7.0")
    await host.stop()
    host = Host(settings)
    await host.start()
    try:
        for n in range(3):  # root's new ids forget only root's
            host.client_users[f"r{n + 2}"] = "root"
            host.remember_client(f"r{n + 2}", "0.7.0")
        assert {"a1", "a2"} <= set(host.clients)
        assert "r1" not in host.clients
        host.client_users["a3"] = "alice"
        host.remember_client("a3", "0.7.0")  # alice's oldest (as stored) goes
        assert "a1" not in host.clients
        assert host.client_users.get("a1") is None
        assert {"a2", "a3"} <= set(host.clients)
    finally:
        await host.stop()
    again = Host(settings)
    await again.start()
    try:
        assert set(again.clients) == {"a2", "a3", "r3", "r4"}
    finally:
        await again.stop()


async def test_an_id_remembered_without_a_user_moves_to_the_user_who_claims_it(
    tmp_path: Path,
) -> None:
    """An id stored with no user (before multi-user mode) is in the no-user bucket
    until a user claims it; then it is that user's alone — ids without a user
    coming and going never forget it."""
    settings = Settings(data_dir=str(tmp_path), known_clients=2)
    host = Host(settings)  # single-token mode: stored with no user
    await host.start()
    host.remember_client("old", "0.7.0")
    await host.stop()
    host = Host(Settings(users=USERS, data_dir=str(tmp_path), known_clients=2))
    await host.start()
    try:
        host.client_users["old"] = "alice"
        host.remember_client("old", "0.7.0")
        for n in range(3):  # ids of connections with no user
            host.client_users[f"nobody-{n}"] = None
            host.remember_client(f"nobody-{n}", "0.7.0")
        assert host.client_users.get("old") == "alice"
        assert "old" in host.clients
    finally:
        await host.stop()
