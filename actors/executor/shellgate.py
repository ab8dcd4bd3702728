"""Direct mode's approval rule: a command runs unasked only if a shell parser shows it is made of
harmless commands; everything else waits for the owner.

Direct mode has no sandbox, so a list of dangerous patterns is the wrong way round: every
obfuscation (`rm -R`, `find -delete`, `cat s.sh | bash`, `c=rm; $c -rf`, `$(...)`, backticks,
`eval`, `bash -c`, quoting tricks) passes some regex. Here the command line is split like the
shell splits it (quotes, `;`, `&&`, `||`, `|`, `&`, newlines, parentheses, redirections) and
each simple command must start with a name on the allowlist (`executor.direct_allowlist`),
written plainly, with no argument that makes it write or run something else. Anything the
parser cannot vouch for (substitutions, assignments, keywords, redirection into files, an
unbalanced quote) needs approval. The rule over-asks rather than under-asks.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

from contracts.config import DIRECT_ALLOWLIST

DEFAULT_ALLOWLIST = tuple(DIRECT_ALLOWLIST)
#: Arguments that turn an allowlisted command into one that writes, deletes or runs things.
RISKY_ARGS: dict[str, tuple[str, ...]] = {
    "find": ("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0",
             "-fprintf", "-fls"),
    "sort": ("-o", "--output"),
    "date": ("-s", "--set"),
    "tree": ("-o",),
    "file": ("-C", "--compile"),
}
SYSTEM_DIRS = ("/usr/local/bin/", "/usr/bin/", "/bin/")
#: Words that reach this installation's secrets or other processes' environments.
SENSITIVE = re.compile(r"\.env\b|users\.json|data/nats|\.ssh\b|id_rsa|id_ed25519|environ\b"
                       r"|\.wintermute\b|config\.toml")
SUBSTITUTION = re.compile(r"\$\(|`|<\(|>\(")
# Plain arithmetic, $((40+2)), runs nothing. No parentheses inside: bash re-reads
# `$((a)|(b))` as a command substitution, so only the simplest form is let through.
ARITHMETIC = re.compile(r"\$\(\([\w+\-*/%<>=!&|^~?:, \t]*\)\)")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+?=")
SEPARATORS = frozenset(";&|()\n")
SAFE_TARGETS = frozenset({"/dev/null", "-", "0", "1", "2"})


def review(command: str, allowlist: Iterable[str] = DEFAULT_ALLOWLIST) -> str:
    """Why command needs the owner's approval, as a sentence; "" when it is harmless."""
    allowed = frozenset(allowlist)
    command = ARITHMETIC.sub("0", command)  # its operators are not the shell's
    if SUBSTITUTION.search(command):
        return ("The command contains a substitution ($(...), backticks or <(...)), which can "
                "run anything, so it needs the owner's approval.")
    try:
        words = _tokens(command)
    except ValueError as exc:
        return f"The command could not be parsed ({exc}), so it needs the owner's approval."
    for simple in _simple_commands(words):
        reason = _review_simple(simple, allowed)
        if reason:
            return reason
    return ""


def _tokens(command: str) -> list[str]:
    lex = shlex.shlex(command, posix=True, punctuation_chars=";&|()<>\n")
    lex.whitespace = " \t\r"  # a newline separates commands, as in the shell
    lex.commenters = ""  # '#' inside a word is not a comment; over-reading is the safe side
    lex.whitespace_split = True
    return list(lex)


def _simple_commands(words: list[str]) -> list[list[str]]:
    """Split at separators; a redirection stays in its command as [operator, target]."""
    out: list[list[str]] = [[]]
    for word in words:
        if word and set(word) <= SEPARATORS | {"<", ">"} and set(word) & SEPARATORS:
            out.append([])
            if set(word) & {"<", ">"}:  # ")>" and the like: a separator and a redirection
                out[-1].append(word.strip("".join(SEPARATORS)))
            continue
        out[-1].append(word)
    return [c for c in out if c]


def _is_flag(arg: str, flag: str) -> bool:
    """arg is flag, flag=value, or (for a one-letter flag) a cluster such as -uo containing it."""
    if arg == flag or arg.startswith(flag + "="):
        return True
    short = len(flag) == 2 and flag[0] == "-"
    return short and arg.startswith("-") and not arg.startswith("--") and flag[1] in arg[1:]


def _review_simple(words: list[str], allowed: frozenset[str]) -> str:
    args: list[str] = []
    skip = False
    for i, word in enumerate(words):
        if skip:
            skip = False
            continue
        if word and set(word) <= {"<", ">", "&", "|"}:
            target = words[i + 1] if i + 1 < len(words) else ""
            if ">" in word and target not in SAFE_TARGETS:
                return (f"The command writes to {target or 'a file'} with {word}, so it needs "
                        "the owner's approval.")
            skip = True
            continue
        args.append(word)
    if not args:
        return ""
    name, rest = args[0], args[1:]
    if ASSIGNMENT.match(name):
        return ("The command sets a variable before or instead of a command (it could change "
                "what runs), so it needs the owner's approval.")
    base = next((name[len(d):] for d in SYSTEM_DIRS if name.startswith(d)), name)
    if base not in allowed:
        return (f"The command runs {name!r}, which is not on the list of harmless commands "
                "(executor.direct_allowlist), so it needs the owner's approval.")
    for arg in rest:
        if any(_is_flag(arg, flag) for flag in RISKY_ARGS.get(base, ())):
            return f"{base} {arg} changes or runs things, so it needs the owner's approval."
        if SENSITIVE.search(arg):
            return (f"The command reads {arg!r}, which may hold secrets or credentials, so it "
                    "needs the owner's approval.")
    return ""
