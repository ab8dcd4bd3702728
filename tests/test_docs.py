"""The README stays true: it names every stream, bucket and consumer, and CI runs its test command."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from bus.subjects import Subjects
from contracts.config import load_settings

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_lists_every_stream_and_bucket() -> None:
    s = Subjects("wm")
    for spec in s.streams():
        assert f"`{spec.name}`" in README
    for bucket in s.buckets():
        assert f"`{bucket.name}`" in README


def test_readme_lists_every_durable_consumer() -> None:
    durables: set[str] = set()
    for path in (ROOT / "actors").rglob("actor.py"):
        durables |= set(re.findall(r'"([a-z]+(?:-[a-z]+)?)",\s*\(', path.read_text()))
    durables |= set(re.findall(r'\(s\.stream_\w+, "([a-z-]+)"\)', (ROOT / "actors/observer/actor.py").read_text()))
    assert {"planner-in", "llm", "executor", "memory", "approval", "channel-out"} <= durables
    for name in durables:
        assert f"`{name}`" in README, name


def test_ci_runs_the_readme_test_command() -> None:
    block = README.split("## Quick start", 1)[1].split("```", 2)[1]
    commands = [line for line in block.splitlines() if line and not line.startswith(("#", "sh"))]
    test_command = commands[1]
    assert "pytest" in test_command
    assert test_command in (ROOT / ".ci" / "run").read_text()


# -- the README's own examples, checked against the product ---------------------------------


def section(title: str) -> str:
    """The README text under `## title`, up to the next `## ` heading."""
    return README.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def toml_block(text: str) -> str:
    """A README toml block as a file (the numbered list indents it)."""
    return textwrap.dedent(blocks(text, "toml")[0])


@pytest.mark.parametrize("title", ["Telegram", "Slack"])
def test_channel_config_blocks_load_and_keep_the_terminal_owner(
    title: str, tmp_path: Path
) -> None:
    (tmp_path / "config.toml").write_text(toml_block(section(title)))
    config = load_settings(tmp_path, {}).config
    # Otherwise `wintermute chat`, `approve` and `deny` silently lose owner rights (#17).
    assert "terminal:owner" in config.owner.principals
    assert config.owner.sink.split(":", 1)[0] == title.lower()
    channel = getattr(config.channels, title.lower())
    assert channel.allowed_users


def test_env_examples_name_the_variables_the_product_reads() -> None:
    from actors.llm.actor import PROVIDER_VARS
    from contracts.config import SlackChannel, TelegramChannel

    quick = blocks(section("Quick start"), "sh")[1]
    names = {line.split("=", 1)[0] for line in quick.splitlines() if "=" in line}
    names |= set(re.findall(r"\b([A-Z_]+)=", quick))
    assert names <= set(PROVIDER_VARS)
    assert f"`{TelegramChannel().bot_token_env}=" in section("Telegram")
    slack_env = blocks(section("Slack"), "sh")[0]
    for var in (SlackChannel().bot_token_env, SlackChannel().app_token_env,
                SlackChannel().signing_secret_env):
        assert f"{var}=" in slack_env
    inline = re.search(r"`(\[models\] default = \"[^`]+\")`", section("Quick start"))
    assert inline is not None
    load_settings_from_text(inline.group(1).replace("] ", "]\n"))


def load_settings_from_text(text: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as home:
        (Path(home) / "config.toml").write_text(text)
        load_settings(Path(home), {})


def test_every_command_and_option_in_the_table_exists() -> None:
    import click

    from supervisor.cli.main import main

    rows = re.findall(r"^\| `(wintermute [^`]+)`(?: / `(\w+) [A-Z]+`)? \|", README, re.M)
    assert len(rows) >= 13 and any("--nats-url" in usage for usage, _ in rows)
    for usage, alias in rows:
        words = usage.split()[1:]
        cmd: click.Command = main.commands[words[0]]  # type: ignore[attr-defined]
        if isinstance(cmd, click.Group) and len(words) > 1 and words[1] in cmd.commands:
            cmd = cmd.commands[words[1]]  # `tools release`, `tasks enable`
        options = {o for p in cmd.params for o in getattr(p, "opts", [])}
        for option in re.findall(r"--[a-z-]+", usage):
            assert option in options, f"{usage}: {option}"
        if alias:
            assert alias in main.commands, alias  # type: ignore[attr-defined]


def test_every_chat_command_in_the_readme_exists() -> None:
    from actors.channel.commands import COMMANDS

    listed = re.search(r"Chat commands: (.*?)\n\n", README, re.S)
    assert listed is not None
    for word in set(re.findall(r"`(/[a-z]+)", listed.group(1))):
        assert word in COMMANDS, word


def test_subject_tokens_are_as_documented() -> None:
    from contracts import subject_token

    assert subject_token("terminal:owner") == "terminal_owner"
    assert "`terminal:owner` is\n`wm.evt.llm.response.terminal_owner`" in README


def test_tap_filters_in_the_readme_parse_as_documented() -> None:
    from supervisor.cli.tap import parse_filter

    subject, type_prefix = readme_tap_filters()
    assert parse_filter(subject, "wm") == (subject, "")
    assert parse_filter(type_prefix, "wm") == ("wm.>", type_prefix)


def readme_tap_filters() -> tuple[str, str]:
    """The README's `tap` examples: a subject and a type prefix."""
    found = re.search(r"FILTER is a subject \(`([^`]+)`\) or a type prefix \(`([^`]+)`\)", README)
    assert found is not None
    return found.group(1), found.group(2)


def quick_start_command() -> list[str]:
    """The Quick start's run command, as arguments after `wintermute`."""
    first = blocks(section("Quick start"), "sh")[0]
    line = next(line for line in first.splitlines() if "wintermute up" in line)
    return line.split(".venv/bin/wintermute ", 1)[1].split()
