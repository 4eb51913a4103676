#!/usr/bin/env python3
"""Generate ``docs/cli.md``, the command-line reference, from the argparse parser.

Usage: ``python .ci/gen_cli_docs.py [--check]`` from the project root, with
the project installed. ``--check`` exits 1 when the committed file differs from
what the parser produces (the test suite runs it:
``tests/test_project.py::test_the_cli_reference_is_current``).

Sources: ``ahp_server.cli.build_parser()`` — every command, action, flag, its
metavar, default and help text — and, written here, each command's examples
and the interactive chat's keys (``ahp_server.cli.chat.HELP``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["COLUMNS"] = "100"  # argparse wraps usage lines at the terminal's width

from ahp_server import cli  # noqa: E402 - after the project's root is on the path
from ahp_server.cli.chat import HELP  # noqa: E402

OUT = ROOT / "docs" / "cli.md"

#: Examples per command path ("chat", "sessions rename"): shell lines with comments.
EXAMPLES: dict[str, list[str]] = {
    "serve": [
        "ahp-server serve                                  # ws://127.0.0.1:8765, the echo agent",
        "ahp-server serve --config my.toml --port 0        # a free port; the URL is logged",
        "ahp-server --data-dir :memory:                    # serve is the default; keep nothing",
    ],
    "check-config": [
        "ahp-server check-config --config my.toml && echo ok",
    ],
    "backup": [
        "ahp-server backup /backups/ahp-$(date +%F).db     # safe while the host runs",
    ],
    "chat": [
        "ahp-server chat                                   # a conversation at the prompt",
        'ahp-server chat "hello"                           # one message, the answer, exit',
        "git diff | ahp-server chat --agent claude         # the message on stdin",
        'ahp-server chat --cwd ~/src/app "what is this?"   # the agent works in ~/src/app',
        "ahp-server chat --session 3f2a                    # go on in an existing session",
        'ahp-server chat --chat 3f2a "and then?"           # one more message in a chat',
        "ahp-server chat --chat 3f2a --continue            # finish an answer that failed",
    ],
    "sessions": [
        "ahp-server sessions                               # sessions and their chats",
        "ahp-server sessions --archived --json | jq .",
    ],
    "sessions list": ["ahp-server sessions list --archived"],
    "sessions archive": ["ahp-server sessions archive 3f2a"],
    "sessions unarchive": ["ahp-server sessions unarchive 3f2a"],
    "sessions read": ["ahp-server sessions read 3f2a"],
    "sessions unread": ["ahp-server sessions unread 3f2a"],
    "sessions move": [
        "ahp-server sessions move 9c1e --to new            # into a new session",
        "ahp-server sessions move 9c1e --to 3f2a --after 77d0",
    ],
    "sessions rename": ['ahp-server sessions rename 3f2a "Release notes"'],
    "sessions delete": [
        "ahp-server sessions delete 3f2a                   # asks first",
        "ahp-server sessions delete --yes 3f2a             # in a script",
    ],
    "sessions changes": ["ahp-server sessions changes 9c1e --json"],
}

INTRO = """\
# Command-line reference

`ahp-server` runs the host (`serve`, the default command) and talks to a
running one (`chat`, `sessions`). Every command and flag is below; this page
is generated from the parser (`python .ci/gen_cli_docs.py`), so it is what
`ahp-server COMMAND --help` says, with examples.

Client commands (`chat`, `sessions`) take `--url` (default
`ws://127.0.0.1:8765`) and `--token` (or `AHP_SERVER_TOKEN`), before or after
the action. A session or chat is named by its URI, as `ahp-server sessions`
lists it, or by an unambiguous start of its id (`ahp-session:/3f2a…` → `3f2a`).

Exit status of the client commands: 0 done; 1 the turn failed, asked what
could not be answered here, or the host could not be reached (the URL and the
reason are named); 2 a usage error or a refusal (the host's reason, as it gave
it, e.g. the cause of a session that did not start); 130 interrupted (Ctrl-C).

## A conversation at the prompt

`ahp-server chat` with no message, on a terminal, opens a conversation: each
line is a message in the same session, the answer streams as it arrives, and
the prompt comes back when the turn has ended. Lines are edited with readline
(arrows, Ctrl-R), and kept in a history of the last 1000 lines in
`$XDG_STATE_HOME/ahp-server/chat_history` (`~/.local/state/ahp-server/…` when
`XDG_STATE_HOME` is not set). `--session` or `--chat` continue an existing one:
its last three turns are shown briefly first, and a turn running there (started
elsewhere) is followed to its end: what it said so far, the rest as it comes,
the confirmations and questions it waits for asked at the prompt, Ctrl-C
cancelling it.

A tool call that needs confirmation shows what will run (the command, the
tool's input, each file edit as a unified diff) and asks for one of the
agent's options by number (or y to allow without naming an option; anything
else denies). A finished tool call shows what it did (`[tool]`, or
`[tool failed]` with its error) and the first 12 lines of its output. A
question the agent asks (an input
request: text, numbers, yes/no, choices) is asked at the prompt, question by
question; the turn goes on with the answers. Given as one-shot with stdin not a
terminal, confirmations are read from stdin, one line each (end of input
denies), and an input request is declined, with a line saying to run the chat
on a terminal (exit status 1). A tool the agent asks this client to run (a
client tool) is reported failed: the CLI offers none.

Ctrl-C while a turn runs cancels it on the host (`chat/turnCancelled`) and
returns to the prompt; a second Ctrl-C while it is being cancelled leaves at
once. Ctrl-C or Ctrl-D at the prompt leaves; the session stays on the host.

At the prompt:

```text
{help}
```
"""


def flags_of(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest.upper()}`"
    names = ", ".join(f"`{name}`" for name in action.option_strings)
    if action.nargs == 0:
        return names
    metavar = action.metavar or (
        "{" + ",".join(action.choices) + "}" if action.choices else action.dest.upper()
    )
    return f"{names} `{metavar}`"


def help_of(action: argparse.Action) -> str:
    text = " ".join((action.help or "").split())
    text = text.replace(
        str(cli.default_data_dir()), "$XDG_DATA_HOME/ahp-server, else ~/.local/share/ahp-server"
    )
    if action.choices and action.option_strings and "(" not in text:
        text = (
            (text + " " if text else "")
            + "One of "
            + ", ".join(f"`{choice}`" for choice in action.choices)
            + "."
        )
    if action.required and action.option_strings:
        text += " Required."
    return text.replace("|", "\\|")


def usage_of(parser: argparse.ArgumentParser) -> str:
    usage = parser.format_usage().removeprefix("usage: ").rstrip()
    first, *rest = usage.splitlines()  # continuation lines were indented past "usage: "
    return "\n".join([first, *(line[len("usage: ") :].rstrip() for line in rest)])


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def section(path: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
    lines = [f"{'#' * level} `ahp-server {path}`", ""]
    if parser.description:
        lines += [" ".join(parser.description.split()), ""]
    lines += ["```text", usage_of(parser), "```", ""]
    rows = [
        a
        for a in parser._actions
        if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
    ]
    if rows:
        lines += ["| argument | meaning |", "|---|---|"]
        lines += [f"| {flags_of(a)} | {help_of(a)} |" for a in rows]
        lines.append("")
    if path in EXAMPLES:
        lines += ["```sh", *EXAMPLES[path], "```", ""]
    for name, child in subcommands(parser).items():
        lines += section(f"{path} {name}", child, level + 1)
    return lines


def render() -> str:
    parser = cli.build_parser()
    lines = [INTRO.format(help=HELP), "## Commands", ""]
    top = [
        a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)
    ]
    lines += [
        "`ahp-server` with no command runs `serve`, and takes its flags:",
        "",
        "```text",
        usage_of(parser),
        "```",
        "",
        "| argument | meaning |",
        "|---|---|",
        *(f"| {flags_of(a)} | {help_of(a)} |" for a in top),
        "",
    ]
    for name, child in subcommands(parser).items():
        lines += section(name, child, 3)
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    text = render()
    if "--check" in sys.argv[1:]:
        if not OUT.is_file() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT.relative_to(ROOT)} is out of date: run python .ci/gen_cli_docs.py")
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
