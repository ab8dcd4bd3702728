"""Tests for the shell command runner: exit codes, output capping, timeouts and env scrubbing."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from pathlib import Path

import pytest

from actors.executor import command as command_mod
from actors.executor.command import CommandResult, run_command, scrubbed_env
from kit.redact import Redactor

BASE_ENV = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL")}


async def run(
    cmd: str,
    cwd: Path,
    *,
    secs: float = 10.0,
    limit: int = 100_000,
    env: dict[str, str] | None = None,
) -> CommandResult:
    return await run_command(
        cmd, cwd=cwd, timeout=secs, output_limit=limit, env=BASE_ENV if env is None else env
    )


def alive(pid: int) -> bool:
    """True if pid exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def gone(pid: int, within: float = 2.0) -> bool:
    """Wait briefly for a killed process to disappear (its new parent must reap it)."""
    deadline = time.monotonic() + within
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def test_exit_codes(tmp_path: Path) -> None:
    ok = await run("echo hi", tmp_path)
    assert (ok.exit_code, ok.output, ok.timed_out, ok.truncated) == (0, "hi\n", False, False)
    assert ok.duration_ms >= 0
    assert (await run("exit 3", tmp_path)).exit_code == 3
    assert (await run("kill -TERM $$", tmp_path)).exit_code == -signal.SIGTERM


async def test_stderr_is_merged_in_order(tmp_path: Path) -> None:
    result = await run("echo out; echo err >&2; echo out2; ls /no/such/path", tmp_path)
    assert result.output.startswith("out\nerr\nout2\n")
    assert "/no/such/path" in result.output
    assert result.exit_code == 2


async def test_stdin_is_devnull(tmp_path: Path) -> None:
    result = await run("cat; echo done", tmp_path, secs=5)
    assert (result.exit_code, result.output, result.timed_out) == (0, "done\n", False)


@pytest.fixture
def real_tmp(tmp_path: Path) -> Path:
    return tmp_path.resolve()


async def test_cwd_is_respected(real_tmp: Path) -> None:
    (real_tmp / "marker.txt").write_text("x")
    result = await run("pwd -P; ls", real_tmp)
    assert result.output == f"{real_tmp}\nmarker.txt\n"


async def test_missing_cwd_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        await run("true", tmp_path / "nope")


async def test_timeout_kills_child_and_grandchild(tmp_path: Path) -> None:
    started = time.monotonic()
    result = await run(
        "echo outer $$; bash -c 'echo inner $$; sleep 30 & echo sleep $!; wait'", tmp_path, secs=1.0
    )
    assert time.monotonic() - started < 5
    assert result.timed_out is True
    assert result.exit_code is None
    assert 1000 <= result.duration_ms < 5000
    pids = {name: int(pid) for name, pid in re.findall(r"(outer|inner|sleep) (\d+)", result.output)}
    assert set(pids) == {"outer", "inner", "sleep"}, result.output
    for name, pid in pids.items():
        assert await gone(pid), f"{name} process {pid} survived the timeout"


async def test_timeout_kills_processes_that_left_the_session(tmp_path: Path) -> None:
    """setsid and a double fork leave the process group and session; the timeout still ends
    them (issue 16: a setsid background process outlived the command timeout)."""
    result = await run(
        "setsid sleep 30 > /dev/null 2>&1 & echo a $!; "
        "( setsid sleep 31 > /dev/null 2>&1 & echo b $! ); "  # orphaned at once: a daemon
        "( nohup setsid bash -c 'trap \"\" TERM HUP; sleep 32' > /dev/null 2>&1 & echo c $! ); "
        "sleep 20", tmp_path, secs=1.5)
    assert result.timed_out
    pids = [int(pid) for pid in re.findall(r"^[abc] (\d+)$", result.output, re.M)]
    assert len(pids) == 3, result.output
    for pid in pids:
        assert await gone(pid), f"{pid} survived the timeout"


async def test_cancellation_kills_the_group_and_reraises(tmp_path: Path) -> None:
    task = asyncio.create_task(run("sleep 30 & echo $! > pid; wait", tmp_path, secs=60))
    pid_file = tmp_path / "pid"
    deadline = time.monotonic() + 5
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline, "command did not start"
        await asyncio.sleep(0.02)
    pid = int(pid_file.read_text())
    assert alive(pid)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(pid)


async def test_background_job_holding_the_pipe_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(command_mod, "DRAIN_GRACE_SECS", 0.2)
    started = time.monotonic()
    result = await run("sleep 30 & echo bg $!", tmp_path, secs=10)
    assert time.monotonic() - started < 3
    assert (result.exit_code, result.timed_out) == (0, False)
    assert result.output.startswith("bg ")
    assert "background processes" in result.output
    assert await gone(int(result.output.split()[1]))


async def test_background_job_with_redirected_output_keeps_running(tmp_path: Path) -> None:
    result = await run("sleep 30 > /dev/null 2>&1 & echo $!", tmp_path, secs=10)
    pid = int(result.output)
    try:
        assert (result.exit_code, result.timed_out) == (0, False)
        assert result.duration_ms < 2000
        assert alive(pid)
    finally:
        os.kill(pid, signal.SIGKILL)


async def test_output_cap_keeps_head_and_tail(tmp_path: Path) -> None:
    full = "START\n" + "".join(f"{i}\n" for i in range(1, 100_001)) + "END\n"
    result = await run("echo START; seq 1 100000; echo END", tmp_path, limit=1000)
    assert result.truncated is True
    assert result.exit_code == 0
    assert len(result.output) <= 1000
    match = re.search(r"\n\[\.\.\. (\d+) characters cut \.\.\.\]\n", result.output)
    assert match, result.output
    head, tail = result.output[: match.start()], result.output[match.end() :]
    assert head.startswith("START\n1\n2\n3\n")
    assert tail.endswith("99999\n100000\nEND\n")
    assert full.startswith(head) and full.endswith(tail)
    assert int(match.group(1)) == len(full) - len(head) - len(tail)
    assert len(head) > 400 and len(tail) > 400


async def test_output_under_the_limit_is_whole(tmp_path: Path) -> None:
    full = "".join(f"{i}\n" for i in range(1, 2001))
    result = await run("seq 1 2000", tmp_path, limit=len(full))
    assert (result.output, result.truncated) == (full, False)


async def test_utf8_decoding_across_chunks_and_invalid_bytes(tmp_path: Path) -> None:
    result = await run("printf x; printf 'é%.0s' {1..100000}", tmp_path, limit=200_000)
    assert result.output == "x" + "é" * 100_000
    bad = await run(r"printf 'a\xffb'", tmp_path)
    assert bad.output == "a\ufffdb"


def test_scrubbed_env() -> None:
    environ = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/me",
        "LANG": "C.UTF-8",
        "ANTHROPIC_API_KEY": "x",
        "github_token": "x",
        "DB_PASSWORD": "x",
        "WM__MODELS__DEFAULT": "x",
        "NATS_URL": "nats://localhost:4222",
        "WINTERMUTE_NATS_CREDS": "x",
        "MY_SERVICE": "named explicitly",
        "EDITOR": "vi",
    }
    assert scrubbed_env(environ, ["MY_SERVICE"]) == {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/me",
        "LANG": "C.UTF-8",
        "EDITOR": "vi",
    }


def test_scrubbed_env_drops_secrets_by_value_whatever_their_name() -> None:
    """Issue 16: DATABASE_URL-style variables carried secrets into the sandbox."""
    redactor = Redactor(["dotenv-secret-1234", "another-known-5678"])
    environ = {
        "PATH": "/usr/bin:/bin",
        "SHORT_FLAG": "1",
        "COPY_OF_DOTENV": "dotenv-secret-1234",
        "DATABASE_URL": "postgres://app:another-known-5678@db:5432/app",
        "OTHER_DSN": "mysql://root:hunter2hunter@localhost/x",
        "UPSTREAM": "https://u:p@example.com/",
        "PUBLIC_URL": "https://example.com/a:b@c",  # no password in the authority: kept
        "TOOLING": "ghp_" + "a" * 36,
    }
    assert scrubbed_env(environ, [], redactor) == {
        "PATH": "/usr/bin:/bin", "SHORT_FLAG": "1", "PUBLIC_URL": "https://example.com/a:b@c"}


async def test_child_does_not_see_scrubbed_secrets(tmp_path: Path) -> None:
    environ = {
        **BASE_ENV,
        "OPENAI_API_KEY": "sekrit-openai-value",
        "PLAIN_FROM_DOTENV": "sekrit-dotenv-value",
        "WM__NATS__URL": "nats://x",
        "VISIBLE_SETTING": "fine",
    }
    result = await run("env", tmp_path, env=scrubbed_env(environ, ["PLAIN_FROM_DOTENV"]))
    assert "sekrit" not in result.output
    assert "WM__" not in result.output
    assert "VISIBLE_SETTING=fine" in result.output
    assert f"PATH={BASE_ENV['PATH']}" in result.output
