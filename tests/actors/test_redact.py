"""Tests for secret redaction, the .env parser and the inbound credential guard."""

from __future__ import annotations

from pathlib import Path

import pytest

from kit.envfile import parse_dotenv
from kit.redact import (
    REDACTED,
    Redactor,
    credential_guard,
    looks_secret_name,
    redact_patterns,
)

# Fake credentials, assembled so that no literal key sits in the source.
ANTHROPIC = "sk-ant-api03-" + "Ab3dE_fG5h-" * 8
OPENAI = "sk-proj-" + "Q9wErTy7uIoP" * 4
OPENAI_OLD = "sk-" + "a1B2c3D4e5F6" * 4
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2
GITHUB_PAT = "github_pat_" + "11ABCDEFG0" * 4
GITLAB = "glpat-" + "xY7_zW3-vU5t" * 2
SLACK = "xoxb-" + "1234567890-0987654321-AbCdEfGhIjKl"
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
TELEGRAM = "123456789:" + "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw7"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7x\nabc+/def==\n-----END RSA PRIVATE KEY-----"
)


@pytest.mark.parametrize(
    ("secret", "kind"),
    [
        (ANTHROPIC, "anthropic-key"),
        (OPENAI, "openai-key"),
        (OPENAI_OLD, "openai-key"),
        (GITHUB, "github-token"),
        (GITHUB_PAT, "github-token"),
        (GITLAB, "gitlab-token"),
        (SLACK, "slack-token"),
        ("xapp-1-A0123456789-abcdef", "slack-token"),
        (AWS, "aws-access-key"),
        (TELEGRAM, "telegram-token"),
        (PEM, "private-key"),
    ],
)
def test_patterns_name_what_they_found(secret: str, kind: str) -> None:
    text = f"before {secret} after"
    out, found = redact_patterns(text)
    assert out == f"before [REDACTED:{kind}] after"
    assert found == [kind]


def test_bearer_keeps_the_scheme_word() -> None:
    out = Redactor().redact("curl -H 'Authorization: Bearer eyJhbGciOi.J9x-4_abc/def=' x")
    assert out == "curl -H 'Authorization: Bearer [REDACTED:bearer-token]' x"


def test_unterminated_private_key_is_redacted_to_the_end() -> None:
    text = "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA"
    assert redact_patterns(text)[0] == "key:\n[REDACTED:private-key]"


@pytest.mark.parametrize(
    "text",
    [
        "The quick brown fox jumps over the lazy dog; bearer of good news.",
        "commit 3f786850e387550fdab836ed7e6dc881de23001b is on main",
        "id 123e4567-e89b-12d3-a456-426614174000 created",
        "see https://example.com/path/to/page?query=1&b=two#frag and http://localhost:8080/",
        "risk-assessment-framework-for-everyone and task-ant-colony-simulation",
        "AKIA is a prefix; 12:30 is a time; scikit-learn sk-learn are libs",
        "export PATH=/usr/local/bin:/usr/bin; ls -la ~/.ssh",
    ],
)
def test_ordinary_text_survives(text: str) -> None:
    assert Redactor(["not-in-this-text-secret"]).redact(text) == text
    assert credential_guard(text).action == "pass"


def test_exact_values_longest_first_and_short_ones_ignored() -> None:
    redactor = Redactor(["hunter2", "supersecretvalue", "supersecretvalue-extended"])
    assert redactor.secrets == {"supersecretvalue", "supersecretvalue-extended"}
    out = redactor.redact("a supersecretvalue-extended b supersecretvalue c hunter2")
    assert out == f"a {REDACTED} b {REDACTED} c hunter2"


def test_exact_values_with_regex_characters() -> None:
    secret = "p4ss.w*rd+(x)?"
    assert Redactor([secret]).redact(f"pw={secret};") == f"pw={REDACTED};"
    assert Redactor([secret]).redact("pw=p4ssXw*rd") == "pw=p4ssXw*rd"


def test_looks_secret_name() -> None:
    for name in [
        "ANTHROPIC_API_KEY",
        "github_token",
        "DB_PASSWORD",
        "MY_PASSWD",
        "AWS_SECRET",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "BASIC_AUTH",
        "SESSION_COOKIE",
        "PRIVATE_PEM",
    ]:
        assert looks_secret_name(name), name
    for name in ["PATH", "HOME", "LANG", "SSH_AUTH_SOCK", "XAUTHORITY", "TERM"]:
        assert not looks_secret_name(name), name


def test_parse_dotenv() -> None:
    text = (
        "# a comment\n"
        "\n"
        "PLAIN=value1\n"
        "export EXPORTED=value2\n"
        "  SPACED = value3  \n"
        "INLINE=value4 # trailing comment\n"
        "HASH=abc#def\n"
        'DOUBLE="two words # not a comment"\n'
        "SINGLE='single $literal \\n'\n"
        'ESCAPED="line1\\nline2 \\"q\\""\n'
        'MULTI="first\n'
        'second"\n'
        "EMPTY=\n"
        "not a valid line\n"
        "AFTER=ok\n"
    )
    assert parse_dotenv(text) == {
        "PLAIN": "value1",
        "EXPORTED": "value2",
        "SPACED": "value3",
        "INLINE": "value4",
        "HASH": "abc#def",
        "DOUBLE": "two words # not a comment",
        "SINGLE": "single $literal \\n",
        "ESCAPED": 'line1\nline2 "q"',
        "MULTI": "first\nsecond",
        "EMPTY": "",
        "AFTER": "ok",
    }


def test_from_env_collects_dotenv_and_secret_looking_env(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text(
        "WINTERMUTE_TELEGRAM_TOKEN='tg-value-from-dotenv'\nODD_NAME=plainvalue99\nS=short\n"
    )
    environ = {
        "OPENAI_API_KEY": "env-openai-value",
        "PATH": "/usr/bin:/bin:/usr/local/bin",
        "HOME": "/home/someone-long",
        "GH_TOKEN": "tiny",
    }
    redactor = Redactor.from_env(dotenv, environ)
    assert redactor.secrets == {"tg-value-from-dotenv", "plainvalue99", "env-openai-value"}
    text = "tg-value-from-dotenv plainvalue99 env-openai-value /usr/bin:/bin:/usr/local/bin tiny"
    assert (
        redactor.redact(text)
        == f"{REDACTED} {REDACTED} {REDACTED} /usr/bin:/bin:/usr/local/bin tiny"
    )


def test_from_env_without_dotenv(tmp_path: Path) -> None:
    assert Redactor.from_env(None, {"API_KEY": "abcdefgh12"}).secrets == {"abcdefgh12"}
    assert Redactor.from_env(tmp_path / "missing.env", {}).secrets == frozenset()


def test_guard_blocks_a_bare_credential() -> None:
    result = credential_guard(f"  {ANTHROPIC}\n")
    assert result.action == "block"
    assert result.found == ["anthropic-key"]
    assert "WINTERMUTE_HOME/.env" in result.text
    assert "not passed on" in result.text
    assert ANTHROPIC not in result.text


def test_guard_blocks_a_credential_with_few_words() -> None:
    assert credential_guard(f"my token: {TELEGRAM}").action == "block"
    # three words remain, but under 20% of the characters
    assert credential_guard(f"use this {ANTHROPIC} pls").action == "block"


def test_guard_redacts_a_credential_inside_a_longer_message() -> None:
    text = (
        f"I rotated the deploy credentials yesterday and the old one was {GITHUB}, "
        "so please check whether any of the scheduled jobs still reference it anywhere."
    )
    result = credential_guard(text)
    assert result.action == "redact"
    assert result.found == ["github-token"]
    assert GITHUB not in result.text
    assert "old one was [REDACTED:github-token], so please" in result.text


def test_guard_uses_known_values_from_a_redactor() -> None:
    redactor = Redactor(["correct-horse-battery"])
    assert credential_guard("correct-horse-battery", redactor).action == "block"
    assert credential_guard("correct-horse-battery").action == "pass"
    result = credential_guard(
        "the database password used to be correct-horse-battery before we changed it", redactor
    )
    assert result.action == "redact"
    assert result.found == ["secret-value"]
    assert "correct-horse-battery" not in result.text


def test_dotenv_values_are_taken_literally_and_a_missing_file_is_empty(tmp_path: Path) -> None:
    from kit.envfile import dotenv_value, load_dotenv

    env = tmp_path / ".env"
    env.write_text('TOKEN="a${HOME}b$c"\nOTHER=x\n')
    assert dotenv_value(env, "TOKEN") == "a${HOME}b$c"  # no interpolation of secrets
    assert dotenv_value(env, "MISSING") == ""
    assert load_dotenv(tmp_path / "absent.env") == {}
