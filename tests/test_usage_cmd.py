"""``orcr usage`` (issue 25): sums of the stored per-turn usage by path prefix,
grouped by path, provider, model, loop or day, with an optional price table."""

from __future__ import annotations

import json
import sqlite3
import time
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from orcr_core.cli.usage_cmd import parse_since


def _usage(live, *args):
    return json.loads(live.run("usage", *args, "--json", check=True).stdout)


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_usage_sums_by_prefix_and_groups(live):
    live.config(
        (live.path / "config.toml").read_text()
        + '[[usage.prices]]\nmodel = "echo"\ninput = 1000000\noutput = 2000000\n'
    )
    live.start_server()
    for path, prompt in (("night/r1/a", "a b c"), ("night/r1/b", "d e"), ("nightly2/x", "f")):
        live.run("agent", "run", "--provider", "echo", "--path", path, prompt, check=True)
    for path in ("night/r1/a", "night/r1/b", "nightly2/x"):
        live.run("agent", "wait", path, "--timeout", "30s", check=True)
    # night: (3+3) + (2+2); nightly2 is another scope, not under "night"
    res = _usage(live, "night")
    assert res["total"]["tokens"] == 10 and res["total"]["agents"] == 2
    assert res["total"]["input"] == 5 and res["total"]["output"] == 5
    assert res["total"]["cost"] == 5 * 1 + 5 * 2  # per million tokens, as configured
    by_path = {g["key"]: g["tokens"] for g in _usage(live, "--by", "path")["groups"]}
    assert by_path == {"night/r1/a": 6, "night/r1/b": 4, "nightly2/x": 2}
    assert [(g["key"], g["tokens"]) for g in _usage(live, "--by", "provider")["groups"]] == [
        ("echo", 12)
    ]
    today = time.strftime("%Y-%m-%d")
    assert [(g["key"], g["turns"]) for g in _usage(live, "--by", "day")["groups"]] == [(today, 3)]
    assert _usage(live, "--since", "2099-01-01")["total"]["tokens"] == 0
    assert _usage(live, "--since", "1h")["total"]["tokens"] == 12
    text = live.run("usage", "--by", "model", check=True).stdout.splitlines()
    assert text[0].split()[:3] == ["MODEL", "TURNS", "AGENTS"] and text[1].split()[0] == "echo"
    assert text[-1].split()[0] == "total"


def test_days_and_since_are_local_to_the_zone_orcr_runs_in(orcr_home, local_zone):
    """Two turns a minute either side of local midnight fall on two local days, and a
    ``--since`` date is that day's local midnight. Planted: ``--by day`` groups by the
    UTC date (``time.gmtime``) -> fails; ``--since`` read as UTC -> fails."""
    orcr_home.env["TZ"] = local_zone
    orcr_home.start_server()
    midnight = datetime(2026, 12, 2, tzinfo=ZoneInfo(local_zone)).timestamp()
    conn = sqlite3.connect(orcr_home.path / "store.db", timeout=10)
    with conn:
        for i, (at, tokens) in enumerate(((midnight - 60, 100), (midnight + 60, 7))):
            conn.execute(
                "INSERT INTO turn_usage (agent, turn, path, provider, model, ended_at, input, "
                "output, cache_read, cache_write) VALUES (?, 1, 'd/x', 'p', 'm', ?, ?, 0, 0, 0)",
                (f"a{i}", at, tokens),
            )
    conn.close()
    days = {g["key"]: g["tokens"] for g in _usage(orcr_home, "--by", "day")["groups"]}
    assert days == {"2026-12-01": 100, "2026-12-02": 7}
    assert _usage(orcr_home, "--since", "2026-12-02")["total"]["tokens"] == 7
    assert _usage(orcr_home, "--since", "2026-12-01T23:58")["total"]["tokens"] == 107


def test_bad_since_and_by_are_refused_naming_what_is_allowed(orcr_home):
    r = orcr_home.run("usage", "--since", "yesterdayish")
    assert r.returncode == 2 and "neither a duration" in r.stderr
    r = orcr_home.run("usage", "--by", "colour")
    assert r.returncode == 2 and "path" in r.stderr and "day" in r.stderr


def test_since_parses_durations_and_times():
    assert parse_since("2h", now=10_000.0) == 10_000.0 - 7200
    assert parse_since("2026-12-01T00:00:00+00:00") == 1_796_083_200.0


def test_a_bad_price_table_is_refused(orcr_home):
    orcr_home.config('[[usage.prices]]\nmodel = "m"\ninput = -1\n')
    r = orcr_home.run("config", "get")
    assert r.returncode != 0 and "usage.prices" in r.stderr, r
