"""`traingrid --help` and every command's help, read as a user reads them at 80 and 100
columns.

The help renders its markup (no RST or Markdown marks left in it), lists every command with a
summary that is its docstring's whole first paragraph and ends a sentence, shows no type beside
a flag that takes no value, and wraps every text between words, never inside one.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.core import TyperOption
from typer.testing import CliRunner

from traingrid_local.cli.main import app

WIDTH = 100
WIDTHS = (80, WIDTH)  # a common terminal, and a wide one
ANSI = re.compile(r"\x1b\[[0-9;]*m")
EXTRAS = re.compile(r"\[(default|env var): [^\]]*\]|\[required\]")
runner = CliRunner()
group = typer.main.get_command(app)
COMMANDS = group.list_commands(typer.Context(group))


def help_screen(*command: str, width: int = WIDTH) -> str:
    env = {"COLUMNS": str(width), "FORCE_COLOR": None, "NO_COLOR": "1"}
    result = runner.invoke(app, [*command, "--help"], prog_name="traingrid", env=env)
    assert result.exit_code == 0, result.output
    return ANSI.sub("", result.output)


def words(text: str) -> str:
    """The text as a user reads it once rendered: `code` marks gone, one space between words."""
    return " ".join(text.replace("`", "").split())


def first_paragraph(text: str) -> str:
    return words(text.strip().split("\n\n")[0])


def panel(screen: str, title: str) -> list[str]:
    """The inside of each row of the panel titled ``title``, box drawing stripped."""
    lines = screen.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f"╭─ {title} ")), None)
    if start is None:
        return []
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("╰"))
    return [line[2:-2] for line in lines[start + 1:end]]


def column_texts(rows: list[str], column: int) -> dict[str, str]:
    """Each row group's text from ``column`` on, joined across the lines it wraps over, keyed
    by the row's name (the first word left of the column: a command, `--option`, argument)."""
    texts: dict[str, list[str]] = {}
    name = ""
    for row in rows:
        left, right = row[:column], row[column:].strip()
        names = [w for w in left.split() if w not in ("*",) and not w.startswith("<")]
        if names:
            name = names[0].removesuffix("...")  # a variadic argument's
            texts[name] = []
        if right:
            texts[name].append(right)
    return {key: " ".join(parts) for key, parts in texts.items()}


def description(screen: str) -> str:
    """The help text above the panels, joined into one line per paragraph."""
    lines = screen.splitlines()
    first_panel = next(i for i, line in enumerate(lines) if line.startswith("╭─"))
    usage = next(i for i, line in enumerate(lines) if "Usage:" in line)
    return words(" ".join(lines[usage + 1:first_panel]))


@pytest.mark.parametrize("width", WIDTHS)
def test_the_first_screen_lists_every_command_with_its_whole_summary(width):
    screen = help_screen(width=width)
    rows = panel(screen, "Commands")
    column = len(re.match(r"\S+\s+", rows[0]).group(0))
    summaries = column_texts(rows, column)
    assert list(summaries) == COMMANDS
    for name in COMMANDS:
        summary = summaries[name]
        command = group.get_command(typer.Context(group), name)
        assert summary == first_paragraph(command.help or ""), name
        assert summary[0].isupper() and summary.endswith("."), f"{name}: {summary!r}"
    assert description(screen) == words(app.info.help or "")


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_renders_its_markup_and_shows_no_type_beside_a_flag(command):
    screen = help_screen(*[command] if command else [])
    assert "``" not in screen and "`" not in screen
    assert "<bool>" not in screen and "BOOLEAN" not in screen.upper().replace("--", " ")
    ctx = typer.Context(group)
    params = (group.get_command(ctx, command) if command else group).get_params(ctx)
    flags = [p for p in params if isinstance(p, TyperOption) and p.is_flag]
    assert any("--help" in flag.opts for flag in flags)
    flag_names = {opt for flag in flags for opt in flag.opts}
    for row in panel(screen, "Options"):
        if row.split()[:1] and row.split()[0] in flag_names:
            assert not re.search(r"<[^>]+>", row), row


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("command", COMMANDS)
def test_help_texts_wrap_between_words_and_are_whole(command, width):
    screen = help_screen(command, width=width)
    cmd = group.get_command(typer.Context(group), command)
    assert description(screen) == words(cmd.help or "")
    ctx = typer.Context(cmd)
    for title in ("Options", "Arguments"):
        rows = panel(screen, title)
        helped = [p for p in cmd.get_params(ctx)
                  if getattr(p, "help", None) and (p.param_type_name == "option") == (
                      title == "Options")]
        if not helped:
            continue
        first = helped[0]
        first_help = words(first.help).split()[0]
        column = min(row.find(f" {first_help} ") + 1 for row in rows if f" {first_help} " in row)
        texts = column_texts(rows, column)
        for param in helped:
            key = param.opts[0] if param.param_type_name == "option" else str(param.name)
            shown = words(EXTRAS.sub("", texts[key]))
            assert shown == words(param.help), f"{command} {key}: {shown!r}"


def test_the_installed_command_shows_the_same_first_screen():
    installed = Path(sys.executable).with_name("traingrid")
    if not installed.exists():
        pytest.skip(f"{installed} is not installed (pip install -e .)")
    # The same environment as this process's help screens (Typer reads some of it at import).
    env = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"}
    shown = subprocess.run([str(installed), "--help"], capture_output=True, text=True,
                           env=env | {"COLUMNS": str(WIDTH), "NO_COLOR": "1"}, check=True,
                           timeout=60).stdout
    assert ANSI.sub("", shown) == help_screen()
