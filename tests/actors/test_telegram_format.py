"""Telegram HTML rendering and splitting, checked against the fake server's HTML rules."""

from __future__ import annotations

import time
from pathlib import Path

from actors.channel._telegram_format import (
    extract_files,
    split_html,
    split_plain,
    tg_len,
    to_html,
    visible,
    workspace_file,
)
from actors.channel._telegram_send import approval_parts
from contracts import ApprovalPrompt, Sink
from tests.fakes.telegram_server import check_html


def test_markdown_becomes_escaped_telegram_html() -> None:
    src = ("# Title\n**bold** and _it_ and `a<b` & [docs](https://x.y/?a=1&b=2) "
           "snake_case_name 2*3*4 <script>\n```python\nif a < b:\n    pass\n```")
    out = to_html(src)
    assert check_html(out) == ""
    assert "<b>Title</b>" in out and "<b>bold</b>" in out and "<i>it</i>" in out
    assert "<code>a&lt;b</code>" in out and "&lt;script&gt;" in out
    assert '<a href="https://x.y/?a=1&amp;b=2">docs</a>' in out
    assert "snake_case_name 2*3*4" in out
    assert '<pre><code class="language-python">if a &lt; b:\n    pass</code></pre>' in out


def test_overlapping_markers_stay_text_instead_of_breaking_the_html() -> None:
    out = to_html("**a _b** c_ and <i> & </b>")
    assert check_html(out) == ""
    assert visible(out) == "**a _b** c_ and <i> & </b>"


def test_split_keeps_every_word_and_each_chunk_fits() -> None:
    emoji_words = " ".join(f"😀{i}&<" for i in range(3000))  # 2 UTF-16 units per emoji
    chunks = split_html(emoji_words)
    assert len(chunks) > 1
    for html_text, _ in chunks:
        assert check_html(html_text) == ""
        assert tg_len(visible(html_text)) <= 4096
    assert " ".join(visible(h) for h, _ in chunks).split() == emoji_words.split()


def test_a_code_block_cut_in_two_is_closed_and_reopened() -> None:
    code = "```sh\n" + "\n".join(f"echo line {i}" for i in range(800)) + "\n```\nafter"
    chunks = split_html(code)
    assert len(chunks) >= 3
    for html_text, _ in chunks[:-1]:
        assert html_text.startswith('<pre><code class="language-sh">')
        assert html_text.endswith("</code></pre>") and check_html(html_text) == ""
    lines = [ln for h, _ in chunks for ln in visible(h).splitlines()]
    assert [ln for ln in lines if ln.startswith("echo")] == [f"echo line {i}" for i in range(800)]
    assert visible(chunks[-1][0]).endswith("after")


def test_a_word_longer_than_the_limit_is_cut_hard() -> None:
    chunks = split_plain("x" * 10000, 4096)
    assert [len(c) for c in chunks] == [4096, 4096, 1808]


def test_file_markers_and_workspace_confinement(tmp_path: Path) -> None:
    (tmp_path / "outputs").mkdir()
    (tmp_path / "outputs" / "a.txt").write_text("a")
    text, refs = extract_files("see [file: outputs/a.txt] and [file: /workspace/outputs/a.txt]")
    assert text == "see  and" and refs == ["outputs/a.txt", "/workspace/outputs/a.txt"]
    assert workspace_file(tmp_path, refs[0]) == tmp_path / "outputs" / "a.txt"
    assert workspace_file(tmp_path, refs[1]) == tmp_path / "outputs" / "a.txt"
    assert workspace_file(tmp_path, "../etc/passwd") is None
    assert workspace_file(tmp_path, "outputs/missing.txt") is None


def test_approval_prompt_has_short_callback_data_on_its_last_message() -> None:
    prompt = ApprovalPrompt(id="p", approval_id="Ab3dE6gH", sink=Sink(channel="telegram", chat="1"),
                            summary="run: rm -rf x\n" * 600, expires_at=time.time() + 300)
    parts = approval_parts(prompt)
    assert len(parts) > 1 and all(not p.buttons for p in parts[:-1])
    assert parts[-1].buttons == (("Approve", "a:Ab3dE6gH"), ("Deny", "d:Ab3dE6gH"))
    assert "Ab3dE6gH" in parts[0].plain
