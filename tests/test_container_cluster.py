"""Cluster mode's container files: docker-compose.cluster.yml and config/Caddyfile.cluster.

Like tests/test_container.py (whose helpers these share), no Docker engine is
needed: the files are read, compose's ``${VAR}`` interpolation is done here,
and the nodes' resolved environment is loaded with the server's own settings
loader, so a compose file the server would refuse fails here.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

# _KEYS: every TOML key the loader accepts, so a new cluster.* key must be documented.
from ahp_server.config import _KEYS, ENVIRONMENT, Settings, load_settings
from tests.test_container import (
    DOCKERFILE,
    ROOT,
    _Health,
    env_pairs,
    environment,
    final_stage,
    health_server,  # noqa: F401 (a fixture)
    parse_dockerfile,
    published_ports,
    run_python_check,
)

COMPOSE = ROOT / "docker-compose.cluster.yml"
CADDYFILE = ROOT / "config" / "Caddyfile.cluster"
CONFIG = ROOT / "config" / "ahp-server.toml"
DEPLOY_DOC = ROOT / "docs" / "deploy.md"

NODES = ("ahp-1", "ahp-2", "ahp-3")
SECRETS = ("AHP_SERVER_TOKEN", "POSTGRES_PASSWORD", "NATS_PASSWORD", "AHP_SERVER_CLUSTER_SECRET")

#: What a .env could hold: the values compose substitutes for ``${VAR}``.
DOTENV = {
    "AHP_DOMAIN": "ahp.example.com",
    "ACME_EMAIL": "ops@example.com",
    "AHP_SERVER_TOKEN": "0123456789abcdef0123456789abcdef",
    "POSTGRES_PASSWORD": "fedcba9876543210fedcba9876543210",
    "NATS_PASSWORD": "00112233445566778899aabbccddeeff",
    "AHP_SERVER_CLUSTER_SECRET": "ffeeddccbbaa99887766554433221100",
}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))  # resolves << merge keys
    assert isinstance(data, dict)
    return data


def interpolate(value: str, variables: dict[str, str]) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?error}``."""

    def one(match: re.Match[str]) -> str:
        name, operator, word = match.group(1), match.group(2), match.group(3)
        if variables.get(name):
            return variables[name]
        if operator == ":?":
            raise KeyError(f"{name}: {word}")
        return word or ""

    return re.sub(r"\$\{(\w+)(?:(:[-?])([^}]*))?\}", one, value)


def caddy_code() -> str:
    text = CADDYFILE.read_text(encoding="utf-8")
    return "\n".join(line.split("#")[0] for line in text.splitlines())


def seconds(duration: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", duration)
    assert match, f"a Caddy duration, not {duration!r}"
    return float(match.group(1)) * {"ms": 0.001, "s": 1.0, "m": 60.0}[match.group(2)]


def test_three_nodes_of_one_image_beside_postgres_nats_and_caddy(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {*NODES, "postgres", "nats", "caddy"}
    for name in NODES:
        node = services[name]
        assert node["build"] == "."
        assert node["image"] == services[NODES[0]]["image"], "the same image everywhere"
        # A node that loses its lease exits non-zero and must come back as an edge.
        assert node["restart"] == "unless-stopped"
        for dependency in ("postgres", "nats"):
            assert node["depends_on"][dependency]["condition"] == "service_healthy"
    for name in ("postgres", "nats", "caddy"):
        assert services[name]["restart"] == "unless-stopped"
    image = services["caddy"]["image"]
    assert re.fullmatch(r"caddy:2\.\d+[\w.-]*", image), f"pin the proxy's tag, not {image}"


def test_nodes_share_token_store_and_bus_and_differ_in_node_id(compose: dict[str, Any]) -> None:
    envs = [environment(compose["services"][name]) for name in NODES]
    ids = [env["AHP_SERVER_NODE_ID"] for env in envs]
    assert len(set(ids)) == len(NODES), f"distinct node ids, not {ids}"
    for key in (
        "AHP_SERVER_TOKEN",
        "AHP_SERVER_STORE",
        "AHP_SERVER_BUS",
        "AHP_SERVER_BUS_USER",
        "AHP_SERVER_BUS_PASSWORD",
        "AHP_SERVER_CLUSTER_SECRET",
    ):
        assert len({env[key] for env in envs}) == 1, f"{key} differs between the nodes"
    env = envs[0]
    assert env["AHP_SERVER_TOKEN"].startswith("${AHP_SERVER_TOKEN:?")
    assert re.fullmatch(
        r"postgres://ahp:\$\{POSTGRES_PASSWORD:\?[^}]*\}@postgres:5432/ahp", env["AHP_SERVER_STORE"]
    ), env["AHP_SERVER_STORE"]
    assert env["AHP_SERVER_BUS"] == "nats://nats:4222"
    assert env["AHP_SERVER_BUS_PASSWORD"].startswith("${NATS_PASSWORD:?")
    assert env["AHP_SERVER_CLUSTER_SECRET"].startswith("${AHP_SERVER_CLUSTER_SECRET:?")
    for env in envs:
        assert set(env) <= set(ENVIRONMENT), "every variable is one the server reads"


def test_each_node_loads_as_a_cluster_node(compose: dict[str, Any]) -> None:
    """What the image sets plus what compose passes is a valid cluster configuration."""
    image_env = env_pairs(final_stage(parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))))
    for name in NODES:
        env = {k: interpolate(v, DOTENV) for k, v in environment(compose["services"][name]).items()}
        settings = load_settings(None, environ={**image_env, **env})
        assert settings.host == "0.0.0.0"
        assert settings.token == DOTENV["AHP_SERVER_TOKEN"]
        assert settings.bus == "nats://nats:4222"
        password = DOTENV["POSTGRES_PASSWORD"]
        assert settings.store == f"postgres://ahp:{password}@postgres:5432/ahp"
        assert settings.node_id == name
        assert settings.port == Settings().port
        # The bus: NATS's credentials, and the secret the nodes sign with.
        assert settings.bus_user == "ahp"
        assert settings.bus_password == DOTENV["NATS_PASSWORD"]
        assert settings.cluster_secret == DOTENV["AHP_SERVER_CLUSTER_SECRET"]


def test_the_mode_and_placement_come_from_dotenv_primary_by_default(
    compose: dict[str, Any],
) -> None:
    """``AHP_SERVER_CLUSTER_MODE`` / ``AHP_SERVER_PLACEMENT`` in .env reach every node;
    unset, the nodes run active/passive (docs/deploy.md "Sharded mode")."""
    image_env = env_pairs(final_stage(parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))))
    sharded = {**DOTENV, "AHP_SERVER_CLUSTER_MODE": "sharded", "AHP_SERVER_PLACEMENT": "local"}
    for dotenv, mode, placement in (
        (DOTENV, "primary", "least-loaded"),
        (sharded, "sharded", "local"),
    ):
        for name in NODES:
            service = compose["services"][name]
            env = {k: interpolate(v, dotenv) for k, v in environment(service).items()}
            settings = load_settings(None, environ={**image_env, **env})
            assert (settings.cluster_mode, settings.placement) == (mode, placement)


def test_secrets_come_from_dotenv_and_are_required() -> None:
    text = COMPOSE.read_text(encoding="utf-8")
    for secret in SECRETS:
        uses = re.findall(rf"\$\{{{secret}(:.)?", text)
        assert uses, f"{secret} comes from .env"
        assert set(uses) == {":?"}, f"{secret} is required (:?) everywhere, never defaulted"
    store = environment(yaml.safe_load(text)["services"]["ahp-1"])["AHP_SERVER_STORE"]
    with pytest.raises(KeyError, match="POSTGRES_PASSWORD"):
        interpolate(store, {})  # compose refuses to start without it
    header = text.split("\nname:")[0]
    for variable in DOTENV:
        assert f"#   {variable}=" in header, f"the header shows {variable} in .env"


def test_only_caddy_publishes_ports(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        assert service.get("network_mode") != "host", name
        if name != "caddy":
            assert "ports" not in service, f"{name} must not publish a port"
    for name in NODES:
        expose = {str(port) for port in compose["services"][name].get("expose", [])}
        assert expose <= {str(Settings().port)}
    assert {"443/tcp", "80/tcp"} <= published_ports(compose["services"]["caddy"])


def test_nodes_keep_nothing_on_disk(compose: dict[str, Any]) -> None:
    """State is in PostgreSQL; the image's /data (AHP_SERVER_DATA_DIR) gets a tmpfs."""
    for name in NODES:
        node = compose["services"][name]
        assert "volumes" not in node, f"{name}: no data volume, the store is PostgreSQL"
        assert "/data" in [entry.split(":")[0] for entry in node["tmpfs"]], (
            "a tmpfs on the image's VOLUME /data, not an anonymous volume per node"
        )
        assert node["read_only"] is True


def test_node_healthcheck_and_graceful_stop(
    compose: dict[str, Any],
    health_server: tuple[int, type[_Health]],  # noqa: F811 (the imported fixture)
) -> None:
    port, handler = health_server
    for name in NODES:
        node = compose["services"][name]
        test = node["healthcheck"]["test"]
        assert test[0] == "CMD"
        assert "/healthz" in test[-1]
        handler.status = 200
        assert run_python_check(test[1:], port) == 0
        handler.status = 500
        assert run_python_check(test[1:], port) != 0
        assert node.get("stop_signal", "SIGTERM") == "SIGTERM"
        grace = re.fullmatch(r"(\d+)s", str(node["stop_grace_period"]))
        assert grace, node["stop_grace_period"]
        assert int(grace.group(1)) > 10, "longer than Docker's 10 s default"


def test_postgres_is_pinned_persistent_healthchecked_and_password_protected(
    compose: dict[str, Any],
) -> None:
    postgres = compose["services"]["postgres"]
    image = postgres["image"]
    assert re.fullmatch(r"postgres:\d+(-[a-z0-9]+)?", image), f"pin the major version: {image}"
    mounts = [entry.split(":") for entry in postgres["volumes"]]
    assert ["pg-data", "/var/lib/postgresql/data"] in mounts
    assert "pg-data" in compose["volumes"]
    test = postgres["healthcheck"]["test"]
    assert "pg_isready" in " ".join(test)
    env = environment(postgres)
    assert env["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")
    assert env["POSTGRES_USER"] == "ahp"
    assert env["POSTGRES_DB"] == "ahp"


def test_nats_is_pinned_with_jetstream_on_a_volume_and_healthchecked(
    compose: dict[str, Any],
) -> None:
    nats = compose["services"]["nats"]
    image = nats["image"]
    assert re.fullmatch(r"nats:2\.\d+[\w.-]*", image), f"pin the tag: {image}"
    command = nats["command"]
    assert "-js" in command
    store_dir = command[command.index("-sd") + 1]
    mounts = [entry.split(":") for entry in nats["volumes"]]
    assert [volume for volume, target in mounts if target == store_dir], "JetStream on a volume"
    assert all(volume in compose["volumes"] for volume, _ in mounts)
    assert command[command.index("-m") + 1] == "8222"
    assert "http://127.0.0.1:8222/healthz" in nats["healthcheck"]["test"]


def test_nats_requires_the_user_and_password_the_nodes_are_given(
    compose: dict[str, Any],
) -> None:
    command = compose["services"]["nats"]["command"]
    user = command[command.index("--user") + 1]
    password = interpolate(command[command.index("--pass") + 1], DOTENV)
    assert password == DOTENV["NATS_PASSWORD"]
    with pytest.raises(KeyError, match="NATS_PASSWORD"):  # compose refuses to start without it
        interpolate(command[command.index("--pass") + 1], {})
    for name in NODES:
        env = {k: interpolate(v, DOTENV) for k, v in environment(compose["services"][name]).items()}
        assert (env["AHP_SERVER_BUS_USER"], env["AHP_SERVER_BUS_PASSWORD"]) == (user, password)
        assert "@" not in env["AHP_SERVER_BUS"], "the credentials are given apart, not in the URL"


def test_caddy_mounts_the_cluster_caddyfile(compose: dict[str, Any]) -> None:
    caddy = compose["services"]["caddy"]
    assert "./config/Caddyfile.cluster:/etc/caddy/Caddyfile:ro" in caddy["volumes"]
    assert "caddy-data:/data" in caddy["volumes"]
    for variable in ("AHP_DOMAIN", "ACME_EMAIL"):
        assert f"{{${variable}}}" in CADDYFILE.read_text(encoding="utf-8")
        assert environment(caddy)[variable].startswith(f"${{{variable}:?")


def test_caddy_balances_over_exactly_the_three_nodes_by_readyz() -> None:
    code = caddy_code()
    assert code.count("{") == code.count("}")
    proxies = re.findall(r"reverse_proxy\s+([^{\n]+)\{", code)
    assert len(proxies) == 1, proxies
    assert set(proxies[0].split()) == {f"{name}:{Settings().port}" for name in NODES}
    assert len(proxies[0].split()) == len(NODES)
    assert re.search(r"lb_policy\s+\w+", code)
    assert re.search(r"health_uri\s+/readyz\b", code)
    assert re.search(r"@metrics\s+path\s+/metrics", code)
    assert re.search(r"respond\s+@metrics\s+40[34]", code)
    # A connection attempt during a failover waits for the next primary.
    retry = re.search(r"lb_try_duration\s+(\S+)", code)
    assert retry, "retry another node while none is ready"
    interval = re.search(r"health_interval\s+(\S+)", code)
    assert interval
    lease = Settings().lease_ttl
    assert seconds(retry.group(1)) > lease * 4 / 3 + seconds(interval.group(1))


def test_the_shipped_config_documents_the_cluster_settings() -> None:
    text = CONFIG.read_text(encoding="utf-8")
    table = text.split("\n[cluster]\n")[1].split("\n[")[0]
    for key in (k for k in _KEYS if k.startswith("cluster.")):
        name = key.removeprefix("cluster.")
        assert re.search(rf"^(# )?{name} = ", table, re.MULTILINE), f"{key} is documented"
    for variable in ENVIRONMENT:
        assert variable in text, f"{variable} is listed in the header"


def test_deploy_guide_explains_several_nodes() -> None:
    text = DEPLOY_DOC.read_text(encoding="utf-8")
    section = text.split("\n## Several nodes\n")[1].split("\n## ")[0]
    for needle in (
        "scale-out.md",
        "docker-compose.cluster.yml",
        "AHP_SERVER_STORE",
        "AHP_SERVER_BUS",
        "AHP_SERVER_NODE_ID",
        "POSTGRES_PASSWORD",
        "NATS_PASSWORD",
        "AHP_SERVER_CLUSTER_SECRET",
        "scale-out.md#authentication",
        "1012",
        "lease_ttl",
        "shared storage",
        "/readyz",
    ):
        assert needle in section, needle
    assert (ROOT / "docs" / "scale-out.md").exists()
