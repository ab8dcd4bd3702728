"""kit/capability.py: the per-home key and token signatures."""

from __future__ import annotations

import stat
from pathlib import Path

import msgspec
import pytest

from contracts.capability import Capability
from kit import capability


def test_the_key_is_made_once_private_and_shared(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(capability.ENV, raising=False)
    first = capability.load_key(tmp_path)
    assert capability.load_key(tmp_path) == first and len(first) == 32
    path = capability.key_path(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not list(path.parent.glob("*.tmp"))
    monkeypatch.setenv(capability.ENV, "zz")
    with pytest.raises(ValueError, match="must be a hex string"):
        capability.load_key(tmp_path)


def test_a_changed_token_or_another_key_is_not_genuine() -> None:
    cap = Capability(request="r", session="s", turn_id="t", template="owner_chat",
                     principal="terminal:owner", principal_kind="owner", tool="web_fetch",
                     args=capability.digest({"url": "https://a.example", "n": 1}))
    key = b"k" * 32
    signed = capability.sign(key, cap)
    assert capability.genuine(key, signed)
    assert not capability.genuine(b"x" * 32, signed)
    assert not capability.genuine(key, msgspec.structs.replace(signed, tool="execute_command"))
    assert capability.digest({"n": 1, "url": "https://a.example"}) == cap.args  # key order
