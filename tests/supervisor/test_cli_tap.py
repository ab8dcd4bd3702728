"""`wintermute tap FILTER`: a subject or a type prefix, as the README says."""

from __future__ import annotations

import pytest

from supervisor.cli.tap import BadFilter, parse_filter


@pytest.mark.parametrize(("filt", "subject", "type_prefix"), [
    ("", "wm.>", ""),
    ("tool.", "wm.>", "tool."),  # the README's example: a type prefix with a dot
    ("llm.response", "wm.>", "llm.response"),
    ("turn", "wm.>", "turn"),
    ("wm.evt.>", "wm.evt.>", ""),
    ("wm.evt.*.*.terminal_owner", "wm.evt.*.*.terminal_owner", ""),
    (">", ">", ""),
])
def test_filters(filt: str, subject: str, type_prefix: str) -> None:
    assert parse_filter(filt, "wm") == (subject, type_prefix)


@pytest.mark.parametrize("filt", ["wm..evt", "wm.evt.>.x", "wm.ev*", "tool *", "evt.>"])
def test_bad_filters_are_explained(filt: str) -> None:
    with pytest.raises(BadFilter, match="subject"):
        parse_filter(filt, "wm")
