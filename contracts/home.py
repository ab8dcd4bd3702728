"""Messages of the WriteGate for the home's prompt files (AGENTS.md, USER.md): proposals from
the observer and the heartbeat, the owner's commands (history, revert), and the answers."""

from __future__ import annotations

from contracts.base import Msg
from contracts.channel import Sink


class HomeEditPropose(Msg, frozen=True, kw_only=True, tag="home.propose"):
    """A proposed change to one gated file in the home, applied by the executor only after the
    owner approves or by policy (`[memory] agents_md` / `user_md`). Exactly one of `text` (the
    whole new file), `append` (lines added at its end) and `lessons` (a model's answer as it
    wrote it: a JSON list of sentences, appended as bullets) is set; anything else, or lessons
    that are not such a list, is dead-lettered with the reason, nothing written."""

    path: str  # AGENTS.md | USER.md
    text: str = ""
    append: str = ""
    lessons: str = ""
    reason: str = ""
    by: str = ""  # who proposed: observer:reflection, heartbeat:digest, ...
    session: str = ""
    principal: str = ""
    is_owner: bool = False


class HomeCommand(Msg, frozen=True, kw_only=True, tag="home.command"):
    """The owner's `/memory history|revert|pending` (chat) or `wintermute memory history|revert`
    (CLI) about the gated files; answered with a Notice to `reply_to` and a `home.answer`."""

    action: str = "history"  # history | revert | pending
    arg: str = ""  # revert: the version (a commit, or empty for the newest change)
    principal: str = ""
    is_owner: bool = False
    reply_to: Sink | None = None


class HomeAnswer(Msg, frozen=True, kw_only=True, tag="home.answer"):
    """What a HomeCommand did, on `evt.home.answer.<hash of the request id>`."""

    request: str
    ok: bool = True
    text: str = ""
    commit: str = ""
