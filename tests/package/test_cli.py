"""`strom --help` lists what a user runs, and each of those commands answers --help (from the
parser, in this process); the worker commands a supervisor spawns stay runnable but out of the
list; `strom demo` runs its crash and recovery (its killed writer is ``python -m strom.demo``,
not a command)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
USER_COMMANDS = ["run", "cluster", "top", "format", "start", "topics", "acls", "configs", "quorum",
                 "reassign-partitions", "leader-election", "log-dirs", "delete-records", "get-offsets",
                 "transactions", "features", "consumer-groups", "demo", "dump-log"]
WORKER_COMMANDS = ["controller", "broker"]


def strom(*args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "strom", *args], cwd=cwd, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=120)


def listed_commands(help_text: str) -> list[str]:
    """The commands argparse lists under "commands:", one per line, name then help."""
    section = help_text.split("\ncommands:\n", 1)[1]
    return re.findall(r"^ {4}(\S+) +\S", section, flags=re.MULTILINE)


def test_help_lists_only_the_user_commands():
    done = strom("--help")
    assert done.returncode == 0, done.stderr
    assert listed_commands(done.stdout) == USER_COMMANDS
    assert "SUPPRESS" not in done.stdout
    usage = " ".join(done.stdout.split("\n\n", 1)[0].split())  # argparse wraps it at the terminal's width
    assert usage == "usage: strom [-h] {" + ",".join(USER_COMMANDS) + "} ..."
    for hidden in WORKER_COMMANDS + ["_demo-writer"]:
        assert not re.search(rf"(?<![\w-]){hidden}(?![\w-])", done.stdout), hidden


def help_of(capsys, *args: str) -> str:
    """What ``strom ARGS --help`` prints, from the parser ``python -m strom`` runs (in this
    process: the entry point itself is ``test_help_lists_only_the_user_commands``'s)."""
    from strom.cli import main

    with pytest.raises(SystemExit) as done:
        main([*args, "--help"])
    out = capsys.readouterr()
    assert done.value.code == 0, out.err
    return out.out


@pytest.mark.parametrize("command", USER_COMMANDS + WORKER_COMMANDS)
def test_each_command_answers_help(command, capsys):
    text = help_of(capsys, command)
    assert text.startswith(f"usage: strom {command} "), text


@pytest.mark.parametrize("action", ["describe", "add-controller", "remove-controller"])
def test_each_quorum_action_answers_help(action, capsys):
    text = help_of(capsys, "quorum", action)
    assert text.startswith(f"usage: strom quorum {action} "), text


def test_the_internal_writer_is_not_a_command():
    done = strom("_demo-writer", "x", "1", "1")
    assert done.returncode == 2
    assert "invalid choice: '_demo-writer'" in done.stderr


def test_the_internal_writer_names_its_arguments_when_given_others():
    done = subprocess.run([sys.executable, "-m", "strom.demo", "dir", "many"], cwd=ROOT,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    assert done.returncode == 2
    assert done.stderr.startswith("usage: python -m strom.demo DIR RECORDS RECORD_SIZE")
    assert "Traceback" not in done.stderr


def test_demo_recovers_every_record_after_the_writer_is_killed(tmp_path):
    done = strom("demo", "--dir", str(tmp_path / "demo"), "--records", "20000", "--record-size", "50",
                 cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "a second writer appended up to offset 20,000 and was killed with SIGKILL" in done.stdout
    assert "read back 20,000 records (CRC checked)" in done.stdout
    assert done.stdout.rstrip().endswith("all present")


def help_pages() -> list[tuple[str, str]]:
    """Each listed command's help and, for a command with actions of its own (quorum's, transactions'),
    each action's: (``strom quorum describe``, its help text)."""
    import argparse

    from strom.cli import COMMANDS, build_parser

    def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                return dict(action.choices)
        return {}

    commands = subparsers(build_parser())
    pages = []
    for name in COMMANDS:
        pages.append((f"strom {name}", commands[name].format_help()))
        for action, parser in subparsers(commands[name]).items():
            pages.append((f"strom {name} {action}", parser.format_help()))
    return pages


def test_every_command_and_action_shows_an_example_in_its_help():
    lacking = []
    for path, text in help_pages():
        examples = re.split(r"^examples?:$", text, maxsplit=1, flags=re.MULTILINE | re.IGNORECASE)
        command = path.split()[1]
        if len(examples) < 2 or not re.search(rf"^ +strom {re.escape(command)}\b", examples[1], re.MULTILINE):
            lacking.append(path)
    assert lacking == []


def test_the_configs_usage_names_both_bootstraps_and_every_entity_type():
    from strom import cli

    usage = (cli.__doc__ or "").split("strom configs ", 1)[1].split("\n    strom ", 1)[0]
    assert "--bootstrap-server HOST:PORT | --bootstrap-controller HOST:PORT" in usage
    for entity_type in ("topics", "brokers", "broker loggers", "groups", "users", "clients", "ips"):
        assert entity_type in usage, entity_type
