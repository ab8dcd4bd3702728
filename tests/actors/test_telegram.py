"""The Telegram channel through python-telegram-bot against a local Bot API server.

The channel actor runs in-process against the real nats-server; python-telegram-bot talks HTTP
to tests/fakes/telegram_server.py, which keeps real getUpdates offset semantics and validates
sent HTML like Telegram. Whole turns add the other actors and the scripted OpenAI server.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Callable
from typing import Any

import aiohttp
import msgspec
import pytest

from actors.channel._telegram_format import split_html
from actors.planner.context import user_message
from bus import Bus
from contracts import ApprovalPrompt, Notice, Reply, Sink, TurnRequest
from contracts.config import Settings
from tests.actors.harness import ALL, Running, actors
from tests.fakes.llm_servers import FakeLLM
from tests.fakes.telegram_server import BOT_ID, BOT_USERNAME, TOKEN, FakeTelegram

pytestmark = pytest.mark.usefixtures("telegram_env")
SettingsFor = Callable[..., Settings]
OWNER, FRIEND, STRANGER, GROUP = 111, 222, 666, -100500




def tg_settings(settings_for: SettingsFor, tg: FakeTelegram, **extra: str) -> Settings:
    env = {
        "WM__CHANNELS__TELEGRAM__API_BASE_URL": tg.api_base_url,
        "WM__CHANNELS__TELEGRAM__API_FILE_URL": tg.api_file_url,
        "WM__CHANNELS__TELEGRAM__ALLOWED_USERS": f"[{OWNER}, {FRIEND}]",
        "WM__CHANNELS__TELEGRAM__POLL_TIMEOUT_SECS": "2",
        "WM__OWNER__PRINCIPALS": f'["telegram:{OWNER}"]',
        "WM__OWNER__SINK": f"telegram:{OWNER}",
    }
    env.update(extra)
    return settings_for(**env)


def with_model(monkeypatch: pytest.MonkeyPatch, llm: FakeLLM) -> dict[str, str]:
    monkeypatch.setenv("OPENAI_BASE_URL", llm.url)
    return {"WM__MODELS__DEFAULT": "openai/test-model"}


async def stored(bus: Bus, stream: str) -> list[dict[str, Any]]:
    """Every payload in a stream of this test's prefix."""
    info = await bus.js.stream_info(stream)
    out: list[dict[str, Any]] = []
    if info.state.messages:
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            with contextlib.suppress(Exception):
                out.append(json.loads((await bus.js.get_msg(stream, seq)).data))
    return out


async def turns(bus: Bus) -> list[dict[str, Any]]:
    return [p for p in await stored(bus, bus.subjects.stream_in) if p["type"] == "turn.request"]


async def until(predicate: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Poll an async or sync condition until it holds."""
    async with asyncio.timeout(timeout):
        while True:
            value = predicate()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return value
            await asyncio.sleep(0.1)


async def confirmed(tg: FakeTelegram, update_id: int) -> None:
    """Wait until the channel confirmed `update_id` to Telegram (its offset moved past it)."""
    await tg.wait_for(lambda: tg.confirmed >= update_id, timeout=30)


async def kill(running: Running, name: str = "channel") -> None:
    """Like kill -9 of the actor: every task of it stops at once, nothing is cleaned up."""
    await running.crash(name)


async def publish(bus: Bus, msg: Reply | ApprovalPrompt | Notice) -> None:
    await bus.publish(bus.subjects.outbound(msg.sink.channel, msg.sink.chat), msg)


def sink(chat: int = OWNER) -> Sink:
    return Sink(channel="telegram", chat=str(chat))


# -- who may talk ----------------------------------------------------------------------------


async def test_allowed_user_gets_an_answer_and_a_stranger_one_refusal(
    tg: FakeTelegram, llm: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch,
    bus: Bus,
) -> None:
    settings = tg_settings(settings_for, tg, **with_model(monkeypatch, llm))
    async with actors(settings, *ALL):
        tg.inject(tg.message(FRIEND, "hello from a friend"))
        reply = await tg.wait_for(lambda: tg.messages_to(FRIEND), timeout=60)
        assert reply[0]["text"] == "echo: hello from a friend"
        assert any(c.params.get("action") == "typing" for c in tg.of("sendChatAction"))
        first = tg.inject(tg.message(STRANGER, "secret plan alpha"))
        second = tg.inject(tg.message(STRANGER, "secret plan beta"))
        await confirmed(tg, second)
        refusal = await tg.wait_for(lambda: tg.messages_to(STRANGER))
        tg.inject(tg.message(FRIEND, "still there?"))  # a later turn: the stranger's are long done
        await tg.wait_for(lambda: len(tg.messages_to(FRIEND)) == 2, timeout=60)
    assert first < second
    assert len(tg.messages_to(STRANGER)) == 1 and "not on its list" in refusal[0]["text"]
    assert "secret plan" not in json.dumps(llm.requests)
    for stream in (bus.subjects.stream_in, bus.subjects.stream_out, bus.subjects.stream_cmd):
        assert "secret plan" not in json.dumps(await stored(bus, stream))
    principals = {t["principal"] for t in await turns(bus)}
    assert principals == {f"telegram:{FRIEND}"}
    sessions = {t["session"] for t in await turns(bus)}
    assert sessions == {f"telegram:{FRIEND}"}


# -- groups ----------------------------------------------------------------------------------


async def test_group_answers_only_when_addressed_and_is_its_own_session(
    tg: FakeTelegram, settings_for: SettingsFor, bus: Bus
) -> None:
    def group(user: int, text: str, **extra: Any) -> dict[str, Any]:
        return tg.message(user, text, chat_id=GROUP, chat_type="supergroup", **extra)

    earlier = {"message_id": 7, "date": 0, "chat": {"id": GROUP, "type": "supergroup"},
               "from": {"id": BOT_ID, "is_bot": True, "first_name": "WM",
                        "username": BOT_USERNAME}, "text": "an earlier answer"}
    async with actors(tg_settings(settings_for, tg), "channel"):
        tg.inject(group(FRIEND, "just chatting among ourselves"))
        tg.inject(group(FRIEND, f"@{BOT_USERNAME} what time is it?"))
        tg.inject(group(FRIEND, "and tomorrow?", reply_to_message=earlier))
        tg.inject(group(STRANGER, f"@{BOT_USERNAME} let me in"))
        tg.inject(group(FRIEND, "/status@some_other_bot"))
        await confirmed(tg, tg.inject(tg.message(FRIEND, "private words")))
        got = await until(lambda: _count(bus, 3))
    group_turns = [t for t in got if t["session"] == f"telegram:group:{GROUP}"]
    assert [t["text"] for t in group_turns] == ["what time is it?", "and tomorrow?"]
    assert {t["principal"] for t in group_turns} == {f"telegram:{FRIEND}"}
    assert {t["reply_to"]["chat"] for t in group_turns} == {str(GROUP)}
    dm = [t for t in got if t["session"] == f"telegram:{FRIEND}"]
    assert [t["text"] for t in dm] == ["private words"]
    assert tg.messages_to(GROUP) == []  # strangers in groups are not answered at all

    all_mode = tg_settings(settings_for, tg, WM__CHANNELS__TELEGRAM__GROUP_MODE="all")
    async with actors(all_mode, "channel"):
        await confirmed(tg, tg.inject(group(FRIEND, "no mention needed now")))
        got = await until(lambda: _count(bus, 4))
    assert got[-1]["text"] == "no mention needed now"


async def _telegram_health(bus: Bus) -> dict[str, Any] | None:
    raw = await bus.kv_get(bus.subjects.kv_health, "channel")
    health = json.loads(raw) if raw else {}
    state = health.get("info", {}).get("telegram", {}).get("state")
    return health if state == "connected" else None


async def _count(bus: Bus, n: int) -> list[dict[str, Any]] | None:
    found = await turns(bus)
    return found if len(found) >= n else None


# -- media -----------------------------------------------------------------------------------


async def test_voice_photo_and_document_land_in_the_inbox(
    tg: FakeTelegram, settings_for: SettingsFor, bus: Bus
) -> None:
    settings = tg_settings(settings_for, tg)
    voice = tg.add_file("voice/file_1.oga", b"OggS voice bytes")
    small = tg.add_file("photos/file_2.jpg", b"small")
    big = tg.add_file("photos/file_3.jpg", b"\xff\xd8 big jpeg")
    doc = tg.add_file("documents/file_4.pdf", b"%PDF-1.4 the report")
    async with actors(settings, "channel"):
        tg.inject(tg.message(FRIEND, voice={"file_id": voice, "file_unique_id": "v1",
                                            "duration": 12, "mime_type": "audio/ogg",
                                            "file_size": 16}))
        tg.inject(tg.message(FRIEND, caption="look at this", photo=[
            {"file_id": small, "file_unique_id": "p1", "width": 90, "height": 60},
            {"file_id": big, "file_unique_id": "p2", "width": 1280, "height": 853},
        ]))
        tg.inject(tg.message(FRIEND, caption="the report", document={
            "file_id": doc, "file_unique_id": "d1", "file_name": "Q3 report.pdf",
            "mime_type": "application/pdf", "file_size": 19}))
        tg.inject(tg.message(FRIEND, document={
            "file_id": "never-fetched", "file_unique_id": "d2", "file_name": "huge.iso",
            "file_size": 30 << 20}))
        got = await until(lambda: _count(bus, 4))
    voice_turn, photo_turn, doc_turn, huge_turn = got
    workspace = settings.home / "workspace"

    (a,) = voice_turn["attachments"]
    assert a["kind"] == "voice message" and a["path"].startswith("inbox/voice_")
    assert a["path"].endswith(".ogg") and a["description"] == "12s"
    assert (workspace / a["path"]).read_bytes() == b"OggS voice bytes"
    rendered = user_message(msgspec.convert(voice_turn, TurnRequest)).content
    assert rendered == f"[Voice message: {a['path']}, 12s]"

    (p,) = photo_turn["attachments"]
    assert p["kind"] == "photo" and p["description"] == "1280x853"
    assert (workspace / p["path"]).read_bytes() == b"\xff\xd8 big jpeg"
    assert photo_turn["text"] == "look at this"

    (d,) = doc_turn["attachments"]
    assert d["kind"] == "document" and d["path"].startswith("inbox/Q3_report_")
    assert (workspace / d["path"]).read_bytes() == b"%PDF-1.4 the report"
    assert "Q3 report.pdf" in d["description"] and doc_turn["text"] == "the report"

    (h,) = huge_turn["attachments"]
    assert h["path"] == "(not downloaded)" and "20 MB" in h["description"]


async def test_media_downloads_never_follow_links_planted_in_the_workspace(
    tg: FakeTelegram, settings_for: SettingsFor, bus: Bus
) -> None:
    """workspace/inbox is a link the sandbox planted to the home folder: nothing is written
    there and the turn still arrives, saying the download failed (sandbox → host, issue 16)."""
    settings = tg_settings(settings_for, tg)
    workspace = settings.home / "workspace"
    (workspace / "inbox").rmdir()
    (workspace / "inbox").symlink_to(settings.home)
    before = sorted(p.name for p in settings.home.iterdir())
    doc = tg.add_file("documents/file_9.txt", b"owner = 'stranger'")
    async with actors(settings, "channel"):
        tg.inject(tg.message(FRIEND, caption="see file", document={
            "file_id": doc, "file_unique_id": "d9", "file_name": "config.toml",
            "mime_type": "text/plain", "file_size": 18}))
        (turn,) = await until(lambda: _count(bus, 1))
    (a,) = turn["attachments"]
    assert a["path"] == "(not downloaded)" and "failed" in a["description"]
    assert sorted(p.name for p in settings.home.iterdir()) == before
    assert b"stranger" not in (settings.home / "config.toml").read_bytes()


# -- outbound --------------------------------------------------------------------------------


async def test_long_reply_is_split_within_the_limit_without_losing_text(
    tg: FakeTelegram, settings_for: SettingsFor, bus: Bus
) -> None:
    words = [f"w{i}<&>" if i % 7 == 0 else f"word{i}" for i in range(2200)]
    paragraphs = [" ".join(words[i : i + 40]) for i in range(0, len(words), 40)]
    code = "```python\n" + "\n".join(f"x{i} = {i} < {i + 1}" for i in range(300)) + "\n```"
    text = "**Report**\n\n" + "\n\n".join(paragraphs[:30]) + "\n\n" + code + "\n\n" + \
        "\n\n".join(paragraphs[30:])
    assert len(text) > 3 * 4096
    async with actors(tg_settings(settings_for, tg), "channel"):
        await publish(bus, Reply(id="r-silent", session="s", turn_id="t0", sink=sink(),
                                 text="[NO_REPLY] (nothing to add)"))
        await publish(bus, Reply(id="r-long", session="s", turn_id="t1", sink=sink(), text=text))
        await publish(bus, Notice(id="n-1", sink=sink(), text="a <b>literal</b> & notice"))
        n = len(split_html(text)) + 1
        sent = await tg.wait_for(lambda: len(tg.messages_to(OWNER)) >= n and tg.messages_to(OWNER))
    notice = [m for m in sent if "notice" in m["text"]]
    chunks = [m for m in sent if "notice" not in m["text"]]
    assert len(chunks) >= 4 and len(sent) == n
    assert all(len(m["text"].encode("utf-16-le")) // 2 <= 4096 for m in chunks)
    assert all(c.params.get("parse_mode") == "HTML" for c in tg.of("sendMessage"))
    shown = " ".join(m["text"] for m in chunks)
    expected = [w for w in text.replace("**", "").replace("```python", "").replace("```", "")
                .split()]
    assert shown.replace("```", "").split() == expected
    assert "NO_REPLY" not in json.dumps([m["text"] for m in sent])
    assert [m["text"] for m in notice] == ["a <b>literal</b> & notice"]


async def test_files_named_in_a_reply_are_sent_from_the_workspace(
    tg: FakeTelegram, settings_for: SettingsFor, bus: Bus
) -> None:
    settings = tg_settings(settings_for, tg)
    (settings.home / "workspace" / "outputs" / "report.txt").write_text("the numbers\n")
    (settings.home / ".env").write_text("SOME_PASSWORD=hunter22hunter22\n")
    # A workspace file holding a .env value (base64-encoded, too) passes no channel either.
    (settings.home / "workspace" / "outputs" / "dump.txt").write_text("pw=hunter22hunter22\n")
    (settings.home / "workspace" / "outputs" / "dump.b64").write_text(
        base64.b64encode(b"user: me\npassword: hunter22hunter22\n").decode())
    text = ("Here it is: [file: outputs/report.txt]\n[file: ../.env]\n[file: outputs/dump.txt]"
            "\n[file: outputs/dump.b64]")
    async with actors(settings, "channel"):
        await publish(bus, Reply(id="r-files", session="s", turn_id="t", sink=sink(), text=text))
        sent = await tg.wait_for(lambda: len(tg.messages_to(OWNER)) >= 3 and tg.messages_to(OWNER))
    assert sent[0]["text"] == "Here it is:"
    assert sent[1]["document"]["data"] == b"the numbers\n"
    assert sent[1]["document"]["file_name"] == "report.txt"
    assert "Could not attach ../.env" in sent[2]["text"]
    assert "Could not attach outputs/dump.txt" in sent[2]["text"]
    assert "Could not attach outputs/dump.b64" in sent[2]["text"]
    assert len(sent) == 3
    assert b"hunter22" not in b"".join(c.files.get("document", b"") for c in tg.calls)


async def test_429_waits_retry_after_and_transient_errors_retry_without_duplicates(
    tg: FakeTelegram, settings_for: SettingsFor, bus: Bus
) -> None:
    async with actors(tg_settings(settings_for, tg), "channel"):
        tg.fail_next("sendMessage", 1, status=429, retry_after=1)
        await publish(bus, Notice(id="n-429", sink=sink(), text="after the flood"))
        await tg.wait_for(lambda: tg.messages_to(OWNER))
        tg.fail_next("sendMessage", 2, status=502)
        await publish(bus, Notice(id="n-502", sink=sink(), text="after the outage"))
        await tg.wait_for(lambda: len(tg.messages_to(OWNER)) == 2)
        tg.fail_next("getUpdates", 1, status=429, retry_after=1)
        await confirmed(tg, tg.inject(tg.message(FRIEND, "polling survives a 429")))
    refused, ok = [c for c in tg.of("sendMessage", ok_only=False)][:2]
    assert refused.status == 429 and ok.status == 200
    assert ok.ts - refused.ts >= 1.0  # retry_after was honoured, not guessed
    assert [m["text"] for m in tg.messages_to(OWNER)] == ["after the flood", "after the outage"]
    assert [c.status for c in tg.of("sendMessage", ok_only=False)] == [429, 200, 502, 502, 200]


async def test_a_crash_mid_reply_resends_only_the_parts_not_yet_sent(
    tg: FakeTelegram, settings_for: SettingsFor, bus: Bus
) -> None:
    settings = tg_settings(settings_for, tg)
    text = "\n\n".join(f"part{n} " + "x" * 3000 for n in range(4))
    async with actors(settings, "channel") as running:
        tg.stall("sendMessage", after=2)
        await publish(bus, Reply(id="r-crash", session="s", turn_id="t", sink=sink(), text=text))
        await tg.wait_for(lambda: tg.held)
        await kill(running)
        tg.release("sendMessage")
        await running.start("channel")
        sent = await tg.wait_for(lambda: len(tg.messages_to(OWNER)) >= 4 and tg.messages_to(OWNER))
        await publish(bus, Notice(id="n-after", sink=sink(), text="later"))
        await tg.wait_for(lambda: tg.messages_to(OWNER)[-1]["text"] == "later")
    heads = [m["text"].split()[0] for m in tg.messages_to(OWNER)]
    assert heads == ["part0", "part1", "part2", "part3", "later"]
    assert len(sent) == 4


# -- approvals, guard, commands --------------------------------------------------------------


async def test_approval_buttons_round_trip_and_only_the_owner_counts(
    tg: FakeTelegram, llm: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    # direct mode: in a sandbox `rm -rf` runs without asking (it can only hurt the workspace)
    settings = tg_settings(settings_for, tg, **with_model(monkeypatch, llm),
                           WM__EXECUTOR__MODE="direct")
    target = settings.home / "workspace" / "doomed"
    target.mkdir()

    def prompt() -> dict[str, Any] | None:
        return next((m for m in tg.messages_to(OWNER) if m.get("reply_markup")), None)

    async with actors(settings, *ALL):
        tg.inject(tg.message(OWNER, "run: rm -rf doomed && echo removed-it"))
        asked = await tg.wait_for(prompt, timeout=60)
        buttons = asked["reply_markup"]["inline_keyboard"][0]
        approve, deny = (b["callback_data"] for b in buttons)
        assert approve.startswith("a:") and deny.startswith("d:")
        assert all(len(b["callback_data"].encode()) <= 64 for b in buttons)
        assert "rm -rf doomed" in asked["text"]
        intruder = tg.inject(tg.callback(FRIEND, approve, asked))
        await confirmed(tg, intruder)
        answers = await tg.wait_for(lambda: tg.of("answerCallbackQuery"))
        assert "Only the owner" in answers[0].params["text"] and target.exists()
        tg.inject(tg.callback(OWNER, approve, asked))
        done = await tg.wait_for(
            lambda: [m for m in tg.messages_to(OWNER) if "removed-it" in m["text"]], timeout=60)
        # the buttons are replaced by the answer (this may land after the reply)
        await tg.wait_for(lambda: "Your answer: Approved" in asked["text"])
    assert not target.exists() and len(done) == 1
    assert tg.of("answerCallbackQuery")[-1].params["text"] == "Approved."


async def test_credential_guard_blocks_a_pasted_token_and_redacts_one_in_prose(
    tg: FakeTelegram, settings_for: SettingsFor, bus: Bus
) -> None:
    key = "sk-ant-api03-" + "A1b2C3d4" * 10
    async with actors(tg_settings(settings_for, tg), "channel"):
        tg.inject(tg.message(FRIEND, key))
        await confirmed(tg, tg.inject(tg.message(FRIEND, f"deploy with {key} tonight, please")))
        advice = await tg.wait_for(lambda: tg.messages_to(FRIEND))
        got = await until(lambda: _count(bus, 1))
    assert ".env" in advice[0]["text"] and len(tg.messages_to(FRIEND)) == 1
    assert len(got) == 1 and "[REDACTED" in got[0]["text"] and "tonight" in got[0]["text"]
    for stream in (bus.subjects.stream_in, bus.subjects.stream_out, bus.subjects.stream_cmd):
        assert key not in json.dumps(await stored(bus, stream))


async def test_commands_answer_in_the_chat_and_never_reach_the_agent(
    tg: FakeTelegram, settings_for: SettingsFor, bus: Bus
) -> None:
    async with actors(tg_settings(settings_for, tg), "channel"):
        for text in ("/help", "/status", "/reset", "/budget"):
            tg.inject(tg.message(OWNER, text))
        tg.inject(tg.message(FRIEND, "/tools"))
        await tg.wait_for(lambda: len(tg.messages_to(OWNER)) == 4 and tg.messages_to(FRIEND))
        health = await until(lambda: _telegram_health(bus))
    assert "telegram-poll" in health["loops"] and health["info"]["telegram"]["bot"] == \
        f"@{BOT_USERNAME}"
    owner = " | ".join(m["text"] for m in tg.messages_to(OWNER))  # notices may interleave
    for answer in ("/approve ID", "No supervisor status yet", "was reset", "tokens"):
        assert answer in owner
    assert tg.messages_to(FRIEND)[0]["text"] == "Only the owner can use that command."
    assert await turns(bus) == []
    resets = [p for p in await stored(bus, bus.subjects.stream_cmd) if p["type"] == "session.reset"]
    assert [r["session"] for r in resets] == [f"telegram:{OWNER}"]


# -- crashes, pairing, webhook ---------------------------------------------------------------


async def test_kill_between_receive_and_send_gives_exactly_one_reply(
    tg: FakeTelegram, llm: FakeLLM, settings_for: SettingsFor, monkeypatch: pytest.MonkeyPatch,
    bus: Bus,
) -> None:
    settings = tg_settings(settings_for, tg, **with_model(monkeypatch, llm))
    async with actors(settings, *ALL) as running:
        update = tg.inject(tg.message(FRIEND, "slow:2"))
        await until(lambda: _count(bus, 1))  # received and stored; the model is thinking
        await kill(running)
        await running.start("channel")
        await tg.wait_for(lambda: tg.messages_to(FRIEND), timeout=60)
        tg.inject(tg.message(FRIEND, "and after?"))
        await tg.wait_for(lambda: len(tg.messages_to(FRIEND)) >= 2, timeout=60)
    assert [m["text"] for m in tg.messages_to(FRIEND)] == ["slept 2", "echo: and after?"]
    assert [t["id"] for t in await turns(bus)] == [f"tg:{BOT_ID}:{update}",
                                                   f"tg:{BOT_ID}:{update + 1}"]


async def test_pairing_asks_the_owner_once_and_lets_the_user_in(
    tg: FakeTelegram, settings_for: SettingsFor, bus: Bus
) -> None:
    settings = tg_settings(settings_for, tg, WM__CHANNELS__TELEGRAM__PAIRING="true")
    async with actors(settings, "channel", "approval"):
        tg.inject(tg.message(STRANGER, "hi, may I?"))
        tg.inject(tg.message(STRANGER, "hello??"))
        asked = await tg.wait_for(
            lambda: next((m for m in tg.messages_to(OWNER) if m.get("reply_markup")), None))
        assert str(STRANGER) in asked["text"]
        assert len(tg.messages_to(STRANGER)) == 1  # "I have asked the owner"
        approve = asked["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        tg.inject(tg.callback(OWNER, approve, asked))
        await tg.wait_for(lambda: len(tg.messages_to(STRANGER)) == 2)
        await confirmed(tg, tg.inject(tg.message(STRANGER, "thanks, now a real question")))
        got = await until(lambda: _count(bus, 1))
    assert "let you in" in tg.messages_to(STRANGER)[1]["text"]
    assert [t["text"] for t in got] == ["thanks, now a real question"]


async def test_webhook_mode_confirms_an_update_only_once_stored(
    tg: FakeTelegram, settings_for: SettingsFor, bus: Bus
) -> None:
    import hashlib

    from tests.e2e.test_up import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}/tg/hook"
    settings = tg_settings(settings_for, tg, WM__CHANNELS__TELEGRAM__MODE="webhook",
                           WM__CHANNELS__TELEGRAM__WEBHOOK_URL=url,
                           WM__CHANNELS__TELEGRAM__WEBHOOK_PORT=str(port))
    secret = hashlib.sha256(f"wintermute-webhook:{TOKEN}".encode()).hexdigest()
    update = {"update_id": 5000, **tg.message(FRIEND, "via the webhook")}
    async with actors(settings, "channel"), aiohttp.ClientSession() as http:
        await tg.wait_for(lambda: tg.webhook.get("url") == url)
        assert tg.webhook["secret_token"] == secret
        async with http.post(url, json=update, headers={
                "X-Telegram-Bot-Api-Secret-Token": "wrong"}) as bad:
            assert bad.status == 403
        for _ in range(2):  # Telegram may deliver an update twice
            async with http.post(url, json=update, headers={
                    "X-Telegram-Bot-Api-Secret-Token": secret}) as ok:
                assert ok.status == 200
        got = await turns(bus)
    assert [t["text"] for t in got] == ["via the webhook"]
    assert not tg.of("getUpdates")
