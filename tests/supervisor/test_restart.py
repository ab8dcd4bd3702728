"""Restart policy: permanent vs transient, backoff with jitter, intensity limit, slow retries."""

from __future__ import annotations

import random

from supervisor.process.restart import MAX_DELAY, MAX_FAILED_DELAY, RestartPolicy


def policy(**kw: object) -> RestartPolicy:
    return RestartPolicy(**{"max_restarts": 3, "window": 60.0, "failed_retry": 60.0, **kw})  # type: ignore[arg-type]


def test_permanent_restarts_even_after_a_clean_exit() -> None:
    d = policy().on_exit(0, ran_for=5, now=100)
    assert d.restart and not d.failed


def test_transient_is_not_restarted_after_a_clean_exit_but_is_after_a_crash() -> None:
    p = policy(kind="transient")
    assert not p.on_exit(0, ran_for=5, now=100).restart
    assert p.on_exit(1, ran_for=5, now=101).restart
    assert p.on_exit(-9, ran_for=5, now=102).restart


def test_backoff_doubles_with_jitter_and_is_capped() -> None:
    p = policy(max_restarts=100)
    rng = random.Random(1)
    delays = [p.on_exit(-9, ran_for=1, now=100 + i, rng=rng).delay for i in range(12)]
    for i, d in enumerate(delays):
        base = min(0.25 * 2**i, MAX_DELAY)
        assert 0.8 * base <= d <= 1.2 * base
    assert len({round(d, 6) for d in delays[:4]}) == 4  # jittered, not identical


def test_intensity_limit_marks_failed_once_and_retries_slow_down() -> None:
    p = policy()
    decisions = [p.on_exit(1, ran_for=1, now=100 + i) for i in range(4)]
    assert [d.failed for d in decisions] == [False, False, False, True]
    assert decisions[3].newly_failed
    later = [p.on_exit(1, ran_for=1, now=200 + 100 * i) for i in range(6)]
    assert all(d.failed and not d.newly_failed for d in later)  # failed until a clean window
    assert later[1].delay > later[0].delay * 1.3  # slower and slower ...
    assert max(d.delay for d in later) <= MAX_FAILED_DELAY * 1.2  # ... up to the ceiling


def test_a_whole_window_of_uptime_recovers() -> None:
    p = policy()
    for i in range(4):
        p.on_exit(1, ran_for=1, now=100 + i)
    assert p.failed
    assert not p.check_recovered(ran_for=10)
    assert p.check_recovered(ran_for=61)
    assert not p.failed
    d = p.on_exit(1, ran_for=1, now=1000)
    assert not d.failed and d.delay < 1
