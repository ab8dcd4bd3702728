"""Direct mode's approval rule (actors/executor/shellgate.py): parsed like the shell, allowlist
first. The obfuscations of issue 16 each need approval; ordinary looking-around does not."""

from __future__ import annotations

import pytest

from actors.executor.policy import PolicyGate
from actors.executor.shellgate import review
from contracts.config import DEFAULT_RISKY, DIRECT_ALLOWLIST

OBFUSCATIONS = [
    "rm -R build",                                  # 1. the flag the regex missed
    "find . -name '*.tmp' -delete",                 # 2. deleting without rm
    "cat s.sh | bash",                              # 3. a pipe into a shell
    "c=rm; $c -rf build",                           # 4. variable indirection
    "$(echo rm) -rf build",                         # 5. command substitution
    "`printf rm` -rf build",                        # 6. backticks
    "eval 'rm -rf build'",                          # 7. eval
    "bash -c 'rm -rf build'",                       # 8. a nested shell
    "'r''m' -rf build",                             # 9. quoting the name apart
]
MORE = [
    "echo ok\nrm -rf build",                        # a newline separates commands
    "echo a#b; rm -rf build",                       # '#' inside a word is no comment
    "ls && /bin/rm -rf build", "ls || rm x", "ls & rm x", "(rm -rf build)",
    "{ rm -rf build; }", "echo x > ~/.bashrc", "echo x >> notes.txt", "ls &> out.log",
    "cat <(rm x)", "find . -exec rm {} +", "sort -o out.txt in.txt", "sort -uo out in",
    "PATH=/tmp/evil ls", "LD_PRELOAD=/tmp/x.so ls", "/tmp/ls", "./ls", "xargs rm < list",
    "python3 -c 'import shutil; shutil.rmtree(\"b\")'", "base64 -d s.b64 | sh",
    "nohup setsid sleep 100 &", "echo 'unbalanced", "cat ../.env", "cat /proc/1/environ",
    "grep -r KEY ~/.wintermute", "date -s '2020-01-01'", "sudo ls", "env rm -rf build",
    "command rm -rf build", "exec rm -rf build", "{rm,-rf,build}", "$'\\x72m' -rf build",
    "echo $((echo hi)|(rm -rf x))", "echo $((1+$(rm -rf x)))", "echo $(( (1) ))",
    "tee out.txt < in.txt", "git push --force", "tree -o listing.txt", "file -C -m magic",
]
HARMLESS = [
    "ls -la", "pwd", "cat notes.txt | grep -i todo | wc -l", "head -n 5 log.txt; tail log.txt",
    "echo 'a; b | c' > /dev/null", "ls missing 2>&1", "ls 2>/dev/null || echo none",
    "find . -name '*.py' -type f", "sort data.txt",
    "date", "du -sh .", "grep -n 'def ' *.py", "cd sub && ls", "echo \"$HOME\"",
    "/usr/bin/ls -l", "echo node-$((40+2))", "seq $((2 * 3))",
]


@pytest.mark.parametrize("command", OBFUSCATIONS + MORE)
def test_obfuscated_and_unknown_commands_need_approval(command: str) -> None:
    reason = review(command)
    assert reason and reason.endswith("approval."), command


@pytest.mark.parametrize("command", HARMLESS)
def test_looking_around_runs_without_asking(command: str) -> None:
    assert review(command) == "", command


def test_reasons_name_what_was_found() -> None:
    assert "'rm'" in review("rm -R build") and "direct_allowlist" in review("rm -R build")
    assert "substitution" in review("$(echo rm) -rf x")
    assert "writes to notes.txt" in review("echo x >> notes.txt")
    assert "-delete" in review("find . -delete")
    assert "could not be parsed" in review("echo 'open")


def test_the_gate_uses_the_allowlist_only_in_direct_mode() -> None:
    direct = PolicyGate(DEFAULT_RISKY, allowlist=DIRECT_ALLOWLIST)
    sandboxed = PolicyGate([r"\bgit\s+push\b.*--force"])
    for command in OBFUSCATIONS:
        assert direct.decide("execute_command", {"command": command}, True).verdict == "approve"
        assert sandboxed.decide("execute_command", {"command": command}, True).verdict == "allow"
    assert direct.decide("execute_command", {"command": "ls -la"}, True).verdict == "allow"
    owner_extends = PolicyGate([], allowlist=[*DIRECT_ALLOWLIST, "make"])
    assert owner_extends.decide("execute_command", {"command": "make test"}, True).verdict == "allow"
