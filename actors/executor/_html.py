"""Readable text from HTML: drop scripts and styles, keep headings, paragraphs, links and lists."""

from __future__ import annotations

import re
from html.parser import HTMLParser

_SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head"})
_BLOCK = frozenset({
    "p", "div", "section", "article", "header", "footer", "main", "nav", "aside", "br", "hr",
    "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "table", "tr", "pre", "blockquote",
    "form", "dl", "dt", "dd", "figure", "figcaption",
})


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0
        self.title = ""
        self._in_title = False
        self._href = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in _SKIP:
            self.skipping += 1
        elif tag in _BLOCK:
            self.parts.append("\n- " if tag == "li" else "\n")
            if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
                self.parts.append("#" * int(tag[1]) + " ")
        elif tag == "a":
            self._href = dict(attrs).get("href") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in _SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif tag in _BLOCK:
            self.parts.append("\n")
        elif tag == "a" and self._href and not self.skipping:
            if self._href.startswith(("http://", "https://", "/")):
                self.parts.append(f" ({self._href})")
            self._href = ""

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if not self.skipping:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """The visible text of a page, with its title first and whitespace collapsed."""
    parser = _Text()
    parser.feed(html)
    parser.close()
    text = "".join(parser.parts)
    text = re.sub(r"[ \t\r\f\v]+", " ", text)
    text = re.sub(r" *\n[ \n]*", "\n", text).strip()
    title = " ".join(parser.title.split())
    return f"Title: {title}\n\n{text}" if title else text
