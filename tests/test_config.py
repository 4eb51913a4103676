"""Configuration: the shipped file, environment overrides, and errors that name the key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ahp_server.config import (
    AgentConfig,
    ConfigError,
    Settings,
    load_settings,
)

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "config" / "ahp-server.toml"


def test_the_shipped_file_holds_the_built_in_defaults() -> None:
    loaded = load_settings(SHIPPED, environ={})
    assert loaded == Settings()  # every documented value is the real default


def test_environment_overrides_the_file_and_flags_override_both() -> None:
    settings = load_settings(
        SHIPPED,
        environ={
            "AHP_SERVER_HOST": "0.0.0.0",
            "AHP_SERVER_PORT": "9000",
            "AHP_SERVER_TOKEN": "s3cret",
            "AHP_SERVER_ALLOWED_ORIGINS": "https://a.example, https://b.example",
            "AHP_SERVER_DATA_DIR": "/var/lib/ahp",
            "AHP_SERVER_LOG_FORMAT": "json",
            "AHP_SERVER_MAX_CONNECTIONS_PER_IP": "1000",
            "AHP_SERVER_TRUSTED_PROXIES": "10.1.2.3/8, fd00::1, 192.0.2.7",
        },
        overrides={"server.port": 9100},
    )
    assert settings.host == "0.0.0.0"
    assert settings.port == 9100
    assert settings.token == "s3cret"
    assert settings.allowed_origins == ("https://a.example", "https://b.example")
    assert settings.data_dir == "/var/lib/ahp"
    assert settings.log_format == "json"
    assert settings.max_connections_per_ip == 1000
    # Networks as written (host bits dropped); a lone address is its own /32 or /128.
    assert settings.trusted_proxies == ("10.0.0.0/8", "fd00::1/128", "192.0.2.7/32")


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ("[server]\nport = 70000\n", "server.port"),
        ('[server]\nport = "http"\n', "server.port"),
        ("[server]\nallowed_origins = 'x'\n", "server.allowed_origins"),
        ("[server]\ntrusted_proxies = ['proxy.local']\n", "server.trusted_proxies"),
        ("[server]\ntrusted_proxies = '10.0.0.0/8'\n", "server.trusted_proxies"),
        ('[storage]\ndurability = "sometimes"\n', "storage.durability"),
        ("[limits]\nmax_connections = 0\n", "limits.max_connections"),
        ("[storage]\nmemory_turn_bytes = 0\n", "storage.memory_turn_bytes"),
        # A chat snapshot must fit in the outbox (default 32 MiB) with room to spare.
        ("[storage]\nsnapshot_turn_bytes = 20000000\n", "storage.snapshot_turn_bytes"),
        # The host-wide outbox budget holds one client's outbox beside the reads.
        ("[limits]\noutbox_total_bytes = 40000000\n", "limits.outbox_total_bytes"),
        ("[server]\nhots = 'typo'\n", "server.hots"),
        ('[server]\nhost = "0.0.0.0"\n', "server.token"),
        ("not = [valid toml", "config"),
        # Cluster mode needs the PostgreSQL the nodes share.
        ('[cluster]\nbus = "nats://127.0.0.1:4222"\n', "cluster.bus"),
        ('[cluster]\nbus = "http://nats:4222"\n', "cluster.bus"),
        ('[cluster]\nnode_id = "a b"\n', "cluster.node_id"),
        ('[cluster]\nname = "a.b"\n', "cluster.name"),
        ("[cluster]\nlease_ttl = 0\n", "cluster.lease_ttl"),
        # Three heartbeats (how long an edge waits for the primary) fit in a lease.
        ("[cluster]\nlease_ttl = 2.0\nheartbeat = 1.0\n", "cluster.heartbeat"),
        ("[cluster]\nfeed_grace = 0\n", "cluster.feed_grace"),
        ('[cluster]\nfeed_stall = "5s"\n', "cluster.feed_stall"),
        ("[cluster]\nfeed_stall = -1.0\n", "cluster.feed_stall"),
        # A gap is read from the log after the grace: the stall bound comes later.
        ("[cluster]\nfeed_grace = 2.0\nfeed_stall = 1.0\n", "cluster.feed_stall"),
    ],
)
def test_invalid_settings_name_their_key(tmp_path: Path, toml: str, key: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(toml, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={})
    assert caught.value.key == key
    assert str(caught.value).startswith(key)


def test_a_bad_environment_value_names_its_key() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(None, environ={"AHP_SERVER_PORT": "eighty"})
    assert caught.value.key == "server.port"


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m ahp_server ARGS``, with ``env`` added to the environment."""
    return subprocess.run(
        [sys.executable, "-m", "ahp_server", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )


def programs(folder: Path, *names: str) -> str:
    """Executable files ``names`` in ``folder`` (made); a PATH that finds them first."""
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / name).write_text("#!/bin/sh\n", encoding="utf-8")
        (folder / name).chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ.get('PATH', os.defpath)}"


def test_check_config_accepts_the_shipped_default() -> None:
    result = run_cli("check-config", "--config", str(SHIPPED))
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout


def test_serve_with_a_bad_config_exits_with_one_line_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[server]\nport = -1\n", encoding="utf-8")
    result = run_cli("serve", "--config", str(path))
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "server.port" in lines[0]


def test_serve_refuses_a_public_address_without_a_token() -> None:
    result = run_cli("serve", "--host", "0.0.0.0", "--data-dir", ":memory:")
    assert result.returncode != 0
    assert "server.token" in result.stderr


AGENTS = """
[providers]
default = "claude"

[[agents]]
name = "claude"
display_name = "Claude Code"
command = "npx"
args = ["-y", "@zed-industries/claude-code-acp"]
pass_env = ["ANTHROPIC_API_KEY"]
env = { CLAUDE_MODE = "plain" }

[[agents]]
name = "gemini"
command = "gemini"
args = ["--experimental-acp"]
process = "chat"
turn_timeout = 600
idle_timeout = 0
"""


def test_agents_tables_load_with_every_field(tmp_path: Path) -> None:
    path = tmp_path / "agents.toml"
    path.write_text(AGENTS, encoding="utf-8")
    settings = load_settings(path, environ={})
    assert settings.default_provider == "claude"
    claude, gemini = settings.agents
    assert claude == AgentConfig(
        name="claude",
        display_name="Claude Code",
        command="npx",
        args=("-y", "@zed-industries/claude-code-acp"),
        pass_env=("ANTHROPIC_API_KEY",),
        env=(("CLAUDE_MODE", "plain"),),
    )
    assert (gemini.process, gemini.turn_timeout, gemini.title) == ("chat", 600.0, "gemini")
    assert (claude.idle_timeout, gemini.idle_timeout) == (900.0, None)  # 0: never


def test_agents_from_the_environment_add_to_and_override_the_file(tmp_path: Path) -> None:
    path = tmp_path / "agents.toml"
    path.write_text(AGENTS, encoding="utf-8")
    settings = load_settings(
        path,
        environ={
            "AHP_SERVER_AGENTS_CLAUDE_CODE_COMMAND": "claude-code-acp",
            "AHP_SERVER_AGENTS_CLAUDE_CODE_ARGS": "--flag 'two words'",
            "AHP_SERVER_AGENTS_CLAUDE_CODE_PASS_ENV": "ANTHROPIC_API_KEY, HTTPS_PROXY",
            "AHP_SERVER_AGENTS_CLAUDE_CODE_DISPLAY_NAME": "Claude Code",
            "AHP_SERVER_AGENTS_GEMINI_TURN_TIMEOUT": "30",
            "AHP_SERVER_DEFAULT_PROVIDER": "claude_code",
        },
    )
    agents = {a.name: a for a in settings.agents}
    code = agents["claude_code"]
    assert code.command == "claude-code-acp"
    assert code.args == ("--flag", "two words")
    assert code.pass_env == ("ANTHROPIC_API_KEY", "HTTPS_PROXY")
    assert code.display_name == "Claude Code"
    assert agents["gemini"].turn_timeout == 30.0
    assert agents["gemini"].command == "gemini"  # the file's other fields stay
    assert settings.default_provider == "claude_code"


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ('[[agents]]\nname = "x"\n', "agents[0].command"),
        ('[[agents]]\ncommand = "x"\n', "agents[0].name"),
        ('[[agents]]\nname = "Bad Name"\ncommand = "x"\n', "agents[0].name"),
        ('[[agents]]\nname = "echo"\ncommand = "x"\n', "agents[0].name"),
        ('[[agents]]\nname = "a"\ncommand = "x"\nprocess = "thread"\n', "agents[0].process"),
        ('[[agents]]\nname = "a"\ncommand = "x"\nkind = "magic"\n', "agents[0].kind"),
        ('[[agents]]\nname = "a"\ncommand = "x"\ncomand = "y"\n', "agents[0].comand"),
        ('[[agents]]\nname = "a"\ncommand = "x"\nargs = "-v"\n', "agents[0].args"),
        ('[[agents]]\nname = "a"\ncommand = "x"\nenv = { A = 1 }\n', "agents[0].env"),
        (
            '[[agents]]\nname = "a"\ncommand = "x"\n[[agents]]\nname = "a"\ncommand = "y"\n',
            "agents[1].name",
        ),
        ('[providers]\ndefault = "nobody"\n', "providers.default"),
    ],
)
def test_invalid_agents_name_their_key(tmp_path: Path, toml: str, key: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(toml, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={})
    assert caught.value.key == key


def test_an_unknown_agent_variable_names_itself() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(None, environ={"AHP_SERVER_AGENTS_CLAUDE_COMMANDO": "x"})
    assert caught.value.key == "AHP_SERVER_AGENTS_CLAUDE_COMMANDO"


def test_the_pre_agents_settings_table_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "old.toml"
    path.write_text(
        '[agents]\ndefault_provider = "echo"\nclient_tool_timeout = 5.0\n', encoding="utf-8"
    )
    assert load_settings(path, environ={}).client_tool_timeout == 5.0


def test_check_config_validates_agents(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text(AGENTS, encoding="utf-8")
    # Its programs exist here: the configuration is whole.
    path = programs(tmp_path / "bin", "npx", "gemini")
    result = run_cli("check-config", "--config", str(good), env={"PATH": path})
    assert result.returncode == 0, result.stderr
    assert "configuration ok" in result.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text('[[agents]]\nname = "x"\n', encoding="utf-8")
    result = run_cli("check-config", "--config", str(bad))
    assert result.returncode == 2
    assert "agents[0].command" in result.stderr


@pytest.mark.parametrize(
    "placement",
    [
        ["--data-dir", "{a}", "check-config"],
        ["check-config", "--data-dir", "{a}"],
        ["--data-dir", "{b}", "check-config", "--data-dir", "{a}"],
    ],
)
def test_host_options_count_before_or_after_the_command(
    tmp_path: Path, placement: list[str]
) -> None:
    """``ahp-server --data-dir X serve`` used the default folder: the command's
    own copy of each option reset it. Given either side, it counts; given on
    both, the command's wins."""
    folders = {"a": str(tmp_path / "a"), "b": str(tmp_path / "b")}
    result = run_cli(*(word.format(**folders) for word in placement))
    assert result.returncode == 0, result.stderr
    # check-config names the database folder among the folders never served.
    assert folders["a"] in result.stdout
    assert folders["b"] not in result.stdout


def test_check_config_names_every_missing_program_and_root(tmp_path: Path) -> None:
    """docs/deploy.md "Checking a configuration": one line per problem, naming its key."""
    not_executable = tmp_path / "agent.py"
    not_executable.write_text("print()\n", encoding="utf-8")
    (tmp_path / "projects").mkdir()
    token = tmp_path / "token"
    token.write_text("alice-token-0123456789abcdef\n", encoding="utf-8")
    agents = [
        ("here", sys.executable, ""),
        ("fast", "fast-agent-not-installed", ""),
        ("gone", str(tmp_path / "gone" / "agent"), ""),
        ("plain", str(not_executable), ""),
        # Looked up on the PATH the agent gets: its own env's.
        (
            "own",
            "own-agent",
            f"env = {{ PATH = {json.dumps(programs(tmp_path / 'own', 'own-agent'))} }}\n",
        ),
    ]
    config = tmp_path / "ahp.toml"
    config.write_text(
        f"[workspace]\nroots = [{json.dumps(str(tmp_path / 'projects'))}, "
        f"{json.dumps(str(tmp_path / 'missing'))}, {json.dumps(str(token))}]\n"
        + "".join(
            f"[[agents]]\nname = {json.dumps(name)}\ncommand = {json.dumps(command)}\n{extra}"
            for name, command, extra in agents
        )
        + '[[agents]]\nname = "model"\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'model = "m"\n'
        f'[[users]]\nname = "alice"\ntoken_file = {json.dumps(str(token))}\n'
        f"roots = [{json.dumps(str(tmp_path / 'alice'))}]\n",
        encoding="utf-8",
    )
    result = run_cli(
        "check-config", "--config", str(config), env={"AHP_SERVER_AGENTS_ENVY_COMMAND": "envy-x"}
    )
    assert result.returncode == 1
    assert "configuration ok" not in result.stdout
    assert result.stderr.splitlines() == [
        "ahp-server: agents[1].command: 'fast-agent-not-installed' is not on PATH",
        f"ahp-server: agents[2].command: '{tmp_path / 'gone' / 'agent'}' does not exist",
        f"ahp-server: agents[3].command: '{not_executable}' is not executable",
        "ahp-server: AHP_SERVER_AGENTS_ENVY_COMMAND: 'envy-x' is not on PATH",
        f"ahp-server: workspace.roots: '{tmp_path / 'missing'}' does not exist",
        f"ahp-server: workspace.roots: '{token}' is not a directory",
        f"ahp-server: users[0].roots: '{tmp_path / 'alice'}' does not exist",
    ]


def test_serve_refuses_a_missing_root_and_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    result = run_cli(
        "serve",
        "--data-dir",
        ":memory:",
        "--port",
        "0",
        env={"AHP_SERVER_WORKSPACE_ROOTS": str(missing)},
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"ahp-server: invalid configuration: workspace.roots: '{missing}' does not exist"
    ]


def test_serve_refuses_uvloop_where_it_is_not_installed(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    (blocked / "uvloop").mkdir(parents=True)
    (blocked / "uvloop" / "__init__.py").write_text("raise ImportError('not here')\n")
    result = run_cli(
        "serve",
        "--data-dir",
        ":memory:",
        "--port",
        "0",
        env={"PYTHONPATH": str(blocked), "AHP_SERVER_EVENT_LOOP": "uvloop"},
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "ahp-server: invalid configuration: server.event_loop: "
        '"uvloop" is not installed: pip install uvloop'
    ]


def test_the_event_loop_setting_takes_three_values(tmp_path: Path) -> None:
    for value in ("auto", "uvloop", "asyncio"):
        path = tmp_path / f"{value}.toml"
        path.write_text(f'[server]\nevent_loop = "{value}"\n', encoding="utf-8")
        assert load_settings(path, environ={}).event_loop == value
    assert Settings().event_loop == "auto"
    path = tmp_path / "bad.toml"
    path.write_text('[server]\nevent_loop = "trio"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"server\.event_loop"):
        load_settings(path, environ={})
    with pytest.raises(ConfigError, match=r"server\.event_loop: must be .*not 'fast'"):
        load_settings(None, environ={"AHP_SERVER_EVENT_LOOP": "fast"})
    assert load_settings(None, environ={"AHP_SERVER_EVENT_LOOP": "asyncio"}).event_loop == "asyncio"


# -- [[users]] (multi-user mode, issue 16) ------------------------------------------------------


def test_users_load_their_tokens_from_the_environment_or_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "ops-token"
    secret.write_text("ops-token-0123456789abcdef\n", encoding="utf-8")
    path = tmp_path / "users.toml"
    path.write_text(
        '[[users]]\nname = "alice"\ntoken_env = "ALICE_TOKEN"\n\n'
        f'[[users]]\nname = "ops"\ntoken_file = "{secret}"\nadmin = true\n',
        encoding="utf-8",
    )
    settings = load_settings(path, environ={"ALICE_TOKEN": "alice-token-0123456789abcdef"})
    alice, ops = settings.users
    assert (alice.name, alice.token, alice.admin) == (
        "alice",
        "alice-token-0123456789abcdef",
        False,
    )
    assert (ops.name, ops.token, ops.admin) == ("ops", "ops-token-0123456789abcdef", True)
    assert "0123456789abcdef" not in repr(settings)  # a token is never printed


@pytest.mark.parametrize(
    ("toml", "environ", "key"),
    [
        ('[[users]]\nname = "a"\n', {}, "users[0].token_env"),
        ('[[users]]\nname = "a"\ntoken_env = "T"\n', {}, "users[0].token_env"),
        ('[[users]]\nname = "a"\ntoken_env = "T"\n', {"T": "short"}, "users[0].token_env"),
        ('[[users]]\nname = "a b"\ntoken_env = "T"\n', {"T": "x" * 16}, "users[0].name"),
        (
            '[[users]]\nname = "a"\ntoken_env = "T"\nadmin = "yes"\n',
            {"T": "x" * 16},
            "users[0].admin",
        ),
        ('[[users]]\nname = "a"\ntoken_file = "/nonexistent/t"\n', {}, "users[0].token_file"),
        ('[[users]]\nname = "a"\ntoken_env = "T"\nrole = "x"\n', {"T": "x" * 16}, "users[0].role"),
        (
            '[[users]]\nname = "a"\ntoken_env = "T"\n[[users]]\nname = "a"\ntoken_env = "U"\n',
            {"T": "x" * 16, "U": "y" * 16},
            "users[1].name",
        ),
        (
            '[server]\ntoken = "single"\n[[users]]\nname = "a"\ntoken_env = "T"\n',
            {"T": "x" * 16},
            "server.token",
        ),
    ],
)
def test_invalid_users_name_their_key(
    tmp_path: Path, toml: str, environ: dict[str, str], key: str
) -> None:
    path = tmp_path / "users.toml"
    path.write_text(toml, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ=environ)
    assert caught.value.key == key
    assert "x" * 16 not in str(caught.value)


CLUSTER_SECRET = "cluster-secret-0123456789abcdef"
BUS_PASSWORD = "bus-password-fedcba9876543210"


def test_a_cluster_node_from_the_environment() -> None:
    settings = load_settings(
        environ={
            "AHP_SERVER_STORE": "postgres://ahp:secret@db:5432/ahp",
            "AHP_SERVER_BUS": "nats://nats:4222",
            "AHP_SERVER_NODE_ID": "ahp-2",
            "AHP_SERVER_CLUSTER_NAME": "prod",
            "AHP_SERVER_BUS_USER": "ahp",
            "AHP_SERVER_BUS_PASSWORD": BUS_PASSWORD,
            "AHP_SERVER_CLUSTER_SECRET": CLUSTER_SECRET,
        }
    )
    assert (settings.bus, settings.node_id, settings.cluster_name) == (
        "nats://nats:4222",
        "ahp-2",
        "prod",
    )
    assert (settings.lease_ttl, settings.heartbeat) == (10.0, 1.0)
    assert (settings.bus_user, settings.bus_password) == ("ahp", BUS_PASSWORD)
    assert settings.cluster_secret == CLUSTER_SECRET
    # Never printed: check-config, an exception, a debugger show the repr.
    assert BUS_PASSWORD not in repr(settings)
    assert CLUSTER_SECRET not in repr(settings)
    assert load_settings(environ={}).bus is None  # one process: no bus, no cluster


def test_the_feed_bounds_come_from_the_file_or_the_environment(tmp_path: Path) -> None:
    defaults = load_settings(environ={})
    assert (defaults.feed_grace, defaults.feed_stall) == (0.05, 5.0)
    path = tmp_path / "node.toml"
    path.write_text("[cluster]\nfeed_grace = 0.2\nfeed_stall = 12\n", encoding="utf-8")
    settings = load_settings(path, environ={})
    assert (settings.feed_grace, settings.feed_stall) == (0.2, 12.0)
    settings = load_settings(path, environ={"AHP_SERVER_FEED_STALL": "30"})
    assert (settings.feed_grace, settings.feed_stall) == (0.2, 30.0)
    with pytest.raises(ConfigError) as caught:
        load_settings(path, environ={"AHP_SERVER_FEED_GRACE": "soon"})
    assert caught.value.key == "cluster.feed_grace"


def test_the_cluster_secret_and_bus_password_can_come_from_files(tmp_path: Path) -> None:
    (tmp_path / "secret").write_text(CLUSTER_SECRET + "\n", encoding="utf-8")
    (tmp_path / "password").write_text(BUS_PASSWORD + "\n", encoding="utf-8")
    path = tmp_path / "node.toml"
    path.write_text(
        '[storage]\nstore = "postgres://db/ahp"\n'
        '[cluster]\nbus = "nats://nats:4222"\nbus_user = "ahp"\n'
        f'bus_password_file = "{tmp_path / "password"}"\n',
        encoding="utf-8",
    )
    settings = load_settings(
        path, environ={"AHP_SERVER_CLUSTER_SECRET_FILE": str(tmp_path / "secret")}
    )
    assert (settings.bus_password, settings.cluster_secret) == (BUS_PASSWORD, CLUSTER_SECRET)


NODE = {"AHP_SERVER_STORE": "postgres://db/ahp", "AHP_SERVER_BUS": "nats://nats:4222"}


@pytest.mark.parametrize(
    ("environ", "key"),
    [
        # The secret is required in cluster mode, and long enough.
        ({}, "cluster.secret"),
        ({"AHP_SERVER_CLUSTER_SECRET": "   "}, "cluster.secret"),
        ({"AHP_SERVER_CLUSTER_SECRET": "fifteen-bytes.."}, "cluster.secret"),
        # As it is or from a file, not both; a file that cannot be read.
        (
            {
                "AHP_SERVER_CLUSTER_SECRET": CLUSTER_SECRET,
                "AHP_SERVER_CLUSTER_SECRET_FILE": __file__,  # readable: both are given
            },
            "cluster.secret_file",
        ),
        ({"AHP_SERVER_CLUSTER_SECRET_FILE": "/nonexistent/secret"}, "cluster.secret_file"),
        # NATS's user and password go together, and in one place.
        (
            {"AHP_SERVER_CLUSTER_SECRET": CLUSTER_SECRET, "AHP_SERVER_BUS_USER": "ahp"},
            "cluster.bus_password",
        ),
        (
            {"AHP_SERVER_CLUSTER_SECRET": CLUSTER_SECRET, "AHP_SERVER_BUS_PASSWORD": BUS_PASSWORD},
            "cluster.bus_user",
        ),
        (
            {
                "AHP_SERVER_CLUSTER_SECRET": CLUSTER_SECRET,
                "AHP_SERVER_BUS": f"nats://ahp:{BUS_PASSWORD}@nats:4222",
                "AHP_SERVER_BUS_USER": "ahp",
                "AHP_SERVER_BUS_PASSWORD": BUS_PASSWORD,
            },
            "cluster.bus_user",
        ),
        (
            {
                "AHP_SERVER_CLUSTER_SECRET": CLUSTER_SECRET,
                "AHP_SERVER_BUS_USER": "ahp",
                "AHP_SERVER_BUS_PASSWORD_FILE": "/nonexistent/password",
            },
            "cluster.bus_password_file",
        ),
    ],
)
def test_cluster_credentials_name_their_key_and_are_never_echoed(
    environ: dict[str, str], key: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={**NODE, **environ})
    assert caught.value.key == key
    assert CLUSTER_SECRET not in str(caught.value)
    assert BUS_PASSWORD not in str(caught.value)
    assert "fifteen" not in str(caught.value)


def test_one_process_needs_no_cluster_secret() -> None:
    assert load_settings(environ={"AHP_SERVER_STORE": "postgres://db/ahp"}).cluster_secret is None


def test_serve_without_the_cluster_secret_exits_naming_it() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ahp_server", "serve"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("AHP_SERVER_")}, **NODE},
    )
    assert result.returncode != 0
    assert "cluster.secret" in result.stderr


def test_a_bad_bus_url_is_not_echoed() -> None:
    """The URL may carry credentials: the error names the key, never the value."""
    with pytest.raises(ConfigError) as caught:
        load_settings(
            environ={"AHP_SERVER_STORE": "postgres://db/ahp", "AHP_SERVER_BUS": "nats//u:pw@x"}
        )
    assert caught.value.key == "cluster.bus"
    assert "pw" not in str(caught.value)
