"""The planner's session-state cache: reads saved, writes compare-and-set on the revision."""

from __future__ import annotations

from actors.planner._state_cache import StateCache
from bus import Bus


async def test_a_held_state_is_not_read_again(bus: Bus) -> None:
    cache = StateCache(bus, bus.subjects.kv_sessions)
    assert await cache.get("s.a") is None  # a new session: one read
    assert await cache.put("s.a", b'{"v":1}')
    assert await cache.get("s.a") == b'{"v":1}'
    assert (cache.misses, cache.hits) == (1, 1)
    assert await bus.kv_get(bus.subjects.kv_sessions, "s.a") == b'{"v":1}'


async def test_a_write_by_someone_else_fails_the_save_and_the_next_read_sees_it(bus: Bus) -> None:
    cache = StateCache(bus, bus.subjects.kv_sessions)
    await cache.get("s.b")
    assert await cache.put("s.b", b'{"v":1}')
    await bus.kv_put(bus.subjects.kv_sessions, "s.b", b'{"v":"forked"}')  # another writer
    assert not await cache.put("s.b", b'{"v":2}')  # lost: the caller re-applies the event
    assert await bus.kv_get(bus.subjects.kv_sessions, "s.b") == b'{"v":"forked"}'
    assert await cache.get("s.b") == b'{"v":"forked"}'
    assert await cache.put("s.b", b'{"v":3}')


async def test_only_the_most_recent_sessions_are_held(bus: Bus) -> None:
    cache = StateCache(bus, bus.subjects.kv_sessions, size=2)
    for key in ("s.1", "s.2", "s.3"):
        await cache.get(key)
        await cache.put(key, key.encode())
    await cache.get("s.1")  # evicted: read from KV again
    assert cache.misses == 4 and await cache.get("s.1") == b"s.1"
