"""Config: defaults <- files <- WM__ environment; errors name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from contracts.config import ConfigError, load_settings


def write(home: Path, name: str, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / name).write_text(text)


def test_defaults_without_files(tmp_path: Path) -> None:
    s = load_settings(tmp_path, {})
    assert s.config.budget.max_tool_calls_per_turn == 20
    assert s.config.nats.prefix == "wm"
    assert s.agent.personality.name == "Wintermute"


def test_environment_overrides_file_and_parses_json_literals(tmp_path: Path) -> None:
    write(tmp_path, "config.toml", "[budget]\nmax_tool_calls_per_turn = 5\n[models]\ndefault='openai/a'\n")
    env = {
        "WM__BUDGET__MAX_TOOL_CALLS_PER_TURN": "7",
        "WM__CHANNELS__TELEGRAM__ALLOWED_USERS": "[111, 222]",
        "WM__MODELS__FALLBACK": '["anthropic/b"]',
        "WM__HEARTBEAT__INTERVAL_SECS": "2.5",
    }
    s = load_settings(tmp_path, env)
    assert s.config.budget.max_tool_calls_per_turn == 7
    assert s.config.channels.telegram.allowed_users == [111, 222]
    assert s.config.models.default == "openai/a"
    assert s.config.models.fallback == ["anthropic/b"]
    assert s.agent.heartbeat.interval_secs == 2.5


@pytest.mark.parametrize(
    ("name", "text", "env", "message"),
    [
        ("config.toml", "[budget]\nmax_tool_calls_per_turn = 'many'\n", {},
         "'budget.max_tool_calls_per_turn'"),
        ("config.toml", "[budgett]\nx = 1\n", {}, "unknown setting 'budgett'"),
        ("config.toml", "", {"WM__BUDGET__MAX_TOKENS_PER_DAY": "lots"},
         "'budget.max_tokens_per_day'"),
        ("config.toml", "[models]\ndefault = 'gpt-4'\n", {}, "'models.default'"),
        ("config.toml", "[models.roles]\noracle = 'nope/x'\n", {}, "'models.roles.oracle'"),
        ("config.toml", "[executor]\nrisky_patterns = ['(']\n", {}, "'executor.risky_patterns[0]'"),
        ("agent.toml", "[[scheduled_tasks]]\nname='a'\ncron='every day'\n", {},
         "'scheduled_tasks[0].cron'"),
        ("config.toml", "not toml ===", {}, "not valid TOML"),
        ("config.toml", "[models.limits.default]\nmax_retries = 99\n", {},
         "'models.limits.default.max_retries'"),
        ("config.toml", "[models.limits.oracle]\ntimeout_secs = 0\n", {},
         "'models.limits.oracle.timeout_secs'"),
        ("config.toml", "[models.limits.oracle]\nmax_tokenz = 5\n", {},
         "unknown setting 'models.limits[...].max_tokenz'"),
        ("config.toml", "", {"WM__MODELS__MAX_TOKENS": "-1"}, "'models.max_tokens'"),
        ("config.toml", "[budget]\ntimezone = 'Mars/Olympus'\n", {}, "'budget.timezone'"),
        ("config.toml", "[budget]\nmax_tokens_per_turn = -1\n", {}, "'budget.max_tokens_per_turn'"),
        ("config.toml", "[budget.prices]\n'openai/x' = {input = 'cheap'}\n", {},
         "budget.prices"),
    ],
)
def test_bad_settings_name_the_key(
    tmp_path: Path, name: str, text: str, env: dict[str, str], message: str
) -> None:
    write(tmp_path, name, text)
    with pytest.raises(ConfigError) as err:
        load_settings(tmp_path, env)
    assert message in str(err.value)


def test_model_limits_per_role_over_the_models_defaults(tmp_path: Path) -> None:
    write(tmp_path, "config.toml", "[models]\ntimeout_secs = 300\nmax_tokens = 2000\n"
          "[models.limits.oracle]\nmax_tokens = 8000\nmax_retries = 0\n")
    models = load_settings(tmp_path, {}).config.models
    oracle, default = models.limits_for("oracle"), models.limits_for("default")
    assert (oracle.max_tokens, oracle.timeout_secs, oracle.max_retries) == (8000, 300.0, 0)
    assert (default.max_tokens, default.timeout_secs, default.max_retries) == (2000, 300.0, 2)
    env = {"WM__MODELS__LIMITS__FLATLINE__TIMEOUT_SECS": "30"}
    assert load_settings(tmp_path, env).config.models.limits_for("flatline").timeout_secs == 30


def test_budget_prices_timezone_and_task_budgets(tmp_path: Path) -> None:
    write(tmp_path, "config.toml", "[budget]\ntimezone = 'Europe/Berlin'\n"
          "[budget.prices]\n'openai/gpt-4o' = {input = 2.5, output = 10}\n")
    write(tmp_path, "agent.toml", "[[scheduled_tasks]]\nname = 'news'\ncron = '0 8 * * *'\n"
          "prompt = 'news'\nbudget_tokens = 50000\n")
    s = load_settings(tmp_path, {})
    assert s.config.budget.timezone == "Europe/Berlin"
    assert s.config.budget.prices["openai/gpt-4o"].output == 10
    assert s.agent.scheduled_tasks[0].budget_tokens == 50000


def test_processes_without_schedules_leave_cron_syntax_to_up(tmp_path: Path) -> None:
    write(tmp_path, "config.toml", "[backup]\nenabled = true\ncron = 'nightly'\n")
    write(tmp_path, "agent.toml", "[heartbeat]\ndreaming = 'at night'\n"
          "[[scheduled_tasks]]\nname = 'a'\ncron = 'every day'\nprompt = 'hi'\n")
    with pytest.raises(ConfigError, match="'backup.cron'"):
        load_settings(tmp_path, {})
    settings = load_settings(tmp_path, {}, cron=False)  # e.g. the planner: no cron to run
    assert settings.agent.scheduled_tasks[0].cron == "every day"
    write(tmp_path, "agent.toml", "[[scheduled_tasks]]\nname = 'a'\ncron = '0 8 * * *'\n"
          "every = '1h'\nprompt = 'hi'\n")
    with pytest.raises(ConfigError, match="exactly one of cron, every or at"):
        load_settings(tmp_path, {}, cron=False)  # what needs no croniter is still checked
