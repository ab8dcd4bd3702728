"""Slack text: Markdown to mrkdwn, escaping, splitting under the length limit, Block Kit."""

from __future__ import annotations

import re
import time
from typing import Any

FENCE = "```"
_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]+`", re.S)
_LINK = re.compile(r"\[([^\]\n]+)\]\(((?:https?://|mailto:)[^)\s]+)\)")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC = re.compile(r"(?<![*\w])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![*\w])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
_BULLET = re.compile(r"^(\s*)[-*+]\s+", re.M)
_BOLD_MARK = "\x01"


def escape(text: str) -> str:
    """Escape the three characters Slack treats as control sequences."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _prose(text: str) -> str:
    text = escape(text)
    text = _HEADING.sub(lambda m: f"{_BOLD_MARK}{m.group(1)}{_BOLD_MARK}", text)
    text = _BOLD.sub(lambda m: f"{_BOLD_MARK}{m.group(1) or m.group(2)}{_BOLD_MARK}", text)
    text = _ITALIC.sub(r"_\1_", text)
    text = _BULLET.sub(r"\1• ", text)
    text = _STRIKE.sub(r"~\1~", text)
    text = _LINK.sub(lambda m: f"<{m.group(2)}|{m.group(1)}>", text)
    return text.replace(_BOLD_MARK, "*")


def to_mrkdwn(markdown: str) -> str:
    """Convert the model's Markdown to Slack mrkdwn; code is kept verbatim (escaped only).

    Everything is escaped, so text from the model can never produce a user/channel mention
    or an @here/@channel broadcast.
    """
    out: list[str] = []
    pos = 0
    for m in _CODE.finditer(markdown):
        out.append(_prose(markdown[pos : m.start()]))
        code = m.group(0)
        if code.startswith(FENCE):
            body = code[3:-3] if code.endswith(FENCE) and len(code) >= 6 else code[3:]
            first, nl, rest = body.partition("\n")
            if nl and re.fullmatch(r"[\w+#.-]*", first.strip()):
                body = rest  # Slack shows no language tag; drop it
            code = FENCE + "\n" + escape(body.strip("\n")) + "\n" + FENCE
            if out and out[-1] and not out[-1].endswith("\n"):
                code = "\n" + code
        else:
            code = escape(code)
        out.append(code)
        pos = m.end()
    out.append(_prose(markdown[pos:]))
    return "".join(out).strip()


def _safe_cut(text: str, cut: int) -> int:
    """Move a hard cut back so it does not break an &entity; or a <link|label>."""
    amp = text.rfind("&", max(0, cut - 6), cut)
    if amp >= 0 and ";" not in text[amp:cut]:
        cut = amp
    lt, gt = text.rfind("<", 0, cut), text.rfind(">", 0, cut)
    if lt > gt and lt > 0 and cut - lt < 600:
        cut = lt
    return max(cut, 1)


def _best_cut(text: str, limit: int) -> int:
    window = text[:limit]
    for sep, floor in (("\n\n", limit // 2), ("\n", limit // 3), (" ", limit // 3)):
        at = window.rfind(sep)
        if at >= floor:
            return _safe_cut(text, at + len(sep))
    return _safe_cut(text, limit)


def split(text: str, limit: int) -> list[str]:
    """Split mrkdwn into chunks of at most `limit` characters at paragraph, line or word
    boundaries; a code block cut in two is closed and reopened so both halves render."""
    chunks: list[str] = []
    rest = text.strip()
    while len(rest) > limit:
        cut = _best_cut(rest, limit - len(FENCE) - 1)
        head, rest = rest[:cut].rstrip(), rest[cut:].lstrip("\n")
        if head.count(FENCE) % 2 == 1:  # cut inside a code block
            head = head + "\n" + FENCE
            rest = FENCE + "\n" + rest
        if head.strip() and head.strip() != FENCE * 2:
            chunks.append(head)
    if rest.strip():
        chunks.append(rest)
    return chunks


def approval_blocks(approval_id: str, summary: str, expires_at: float) -> list[dict[str, Any]]:
    """An approval prompt: what will run, why, and Approve / Deny buttons."""
    minutes = max(1, round((expires_at - time.time()) / 60))
    fallback = time.strftime("%H:%M UTC", time.gmtime(expires_at))
    return [
        {"type": "section", "text": {"type": "mrkdwn",
                                     "text": "*Approval needed*\n" + escape(summary)[:2900]}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text":
            f"id `{approval_id}` · expires <!date^{int(expires_at)}^{{time}}|{fallback}> "
            f"(in about {minutes} min) · or answer with /approve {approval_id}"}]},
        {"type": "actions", "block_id": "approval", "elements": [
            {"type": "button", "action_id": "wm_approve", "style": "primary", "value": approval_id,
             "text": {"type": "plain_text", "text": "Approve"}},
            {"type": "button", "action_id": "wm_deny", "style": "danger", "value": approval_id,
             "text": {"type": "plain_text", "text": "Deny"}},
        ]},
    ]


def answered_blocks(blocks: list[dict[str, Any]], user: str, approved: bool) -> list[dict[str, Any]]:
    """The prompt after a click: the buttons replaced by who answered what."""
    kept = [b for b in blocks if b.get("type") != "actions"]
    verb = "approved" if approved else "denied"
    kept.append({"type": "context", "elements": [
        {"type": "mrkdwn", "text": f"<@{user}> {verb} this (the decision is confirmed separately)"}
    ]})
    return kept
