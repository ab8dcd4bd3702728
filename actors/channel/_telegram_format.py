"""Telegram HTML: Markdown-ish model text to escaped HTML, split within the message limit.

Telegram counts a message's length after entity parsing, in UTF-16 code units, and refuses
anything over 4096 (1024 for captions). Splitting works on the source text and renders each
piece on its own, so every piece is balanced HTML and only whitespace is dropped at the cuts;
a fenced code block cut in two is closed and reopened around the cut.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from pathlib import Path

TEXT_LIMIT = 4096
CAPTION_LIMIT = 1024

_FENCE = re.compile(r"```([\w+#.-]*)[ \t]*\n?(.*?)(?:```|\Z)", re.S)
_CODE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^\s)]+)\)")
_INLINE = (
    (re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M), r"<b>\1</b>"),
    (re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*", re.S), r"<b>\1</b>"),
    (re.compile(r"(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)", re.S), r"<b>\1</b>"),
    (re.compile(r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?![\w*])"), r"<i>\1</i>"),
    (re.compile(r"(?<![\w_])_(?=[^\s_])([^_\n]+?)(?<=[^\s_])_(?![\w_])"), r"<i>\1</i>"),
    (re.compile(r"~~(?=\S)(.+?)(?<=\S)~~", re.S), r"<s>\1</s>"),
)
_TAG = re.compile(r"<(/?)([a-z]+)(?:\s[^>]*)?>")
_FILE_MARK = re.compile(r"\[file:\s*([^\]\n]+?)\s*\]")


def escape(text: str) -> str:
    """Escape the three characters Telegram's HTML parser reserves."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _balanced(fragment: str) -> bool:
    stack: list[str] = []
    for m in _TAG.finditer(fragment):
        if not m.group(1):
            stack.append(m.group(2))
        elif not stack or stack.pop() != m.group(2):
            return False
    return not stack


def _inline(text: str) -> str:
    """Escape text and turn inline Markdown (code, links, bold, italic, strike) into tags."""
    out: list[str] = []
    pos = 0
    for m in _CODE.finditer(text):
        out.append(_styled(text[pos : m.start()]))
        out.append(f"<code>{escape(m.group(1))}</code>")
        pos = m.end()
    out.append(_styled(text[pos:]))
    return "".join(out)


def _styled(text: str) -> str:
    plain = escape(text)
    done = _LINK.sub(
        lambda m: f'<a href="{m.group(2).replace(chr(34), "&quot;")}">{m.group(1)}</a>', plain
    )
    for pattern, repl in _INLINE:
        done = pattern.sub(repl, done)
    # Overlapping markers (e.g. "**a _b** c_") could nest tags wrongly: keep those as text.
    return done if _balanced(done) else plain


def to_html(text: str) -> str:
    """Render model text as Telegram HTML: fenced code to <pre>, inline Markdown to tags."""
    out: list[str] = []
    pos = 0
    for m in _FENCE.finditer(text):
        out.append(_inline(text[pos : m.start()]))
        lang, code = m.group(1), m.group(2).rstrip("\n")
        attr = f' class="language-{escape(lang)}"' if lang else ""
        out.append(f"<pre><code{attr}>{escape(code)}</code></pre>")
        pos = m.end()
    out.append(_inline(text[pos:]))
    return "".join(out)


def visible(html_text: str) -> str:
    """The text Telegram shows for an HTML message (tags removed, entities decoded)."""
    return html.unescape(_TAG.sub("", html_text))


def tg_len(text: str) -> int:
    """Length as Telegram counts it: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def _close_fence(head: str, rest: str) -> tuple[str, str]:
    """If `head` ends inside a fenced block, close it there and reopen it at the start of rest."""
    fences = list(re.finditer(r"```([\w+#.-]*)", head))
    if len(fences) % 2 == 0:
        return head, rest
    lang = fences[-1].group(1)
    return head.rstrip() + "\n```", f"```{lang}\n" + rest.lstrip("\n")


def _cut(src: str, limit: int, fits: Callable[[int], bool]) -> int:
    """The largest prefix length that fits, moved back to a paragraph, line or word boundary."""
    # Capped search: a piece 4x the limit long is long enough even where markup hides text.
    lo, hi = 1, min(len(src), 4 * limit + 64)
    while lo < hi:  # largest c with fits(c); the shown length grows with c
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    for sep in ("\n\n", "\n", " "):
        at = src.rfind(sep, 0, lo + 1)
        if at > lo // 2 and fits(at):
            return at
    return lo


def split_source(text: str, limit: int = TEXT_LIMIT, render: bool = True) -> list[str]:
    """Split source text into pieces whose rendering fits `limit`; only whitespace is dropped."""
    text = text.strip()
    pieces: list[str] = []

    def size(piece: str) -> int:
        return tg_len(visible(to_html(piece)) if render else piece)

    while text:
        if size(text) <= limit:
            pieces.append(text)
            break

        def fits(c: int, src: str = text) -> bool:
            return size(_close_fence(src[:c], "")[0]) <= limit

        cut = _cut(text, limit, fits)
        head, rest = _close_fence(text[:cut], text[cut:])
        pieces.append(head.rstrip())
        text = rest.lstrip()
    return [p for p in pieces if p.strip()]


def split_html(text: str, limit: int = TEXT_LIMIT) -> list[tuple[str, str]]:
    """(html, source) chunks of a reply, each within Telegram's limit."""
    return [(to_html(piece), piece) for piece in split_source(text, limit)]


def split_plain(text: str, limit: int = TEXT_LIMIT) -> list[str]:
    """Plain-text chunks (no parse mode), each within the limit."""
    return split_source(text, limit, render=False)


def extract_files(text: str) -> tuple[str, list[str]]:
    """Take `[file: path]` markers out of a reply; return the text and the paths in order."""
    paths = [m.group(1) for m in _FILE_MARK.finditer(text)]
    return _FILE_MARK.sub("", text).strip(), paths


def workspace_file(workspace: Path, ref: str) -> Path | None:
    """The file `ref` names inside the workspace, or None if missing or outside it."""
    ref = ref.strip().strip("'\"")
    for prefix in ("/workspace/", "workspace/"):
        if ref.startswith(prefix):
            ref = ref[len(prefix) :]
    root = workspace.resolve()
    try:
        path = (root / ref).resolve()
        path.relative_to(root)
    except (ValueError, OSError):
        return None
    return path if path.is_file() else None
