"""The container files: Dockerfile, .dockerignore, docker-compose.yml, config/Caddyfile.

The cluster compose file and its Caddyfile: tests/test_container_cluster.py.

No Docker engine is needed: these read the files (and run the health-check
one-liners against a local HTTP server), so a broken promise of docs/deploy.md
fails here rather than on a production host.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml  # PyYAML (the `test` extra): the standard library has no YAML parser
from packaging.requirements import Requirement  # pytest's own dependency

from ahp_server.cli import build_parser
from ahp_server.config import ENVIRONMENT, Settings

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "docker-compose.yml"
CADDYFILE = ROOT / "config" / "Caddyfile"
DEPLOY_DOC = ROOT / "docs" / "deploy.md"

BUILD_TOOLS = ("gcc", "g++", "build-essential", "python3-dev", "libc6-dev", "clang", "make")


# -- Dockerfile -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    stage: int  # index of the FROM this instruction belongs to
    keyword: str  # upper case
    args: str


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined; comments and directives dropped."""
    instructions: list[Instruction] = []
    stage = -1
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1].rstrip() + " "
            continue
        full = (pending + line).strip()
        pending = ""
        keyword, _, args = full.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            stage += 1
        instructions.append(Instruction(stage, keyword, args.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return instructions


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8"))


def final_stage(instructions: list[Instruction]) -> list[Instruction]:
    last = max(i.stage for i in instructions)
    return [i for i in instructions if i.stage == last]


def only(instructions: list[Instruction], keyword: str) -> list[Instruction]:
    return [i for i in instructions if i.keyword == keyword]


def exec_form(args: str) -> list[str]:
    value = json.loads(args)
    assert isinstance(value, list)
    assert all(isinstance(item, str) for item in value)
    return value


def env_pairs(instructions: list[Instruction]) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for instruction in only(instructions, "ENV"):
        for word in shlex.split(instruction.args):
            key, sep, value = word.partition("=")
            assert sep, f"use ENV KEY=VALUE, not {instruction.args!r}"
            pairs[key] = value
    return pairs


def test_parser_joins_continuations_and_counts_stages() -> None:
    parsed = parse_dockerfile(
        "# syntax=docker/dockerfile:1\nFROM a AS b\nRUN x \\\n  # note\n  && y\nFROM c\nUSER 1\n"
    )
    assert [(i.stage, i.keyword, i.args) for i in parsed] == [
        (0, "FROM", "a AS b"),
        (0, "RUN", "x && y"),
        (1, "FROM", "c"),
        (1, "USER", "1"),
    ]


def test_multi_stage_build_on_a_python_311_slim_image_pinned_by_digest(
    dockerfile: list[Instruction],
) -> None:
    froms = only(dockerfile, "FROM")
    assert len(froms) >= 2, "a builder stage and a final stage"
    images = {instruction.args.split()[0] for instruction in froms}
    assert len(images) == 1, f"both stages start from the same base: {images}"
    image = images.pop()
    # A tag moves; a digest names one multi-platform index forever (docs/deploy.md
    # "Reproducible builds"). The full version in the tag says which one it is.
    match = re.fullmatch(r"python:(3\.11\.\d+)-slim-bookworm@sha256:([0-9a-f]{64})", image)
    assert match, f"pin python:3.11.<patch>-slim-bookworm@sha256:<digest>, not {image}"
    deploy = DEPLOY_DOC.read_text(encoding="utf-8")
    assert match.group(2) in deploy, "docs/deploy.md names the digest it pins and how to refresh it"
    builder = froms[0].args.split()
    assert [word.lower() for word in builder[1:]] == ["as", "builder"]
    builder_runs = " ".join(i.args for i in dockerfile if i.stage == 0 and i.keyword == "RUN")
    assert "pip wheel" in builder_runs
    assert "--no-deps" in builder_runs


def test_final_stage_has_no_build_tools_and_no_pip_cache(dockerfile: list[Instruction]) -> None:
    final = final_stage(dockerfile)
    for instruction in final:
        words = set(re.split(r"[\s;&|=]+", instruction.args))
        assert not words & set(BUILD_TOOLS), f"build tools in the final stage: {instruction}"
        assert "apt-get install" not in instruction.args, instruction
    installs = [i for i in only(final, "RUN") if "pip install" in i.args]
    assert installs, "the final stage installs the wheels"
    for instruction in installs:
        assert "--no-cache-dir" in instruction.args
        assert "--no-index" in instruction.args, "only the builder's wheels, nothing fetched"
        assert "from=builder" in instruction.args
    for instruction in only(final, "COPY") + only(final, "ADD"):
        assert not re.match(r"^\.\s", instruction.args), "no source tree in the final image"


def test_the_image_installs_the_locked_dependencies_and_the_cluster_extra(
    dockerfile: list[Instruction],
) -> None:
    """asyncpg and nats-py: one image runs SQLite, the PostgreSQL store and cluster mode.

    Every dependency comes from requirements.lock (its versions and hashes:
    tests/test_lock.py), never from pyproject.toml's lower bounds.
    """
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    assert set(extras["postgres"]) <= set(extras["cluster"]), "cluster includes the store"
    builder = [i for i in dockerfile if i.stage == 0]
    builder_runs = [i.args for i in only(builder, "RUN")]
    # The builder turns exactly the lock into wheels, checking every file's hash.
    wheels = [run for run in builder_runs if "pip wheel" in run and "--no-deps" not in run]
    assert len(wheels) == 1, builder_runs
    words = wheels[0].split()
    assert "--require-hashes" in words
    assert words[words.index("--requirement") + 1] == "requirements.lock"
    copies = [i.args.split() for i in only(builder, "COPY")]
    lock_copy = next(c for c in copies if "requirements.lock" in c[:-1])
    assert builder.index(next(i for i in builder if i.args.split() == lock_copy)) < builder.index(
        next(i for i in builder if i.args == wheels[0])
    ), "the lock is copied before the wheels are built"
    # The one requirement the final stage installs: the project's wheel with the extra.
    writes = [run for run in builder_runs if "--no-deps" in run]
    assert len(writes) == 1, builder_runs
    assert "set -- /wheels/ahp_server-*.whl" in writes[0]
    echo = re.search(r'echo "([^"]+)" > (/wheels/\S+)', writes[0])
    assert echo, writes[0]
    line, path = echo.groups()
    wheel = "/wheels/ahp_server-0.1.0-py3-none-any.whl"
    requirement = Requirement(line.replace("$1", wheel))
    assert requirement.name == "ahp-server"
    assert requirement.extras == {"cluster"}
    assert requirement.url == f"file://{wheel}"
    installs = [i.args for i in only(final_stage(dockerfile), "RUN") if "pip install" in i.args]
    assert len(installs) == 1
    # No index: pip finds the dependencies only among the locked wheels.
    assert "--no-index" in installs[0]
    assert "--find-links=/wheels" in installs[0]
    assert f"--requirement {path}" in installs[0]
    assert "target=/wheels" in installs[0]
    assert "pip check" in installs[0], "the build proves no dependency is missing"
    assert re.search(r"import asyncpg, nats\b", installs[0]), "the build proves the extra is in"


def test_final_stage_runs_as_a_fixed_non_root_uid(dockerfile: list[Instruction]) -> None:
    final = final_stage(dockerfile)
    users = only(final, "USER")
    assert users, "the final stage must switch away from root"
    user = users[-1].args
    match = re.fullmatch(r"(\d+):(\d+)", user)
    assert match, f"USER must be numeric UID:GID (Kubernetes runAsNonRoot), not {user!r}"
    uid, gid = match.groups()
    assert int(uid) != 0
    assert int(gid) != 0
    setup = " ".join(i.args for i in only(final, "RUN"))
    assert f"--uid {uid}" in setup
    assert f"--gid {gid}" in setup
    assert f"chown {uid}:{gid} /data /workspace" in setup, "the volumes belong to the user"
    assert final.index(users[-1]) > max(final.index(i) for i in only(final, "RUN"))


def test_volume_env_port_and_stop_signal(dockerfile: list[Instruction]) -> None:
    final = final_stage(dockerfile)
    volumes = [i.args for i in only(final, "VOLUME")]
    assert volumes == ['["/data", "/workspace"]']
    env = env_pairs(final)
    assert env["AHP_SERVER_HOST"] == "0.0.0.0"
    assert env["AHP_SERVER_DATA_DIR"] == "/data"
    # A host reachable from elsewhere has no workspace root unless one is set.
    assert env["AHP_SERVER_WORKSPACE_ROOTS"] == "/workspace"
    assert env["AHP_SERVER_LOG_FORMAT"] == "json"
    assert set(env) - set(ENVIRONMENT) <= {
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED",
        "PIP_DISABLE_PIP_VERSION_CHECK",
        "PIP_NO_CACHE_DIR",
        "PIP_ROOT_USER_ACTION",
    }, "every AHP_SERVER_* variable the image sets is one the server reads"
    assert [i.args for i in only(final, "EXPOSE")] == [str(Settings().port)]
    assert [i.args for i in only(final, "STOPSIGNAL")] == ["SIGTERM"]


def test_no_token_is_baked_into_the_image(dockerfile: list[Instruction]) -> None:
    for instruction in only(dockerfile, "ENV") + only(dockerfile, "ARG"):
        assert "AHP_SERVER_TOKEN" not in instruction.args


def test_entrypoint_is_the_console_script_in_exec_form(dockerfile: list[Instruction]) -> None:
    final = final_stage(dockerfile)
    entrypoints = only(final, "ENTRYPOINT")
    commands = only(final, "CMD")
    assert len(entrypoints) == 1
    assert len(commands) == 1
    assert exec_form(entrypoints[0].args) == ["ahp-server"]  # PID 1 gets SIGTERM itself
    assert exec_form(commands[0].args) == ["serve"]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "ahp-server" in pyproject["project"]["scripts"]


class _Health(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        code = type(self).status if self.path == "/healthz" else 404
        self.send_response(code)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def health_server() -> Iterator[tuple[int, type[_Health]]]:
    handler = type("Handler", (_Health,), {"status": 200})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], handler
    finally:
        server.shutdown()
        server.server_close()


def run_python_check(argv: list[str], port: int) -> int:
    """Run a health check's ``python -c CODE`` here, aimed at ``port``."""
    assert argv[:2] == ["python", "-c"], argv
    code = argv[2].replace(f":{Settings().port}/", f":{port}/")
    env = {**os.environ, "AHP_SERVER_PORT": str(port)}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, timeout=30, check=False
    )
    return result.returncode


def test_healthcheck_uses_the_stdlib_on_healthz(
    dockerfile: list[Instruction], health_server: tuple[int, type[_Health]]
) -> None:
    checks = only(final_stage(dockerfile), "HEALTHCHECK")
    assert len(checks) == 1
    options, _, command = checks[0].args.partition("CMD ")
    assert "--interval=" in options
    assert "--timeout=" in options
    argv = exec_form(command)
    assert "/healthz" in argv[-1]
    assert not {"curl", "wget"} & set(argv), "slim images have no curl"
    port, handler = health_server
    assert run_python_check(argv, port) == 0
    handler.status = 503
    assert run_python_check(argv, port) != 0, "an unhealthy answer must fail the check"


def dockerignored(patterns: list[str], path: str) -> bool:
    """Whether Docker leaves ``path`` out of the build context (last match wins)."""
    parts = path.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.removeprefix("!").strip("/")
        regex = re.escape(pattern).replace(r"\*\*/", "(?:.*/)?").replace(r"\*", "[^/]*")
        regex = regex.replace(r"\?", "[^/]").replace(r"\[", "[").replace(r"\]", "]")
        if any(re.fullmatch(regex, candidate) for candidate in candidates):
            excluded = not negate
    return excluded


def test_dockerignore_keeps_the_build_inputs_and_drops_the_rest(
    dockerfile: list[Instruction],
) -> None:
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    sources = [
        word
        for instruction in only(dockerfile, "COPY")
        if "--from" not in instruction.args
        for word in instruction.args.split()[:-1]
    ]
    assert sources, "the builder copies the project in"
    for source in sources:
        for path in [source, *(str(p.relative_to(ROOT)) for p in (ROOT / source).rglob("*.py"))]:
            if "__pycache__" not in path:
                assert not dockerignored(patterns, path), f"{path} is needed by the build"
    for path in (
        ".git/HEAD",
        ".venv/bin/python",
        ".env",
        "tests/test_container.py",
        "bench/results/x.json",
        "ahp_server/__pycache__/cli.cpython-311.pyc",
        "data/ahp-server.db",
        "requirements-dev.lock",
    ):
        assert dockerignored(patterns, path), f"{path} must stay out of the build context"


# -- docker-compose.yml -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def published_ports(service: dict[str, Any]) -> set[str]:
    """Host ports published, as ``port/protocol`` (short and long syntax)."""
    ports: set[str] = set()
    for entry in service.get("ports", []):
        if isinstance(entry, dict):
            if "published" in entry:
                ports.add(f"{entry['published']}/{entry.get('protocol', 'tcp')}")
            continue
        mapping, _, protocol = str(entry).partition("/")
        parts = mapping.split(":")
        assert len(parts) >= 2, f"publish explicitly host:container, not {entry!r}"
        ports.add(f"{parts[-2]}/{protocol or 'tcp'}")
    return ports


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {key: str(value) for key, value in env.items()}


def proxy_of(compose: dict[str, Any]) -> dict[str, Any]:
    proxies = [
        s for s in compose["services"].values() if str(s.get("image", "")).startswith("caddy")
    ]
    assert len(proxies) == 1, "one Caddy service in front of the server"
    return proxies[0]


def test_compose_has_the_server_and_the_proxy(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == {"ahp-server", "caddy"}
    server = services["ahp-server"]
    assert server["build"] == "."
    assert server["restart"] == "unless-stopped"
    assert proxy_of(compose)["restart"] == "unless-stopped"
    image = proxy_of(compose)["image"]
    assert re.fullmatch(r"caddy:2\.\d+[\w.-]*", image), f"pin the proxy's tag, not {image}"


def test_server_keeps_its_data_on_a_named_volume(compose: dict[str, Any]) -> None:
    server = compose["services"]["ahp-server"]
    assert "ahp-data:/data" in server["volumes"]
    assert "ahp-data" in compose["volumes"]
    assert "ahp-workspace:/workspace" in server["volumes"]  # the sessions' files
    assert "ahp-workspace" in compose["volumes"]


def test_only_the_proxy_publishes_ports(compose: dict[str, Any]) -> None:
    server = compose["services"]["ahp-server"]
    assert "ports" not in server
    assert server.get("network_mode") != "host"
    assert {str(port) for port in server.get("expose", [])} <= {str(Settings().port)}
    proxy = proxy_of(compose)
    assert {"443/tcp", "80/tcp"} <= published_ports(proxy)  # HTTPS/WSS; ACME, redirect


def test_server_requires_a_token_and_passes_only_known_settings(compose: dict[str, Any]) -> None:
    env = environment(compose["services"]["ahp-server"])
    assert env["AHP_SERVER_TOKEN"].startswith("${AHP_SERVER_TOKEN:?"), (
        "compose must refuse no token"
    )
    assert "AHP_SERVER_ALLOWED_ORIGINS" in env
    assert set(env) <= set(ENVIRONMENT), "every variable is one the server reads"


def test_server_healthcheck_and_graceful_stop(
    compose: dict[str, Any], health_server: tuple[int, type[_Health]]
) -> None:
    server = compose["services"]["ahp-server"]
    check = server["healthcheck"]
    test = check["test"]
    assert test[0] == "CMD"
    assert "/healthz" in test[-1]
    port, handler = health_server
    assert run_python_check(test[1:], port) == 0
    handler.status = 500
    assert run_python_check(test[1:], port) != 0
    assert server.get("stop_signal", "SIGTERM") == "SIGTERM"
    grace = re.fullmatch(r"(\d+)s", str(server["stop_grace_period"]))
    assert grace, server["stop_grace_period"]
    assert int(grace.group(1)) > 10, "longer than Docker's 10 s default"
    depends = proxy_of(compose)["depends_on"]["ahp-server"]
    assert depends["condition"] == "service_healthy"


def test_proxy_mounts_the_caddyfile_and_keeps_its_certificates(compose: dict[str, Any]) -> None:
    proxy = proxy_of(compose)
    mounts = proxy["volumes"]
    assert "./config/Caddyfile:/etc/caddy/Caddyfile:ro" in mounts
    assert "caddy-data:/data" in mounts
    assert "caddy-data" in compose["volumes"]
    for variable in ("AHP_DOMAIN", "ACME_EMAIL"):
        assert f"{{${variable}}}" in CADDYFILE.read_text(encoding="utf-8")
        assert environment(proxy)[variable].startswith(f"${{{variable}:?")


# -- config/Caddyfile and docs/deploy.md ------------------------------------------------------


def test_caddy_proxies_to_the_server_port_and_hides_metrics() -> None:
    text = CADDYFILE.read_text(encoding="utf-8")
    code = "\n".join(line.split("#")[0] for line in text.splitlines())
    assert re.search(rf"reverse_proxy\s+ahp-server:{Settings().port}\b", code)
    assert re.search(r"@metrics\s+path\s+/metrics", code)
    assert re.search(r"respond\s+@metrics\s+40[34]", code)
    assert re.search(r"health_uri\s+/readyz", code)
    assert code.count("{") == code.count("}")


def test_deploy_guide_matches_the_server() -> None:
    text = DEPLOY_DOC.read_text(encoding="utf-8")
    assert "docker compose exec ahp-server ahp-server backup /data/backup.db" in text
    args = build_parser().parse_args(["backup", "/data/backup.db"])
    assert args.command == "backup"
    assert args.destination == "/data/backup.db"
    timeout = re.search(r"proxy_read_timeout (\d+)s", text)
    ping = Settings().ping_interval
    assert timeout
    assert ping is not None
    assert int(timeout.group(1)) > ping
    for needle in ("AHP_SERVER_TOKEN", "AHP_SERVER_ALLOWED_ORIGINS", "/healthz", "/readyz", "443"):
        assert needle in text
