"""Slack text: Markdown to mrkdwn, splitting under the limit, approval blocks."""

from __future__ import annotations

import time

from actors.channel._slack_format import (
    answered_blocks,
    approval_blocks,
    escape,
    split,
    to_mrkdwn,
)


def test_markdown_becomes_mrkdwn_and_nothing_can_ping_people() -> None:
    text = to_mrkdwn("# Plan\n**bold**, *soft* and ~~gone~~ see [docs](https://x.test/?a=1&b=2)\n"
                     "- one\n- two\nhey <!channel> <@U123> a<b")
    assert text.splitlines()[0] == "*Plan*"
    assert "*bold*, _soft_ and ~gone~" in text
    assert "<https://x.test/?a=1&amp;b=2|docs>" in text
    assert "• one\n• two" in text
    assert "&lt;!channel&gt; &lt;@U123&gt; a&lt;b" in text


def test_code_is_kept_verbatim_but_escaped() -> None:
    text = to_mrkdwn("run this:\n```bash\nif [ 1 -lt 2 ] && echo **x**; then :; fi\n```\nand `a<b`")
    assert "```\nif [ 1 -lt 2 ] &amp;&amp; echo **x**; then :; fi\n```" in text
    assert "`a&lt;b`" in text


def test_split_respects_the_limit_boundaries_and_code_fences() -> None:
    prose = " ".join(f"word{i}" for i in range(300))
    code = "```\n" + "\n".join(f"line {i} &amp; more" for i in range(200)) + "\n```"
    text = f"{prose}\n\n{code}\n\ntail &amp; end"
    chunks = split(text, 500)
    assert all(len(c) <= 500 for c in chunks) and len(chunks) > 5
    assert all(c.count("```") % 2 == 0 for c in chunks)  # every chunk renders its code
    joined = " ".join(chunks).replace("```", " ").split()
    assert joined == text.replace("```", " ").split()  # nothing lost, nothing repeated
    assert not any(c.endswith("&amp") or c.endswith("&") for c in chunks)
    assert split("short", 500) == ["short"] and split("   ", 500) == []


def test_a_word_longer_than_the_limit_is_cut_without_breaking_entities() -> None:
    chunks = split("&amp;" * 100, 103)
    assert "".join(chunks) == "&amp;" * 100
    assert all(c.startswith("&amp;") and c.endswith(";") for c in chunks)


def test_approval_blocks_have_buttons_carrying_the_id_and_lose_them_once_answered() -> None:
    blocks = approval_blocks("Ab12Cd34", "Run: rm -rf <dir>\nWhy: risky", time.time() + 300)
    actions = [b for b in blocks if b["type"] == "actions"][0]["elements"]
    assert [(a["action_id"], a["value"]) for a in actions] == [
        ("wm_approve", "Ab12Cd34"), ("wm_deny", "Ab12Cd34")]
    assert escape("rm -rf <dir>") in blocks[0]["text"]["text"]
    after = answered_blocks(blocks, "U1", approved=False)
    assert not [b for b in after if b["type"] == "actions"] and "denied" in str(after[-1])
