"""The README and the commands agree: every option a README command line uses is in that
command's --help, and every option of every command is in the README."""

import re
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
COMMANDS = (
    "port",
    "chat",
    "batch",
    "eval",
    "check",
    "bench",
    "read",
    "translate",
    "tasks new",
    "tasks list",
    "tasks show",
    "tasks check",
    "kb search",
    "kb chip",
    "mcp",
    "doctor",
    "export",
)


_HELP: dict[str, set[str]] = {}  # each command's --help, run once for both tests below


def help_options(cli, command: str) -> set[str]:
    if command not in _HELP:
        result = cli(*command.split(), "--help", env={"COLUMNS": "200"})
        assert result.returncode == 0, result.stderr
        _HELP[command] = set(re.findall(r"--[a-z][a-z-]*", result.stdout))
    return _HELP[command]


def readme_uses(command: str) -> set[str]:
    lines = [ln for ln in README.splitlines() if re.search(rf"mlxport {command}\b", ln)]
    return {
        o
        for ln in lines
        for o in re.findall(r"(?<![\w-])--[a-z][a-z-]*", ln.split(f"mlxport {command}", 1)[1])
    }


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_the_readme_uses_is_in_the_commands_help(cli, command):
    unknown = readme_uses(command) - help_options(cli, command)
    assert not unknown, (
        f"README uses {sorted(unknown)} with `mlxport {command}`, which its --help does not name"
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_of_every_command_is_in_the_readme(cli, command):
    missing = {
        o for o in help_options(cli, command) - {"--help"} if not re.search(rf"{o}\b", README)
    }
    assert not missing, (
        f"`mlxport {command} --help` names {sorted(missing)}, which the README never mentions"
    )
