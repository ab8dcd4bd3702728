"""Host-side git never runs anything the sandbox wrote into scripts/ (kit/safegit.py).

Each attack plants what code in the sandbox can write (a scripts/.git with hooks, fsmonitor,
filters, textconv, merge drivers and includes; a .gitattributes naming them) and then drives
every host-side git entry point: the executor's commits and revert, the dependency commit,
the supervisor's look at a tool's history, and `up`'s repository set-up and migration.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from actors.executor.dynamic.git import commit_paths, revert_last, tracked
from kit.safegit import clone_bundle, git_dir, git_env, has_repo, run_git
from supervisor.flatline import scripts_git
from supervisor.process.home import init_home


def payload(scripts: Path, marker: Path) -> dict[str, str]:
    """Everything a sandboxed command could write into scripts/ to make git run `touch marker`."""
    cmd = f"touch {marker}"
    files = {f".git/hooks/{hook}": f"#!/bin/sh\n{cmd}\n"
             for hook in ("pre-commit", "post-commit", "commit-msg", "prepare-commit-msg",
                          "reference-transaction", "post-checkout", "post-index-change")}
    files["evil.cfg"] = f"[core]\n\tfsmonitor = {cmd}\n"
    files[".git/config"] = (
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
        f"\tfsmonitor = {cmd}\n\tpager = {cmd}\n\thooksPath = .git/hooks\n"
        f"[filter \"evil\"]\n\tclean = {cmd}\n\tsmudge = {cmd}\n\trequired = true\n"
        f"[diff \"evil\"]\n\ttextconv = {cmd}\n\tcommand = {cmd}\n"
        f"[merge \"evil\"]\n\tdriver = {cmd}\n"
        f"[include]\n\tpath = {scripts / 'evil.cfg'}\n")
    files[".git/HEAD"] = "ref: refs/heads/master\n"
    files[".gitattributes"] = "* filter=evil diff=evil merge=evil\n"
    return files


def plant(scripts: Path, marker: Path) -> None:
    for rel, text in payload(scripts, marker).items():
        path = scripts / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)


def fired(*markers: Path) -> bool:
    """Whether any planted command ran."""
    return any(m.exists() for m in markers)


def plant_script(marker: str) -> str:
    """The same payload as a shell command run inside the sandbox, writing to /scripts."""
    lines = ["set -e"]
    for rel, text in payload(Path("/scripts"), Path(marker)).items():
        encoded = base64.b64encode(text.encode()).decode()
        lines += [f"mkdir -p \"$(dirname /scripts/{rel})\"",
                  f"echo {encoded} | base64 -d > /scripts/{rel}", f"chmod 755 /scripts/{rel}"]
    return "\n".join(lines)


@pytest.fixture
def hostile_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The host process's own environment also names git config; none of it may reach git."""
    marker = tmp_path / "env-marker"
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.fsmonitor")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", f"touch {marker}")
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", f"touch {marker}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-not-for-git-000000000000")
    return marker


async def test_no_host_side_git_entry_point_runs_what_the_sandbox_planted(
    home: Path, tmp_path: Path, hostile_env: Path
) -> None:
    scripts = home / "scripts"
    marker = tmp_path / "marker"
    assert has_repo(scripts) and not (scripts / ".git").exists()
    plant(scripts, marker)
    (scripts / "x.py").write_text("print(1)\n")
    assert await commit_paths(scripts, ["x.py", ".gitattributes"], "create tool: x")
    assert await tracked(scripts, "x.py")
    (scripts / "x.py").write_text("print(2)\n")
    assert await commit_paths(scripts, ["x.py"], "update tool: x")
    last = await scripts_git.last_commit(scripts, "x")
    assert last is not None and last.subject == "update tool: x" and last.is_head
    undone = await revert_last(scripts, expect_head=last.sha)
    assert undone.ok, undone.text
    assert (scripts / "x.py").read_text() == "print(1)\n"
    assert not fired(marker, hostile_env)
    # the planted .git is not the repository and never became part of it
    assert ".git/config" not in run_git(scripts, "ls-files")[1]
    assert run_git(scripts, "log", "-1", "--format=%s")[1] == "revert: update tool: x"


def test_git_gets_no_inherited_environment(hostile_env: Path, home: Path) -> None:
    env = git_env(home / "scripts")
    assert "ANTHROPIC_API_KEY" not in env and "GIT_CONFIG_COUNT" not in env
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_CONFIG_GLOBAL"] == "/dev/null"
    assert env["GIT_DIR"] == str(home / "data" / "scripts.git")
    assert os.listdir(env["HOME"]) == []


def test_an_old_scripts_git_is_moved_aside_and_only_its_files_imported(
    tmp_path: Path, hostile_env: Path
) -> None:
    home = tmp_path / "old"
    scripts = home / "scripts"
    scripts.mkdir(parents=True)
    marker = tmp_path / "marker"
    (scripts / "tool.py").write_text("print('kept')\n")
    plant(scripts, marker)
    created = init_home(home)
    assert "data/scripts.git" in created and any("untrusted" in c for c in created)
    assert not (scripts / ".git").exists()
    assert [p.name for p in (home / "data").glob("scripts.git.untrusted-*")]
    assert "tool.py" in run_git(scripts, "ls-files")[1].split()
    config = (git_dir(scripts) / "config").read_text()
    assert "evil" not in config and "fsmonitor" not in config
    assert init_home(home) == []  # once
    assert not marker.exists() and not hostile_env.exists()


async def test_a_sandboxed_command_cannot_make_host_git_run_a_program(
    settings_for: object, home: Path
) -> None:
    """The same attack from inside bubblewrap, through the scripts/ mount."""
    from actors.executor.sandbox import detect_sandbox
    from tests.fakes.sandboxes import require

    require({"bwrap": "bubblewrap"})
    settings = settings_for(WM__EXECUTOR__MODE="bwrap", WM__EXECUTOR__NETWORK="none")  # type: ignore[operator]
    sb = await detect_sandbox(settings.config, settings.home)
    marker = home / "workspace" / "pwned"  # visible to both sides
    (home / "scripts" / "x.py").write_text("print(3)\n")
    try:
        res = await sb.run(plant_script("/workspace/pwned") + "\nls -a /scripts",
                           cwd=home / "workspace", timeout=30, output_limit=5000,
                           env={"PATH": "/usr/bin:/bin"})
        assert res.exit_code == 0 and ".git" in res.output, res.output
    finally:
        await sb.close()
    scripts = home / "scripts"
    assert await commit_paths(scripts, ["x.py"], "create tool: x")
    assert await scripts_git.last_commit(scripts, "x") is not None
    assert (await revert_last(scripts)).ok
    assert not fired(marker)


def test_a_bundle_restores_into_data_scripts_git_not_into_scripts(
    home: Path, tmp_path: Path
) -> None:
    """`wintermute backup`/`restore` keep the layout: history in data/scripts.git only."""
    scripts = home / "scripts"
    (scripts / "t.py").write_text("print(1)\n")
    run_git(scripts, "add", "t.py")
    run_git(scripts, "commit", "-q", "-m", "create tool: t")
    bundle = tmp_path / "scripts.bundle"
    run_git(scripts, "bundle", "create", str(bundle), "--all")
    target = tmp_path / "restored" / "scripts"
    clone_bundle(target, bundle)
    assert has_repo(target) and not (target / ".git").exists()
    assert (target / "t.py").read_text() == "print(1)\n"
    assert run_git(target, "log", "--format=%s")[1].splitlines()[0] == "create tool: t"
    assert run_git(target, "remote")[1] == ""
