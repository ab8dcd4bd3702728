"""`wintermute tap FILTER`: a subject or a type prefix, as the README says."""

from __future__ import annotations

import pytest

from supervisor.cli.tap import BadFilter, parse_filter


@pytest.mark.parametrize(("filt", "subject", "type_prefix"), [
    ("", "wm.>", ""),
    ("tool.", "wm.>", "tool."),  # the README's example: a type prefix with a dot
    ("llm.response", "wm.>", "llm.response"),
    ("turn", "wm.>", "turn"),
    ("terminal:owner", "wm.>", ""),  # a session id: filtered on the payload's session
    ("wm.evt.>", "wm.evt.>", ""),
    ("wm.evt.*.*.terminal_owner", "wm.evt.*.*.terminal_owner", ""),
    (">", ">", ""),
])
def test_filters(filt: str, subject: str, type_prefix: str) -> None:
    assert parse_filter(filt, "wm")[:2] == (subject, type_prefix)


def test_a_session_id_as_written() -> None:
    assert parse_filter("telegram:12345", "wm").session == "telegram:12345"


@pytest.mark.parametrize("filt", ["wm..evt", "wm.evt.>.x", "wm.ev*", "tool *", "evt.>"])
def test_bad_filters_are_explained(filt: str) -> None:
    with pytest.raises(BadFilter, match="subject"):
        parse_filter(filt, "wm")
