"""The README stays true: it names every stream, bucket and consumer, and CI runs its test command."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from bus.subjects import Subjects
from contracts.config import load_settings
from contracts.routes import DURABLES

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_lists_every_stream_and_bucket() -> None:
    s = Subjects("wm")
    for spec in s.streams():
        assert f"`{spec.name}`" in README
    for bucket in s.buckets():
        assert f"`{bucket.name}`" in README


def test_readme_lists_every_durable_consumer() -> None:
    for d in DURABLES:
        assert f"`{d.name}`" in README, d.name


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
        commands = [cmd, *(cmd.commands.values() if isinstance(cmd, click.Group) else [])]
        options = {o for c in commands for p in c.params for o in getattr(p, "opts", [])}
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
    assert "(`terminal:owner` → `wm.evt.llm.response.terminal_owner`" in README


def test_tap_filters_in_the_readme_parse_as_documented() -> None:
    from supervisor.cli.tap import parse_filter

    subject, type_prefix = readme_tap_filters()
    assert parse_filter(subject, "wm")[:2] == (subject, "")
    assert parse_filter(type_prefix, "wm")[:2] == ("wm.>", type_prefix)


def readme_tap_filters() -> tuple[str, str]:
    """The README's `tap` examples: a subject and a type prefix."""
    found = re.search(r"FILTER is a subject \(`([^`]+)`\), .*? or a type prefix \(`([^`]+)`\)",
                      README)
    assert found is not None
    return found.group(1), found.group(2)


def quick_start_command() -> list[str]:
    """The Quick start's run command, as arguments after `wintermute`."""
    first = blocks(section("Quick start"), "sh")[0]
    line = next(line for line in first.splitlines() if "wintermute up" in line)
    return line.split(".venv/bin/wintermute ", 1)[1].split()


# -- the walk-through against a real `wintermute up` ----------------------------------------


class Output:
    """Everything a subprocess writes, collected by a thread, searchable while it runs."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.chunks: list[str] = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        while chunk := stream.read1(65536) if hasattr(stream, "read1") else stream.read(1):
            with self.lock:
                self.chunks.append(chunk.decode("utf-8", "replace"))

    @property
    def text(self) -> str:
        with self.lock:
            return "".join(self.chunks)

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.text)
            if found:
                return found
            time.sleep(0.2)
        raise AssertionError(f"{pattern!r} not seen within {timeout}s in:\n{self.text[-3000:]}")


def wm(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "supervisor.cli.main", *args], env=env, cwd=ROOT,
                          text=True, capture_output=True, timeout=timeout)


def spawn(env: dict[str, str], *args: str, stdin: int | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "supervisor.cli.main", *args], env=env,
                            cwd=ROOT, stdin=stdin, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)


@pytest.fixture
def model_server() -> Iterator[str]:
    """The scripted OpenAI-compatible model (tests/fakes/llm_servers.py) in its own process."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.llm_servers", "--kind", "openai", "--port", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    assert proc.stdout is not None
    yield proc.stdout.readline().strip()
    proc.terminate()
    proc.wait(10)


def fresh_env(home: Path, model_url: str) -> dict[str, str]:
    """A new user's environment: a fresh home and a model at OPENAI_BASE_URL, nothing else."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WM__", "OPENAI_", "ANTHROPIC_", "OLLAMA_", "WINTERMUTE_"))}
    env.update({"WINTERMUTE_HOME": str(home), "OPENAI_BASE_URL": model_url,
                "WM__MODELS__DEFAULT": "openai/test-model", "PYTHONUNBUFFERED": "1",
                # direct mode, so the README's approval flow happens on any machine
                "WM__EXECUTOR__MODE": "direct"})
    return env


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.slow
@pytest.mark.timeout(900)  # a dozen CLI processes; on a loaded 2-core machine each takes seconds
def test_the_readme_walkthrough_against_a_real_up(tmp_path: Path, model_server: str) -> None:
    env = fresh_env(tmp_path / "home", model_server)
    args = quick_start_command()
    assert args == ["up", "--chat"]
    up = spawn(env, *args, stdin=subprocess.PIPE)
    taps: dict[str, subprocess.Popen[bytes]] = {}
    try:
        assert up.stdin is not None and up.stdout is not None
        chat = Output(up.stdout)
        # Quick start: the terminal shows how start-up goes, then the agent answers.
        up.stdin.write(b"hello from the readme\n")
        up.stdin.flush()
        chat.wait_for(r"echo: hello from the readme", 240)
        assert re.search(r"starting: (\d of 8 actors ready|waiting for the supervisor)", chat.text)
        chat.wait_for(r"ready: all 8 actors are up", 240)
        # A long turn: the terminal says the agent is still at it (the model takes 7 s).
        up.stdin.write(b"slow:7\n")
        up.stdin.flush()
        chat.wait_for(r"still thinking… \(\d+ s\)", 60)
        chat.wait_for(r"slept 7", 120)

        # tap, with the README's two kinds of FILTER.
        subject, type_prefix = readme_tap_filters()
        tap_out = {}
        for filt in (subject, type_prefix):
            taps[filt] = spawn(env, "tap", filt)
            tap_out[filt] = (Output(taps[filt].stdout), Output(taps[filt].stderr))  # type: ignore[arg-type]
            tap_out[filt][1].wait_for(r"tapping ", 60)
        done = wm(env, "chat", "--once", "run: echo tapped-$((6*7))")
        assert done.returncode == 0 and "tapped-42" in done.stdout, done.stderr
        by_type = tap_out[type_prefix][0].wait_for(r"tool\.result", 60)
        assert by_type is not None
        lines = [ln for ln in tap_out[type_prefix][0].text.splitlines() if ln.strip()]
        assert lines and all(ln.split()[1].startswith(type_prefix) for ln in lines), lines
        tap_out[subject][0].wait_for(r"tool\.result", 60)
        evt = [ln for ln in tap_out[subject][0].text.splitlines() if ln.strip()]
        assert all(" wm.evt." in ln for ln in evt), evt

        # approve / deny: the outcome, and exit 1 when it did not happen.
        asked = wm(env, "chat", "--once", "run: rm -rf ./nothing-here")
        assert asked.returncode == 0, asked.stderr
        aid = chat.wait_for(r"Approval needed \[([A-Za-z0-9]{8})\]", 60).group(1)
        ok = wm(env, "approve", aid)
        assert ok.returncode == 0 and f"Approved {aid}." in ok.stdout, ok.stdout + ok.stderr
        again = wm(env, "deny", aid)
        assert again.returncode == 1 and "already used or expired" in again.stderr
        unknown = wm(env, "approve", "NoSuchId")
        assert unknown.returncode == 1 and "Approval NoSuchId is unknown" in unknown.stderr

        # status names every actor; nothing was restarted on the way.
        status = wm(env, "status")
        assert status.returncode == 0 and "HEALTHY" in status.stdout, status.stderr

        # A second terminal's `wintermute chat`, left open.
        other = spawn(env, "chat", stdin=subprocess.PIPE)
        taps["chat"] = other
        tap_out["chat"] = (Output(other.stdout), Output(other.stderr))  # type: ignore[arg-type]
        tap_out["chat"][0].wait_for(r"Talking to Wintermute", 60)

        # Leaving the chat stops everything; a tap or chat left open says so once and exits.
        up.stdin.close()
        assert up.wait(90) == 0
        assert other.wait(60) == 1
        assert "wintermute stopped" in tap_out.pop("chat")[1].text
        taps.pop("chat")
        for filt, proc in taps.items():
            assert proc.wait(60) == 0, filt
            err = tap_out[filt][1].text
            assert "wintermute stopped" in err and "exiting" in err, err
            assert err.count("\n") <= 3, err  # one line, not two errors a second
    finally:
        for proc in [up, *taps.values()]:
            stop(proc)
