"""The project's promises to newcomers and CI: README commands, CI script, generated code."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ahp_server.config import _AGENT_FIELDS, _KEYS

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT.parent / "shared" / "spec"


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first_screen = text[: text.index("## ")]
    return re.findall(r"```sh\n(.+?)\n```", first_screen, flags=re.S)


def test_readme_first_screen_gives_exactly_two_commands() -> None:
    commands = readme_commands()
    assert len(commands) == 2
    assert "ahp-server serve" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    match = re.search(r"^TEST_COMMAND='(.+)'$", script, flags=re.M)
    assert match is not None
    assert match.group(1) == readme_commands()[1]
    assert "ruff check" in script
    assert "mypy --strict ahp_server" in script
    assert '"$status" -eq 5' in script  # pytest's "no tests" is a failure


def generator_check(script: str) -> None:
    """``python .ci/SCRIPT --check``: the committed output is what the generator makes."""
    result = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / script), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(not SPEC.is_dir(), reason="the spec checkout ../shared is not present")
def test_generated_types_are_up_to_date() -> None:
    generator_check("gen_types.py")


def test_the_configuration_reference_is_current() -> None:
    """docs/configuration.md is what .ci/gen_config_docs.py makes of the settings model,
    and lists every key of every table."""
    generator_check("gen_config_docs.py")
    reference = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for key in [*_KEYS, *(f"agents.{field}" for field in _AGENT_FIELDS)]:
        table, name = key.rsplit(".", 1)
        heading = "## `[[agents]]`" if table == "agents" else f"## `[{table}]`"
        section = reference.split(heading)[1].split("\n## ")[0]
        assert f"| `{name}` |" in section, key


def test_the_cli_reference_is_current() -> None:
    """docs/cli.md is what .ci/gen_cli_docs.py makes of the parser, and has a section
    for every command and action."""
    generator_check("gen_cli_docs.py")
    reference = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for command in ("serve", "check-config", "backup", "chat", "sessions"):
        assert f"### `ahp-server {command}`" in reference
    for action in ("list", "rename", "delete", "archive", "move", "changes"):
        assert f"#### `ahp-server sessions {action}`" in reference
    assert "| `--session` `SESSION` |" in reference


def test_cli_entry_point_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ahp_server", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0
    assert "AHP 1.0.0" in result.stdout


def test_ci_checks_the_web_build_before_the_test_command() -> None:
    # docs/web.md: the committed build must match a fresh one, and the browser
    # tests (run by the test command) need Chromium and web/node_modules first.
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    steps = [
        "apt-get install -y -qq chromium",
        "npm ci",
        'diff -r "$web_build" ahp_server/web/static',
        "npx vitest run",
        'bash -c "$TEST_COMMAND"',
    ]
    positions = [script.index(step) for step in steps]
    assert positions == sorted(positions)
    assert (ROOT / "web" / "package-lock.json").is_file()
    assert (ROOT / "ahp_server" / "web" / "static" / "index.html").is_file()


#: What the docs cite as evidence: ``tests/….py::test_name`` (``::test_other``
#: later in the same line names another test of that file), and any path of
#: ours (but ``bench/results/``: what a benchmark run writes, not kept in git).
_TEST_REF = re.compile(r"(tests/[\w/]+\.py)?::(test_\w+)")
_PATH_REF = re.compile(r"\b((?:tests|ahp_server|bench|config|web/src)/[\w/.-]+\.\w+)\b")


def _docs() -> list[Path]:
    return [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", ROOT / "bench" / "README.md"]


def test_every_test_and_file_the_docs_cite_exists() -> None:
    """docs/reliability.md and the others cite tests as evidence: a renamed or
    removed test must not leave them citing nothing."""
    missing: list[str] = []
    cited = 0
    for doc in _docs():
        text = doc.read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), 1):
            where = f"{doc.relative_to(ROOT)}:{number}"
            current: str | None = None
            for match in _TEST_REF.finditer(line):
                current = match.group(1) or current
                if current is None:
                    missing.append(f"{where}: ::{match.group(2)} names no file")
                    continue
                cited += 1
                source = ROOT / current
                if not source.is_file():
                    missing.append(f"{where}: {current} does not exist")
                elif not re.search(rf"def {match.group(2)}\b", source.read_text(encoding="utf-8")):
                    missing.append(f"{where}: {current} has no {match.group(2)}")
        for match in _PATH_REF.finditer(text):
            cited += 1
            if (
                not match.group(1).startswith("bench/results/")
                and not (ROOT / match.group(1)).exists()
            ):
                missing.append(f"{doc.relative_to(ROOT)}: {match.group(1)} does not exist")
    assert cited > 100  # the patterns still find what the docs cite
    assert not missing, "\n".join(missing)
