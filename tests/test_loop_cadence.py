"""Cadence: five-field cron in a stored zone with cronie's DST rules, and --once-at.

Both transitions, fixed-time and wildcard jobs, in a northern (New York) and a
southern (Sydney) zone. Instants are checked in UTC so a wrong offset shows.
"""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from croniter import croniter

from orcr_core.loops import cadence

NY, SYD = "America/New_York", "Australia/Sydney"


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _fires(expr: str, tz: str, start: str, n: int) -> list[str]:
    return [cadence.iso_utc(t) for t in cadence.fires(expr, tz, _ts(start), n)]


def test_croniter_alone_fires_twice_on_a_fall_back_night():
    """The bug orcr corrects: croniter 7 with a zone-aware start repeats 01:30."""
    from zoneinfo import ZoneInfo

    it = croniter("30 1 * * *", datetime(2026, 10, 31, 12, tzinfo=ZoneInfo(NY)))
    raw = [it.get_next(datetime).astimezone(ZoneInfo("UTC")).isoformat() for _ in range(2)]
    assert raw[0][:10] == raw[1][:10] == "2026-11-01"  # twice the same night
    assert _fires("30 1 * * *", NY, "2026-10-31T12:00:00Z", 2) == [
        "2026-11-01T05:30:00Z",  # 01:30 EDT, the first pass only
        "2026-11-02T06:30:00Z",  # 01:30 EST the next day
    ]


@pytest.mark.parametrize(
    "tz, start, expected",
    [
        # New York springs forward 2026-03-08 02:00 EST -> 03:00 EDT (07:00Z)
        (NY, "2026-03-07T12:00:00Z", ["2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"]),
        # Sydney springs forward 2026-10-04 02:00 AEST -> 03:00 AEDT (16:00Z the 3rd)
        (
            SYD,
            "2026-10-02T12:00:00Z",
            ["2026-10-02T16:30:00Z", "2026-10-03T16:00:00Z", "2026-10-04T15:30:00Z"],
        ),
    ],
)
def test_fixed_time_in_a_skipped_hour_runs_once_right_after_the_gap(tz, start, expected):
    assert _fires("30 2 * * *", tz, start, len(expected)) == expected


def test_several_fixed_times_in_one_gap_run_once():
    # 02:00, 02:15, 02:30 and 02:45 all fall in the gap: one fire at 03:00 EDT
    assert _fires("0,15,30,45 2 * * *", NY, "2026-03-08T05:00:00Z", 2) == [
        "2026-03-08T07:00:00Z",
        "2026-03-09T06:00:00Z",
    ]


@pytest.mark.parametrize(
    "tz, expr, start, expected",
    [
        # New York falls back 2026-11-01 02:00 EDT -> 01:00 EST: 01:30 happens twice
        (
            NY,
            "30 1 * * *",
            "2026-10-31T12:00:00Z",
            ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"],
        ),
        # Sydney falls back 2026-04-05 03:00 AEDT -> 02:00 AEST: 02:30 happens twice
        (
            SYD,
            "30 2 * * *",
            "2026-04-04T12:00:00Z",
            ["2026-04-04T15:30:00Z", "2026-04-05T16:30:00Z"],
        ),
    ],
)
def test_fixed_time_in_a_repeated_hour_runs_once(tz, expr, start, expected):
    assert _fires(expr, tz, start, len(expected)) == expected


@pytest.mark.parametrize(
    "tz, start, expected",
    [
        # */30: 01:00 01:30 EDT, then 01:00 01:30 EST again, then 02:00 EST
        (
            NY,
            "2026-11-01T04:40:00Z",
            [
                "2026-11-01T05:00:00Z",
                "2026-11-01T05:30:00Z",
                "2026-11-01T06:00:00Z",
                "2026-11-01T06:30:00Z",
                "2026-11-01T07:00:00Z",
            ],
        ),
        # Sydney: 02:00 02:30 AEDT, 02:00 02:30 AEST, 03:00 AEST
        (
            SYD,
            "2026-04-04T14:40:00Z",
            [
                "2026-04-04T15:00:00Z",
                "2026-04-04T15:30:00Z",
                "2026-04-04T16:00:00Z",
                "2026-04-04T16:30:00Z",
                "2026-04-04T17:00:00Z",
            ],
        ),
    ],
)
def test_wildcard_job_follows_the_wall_clock_through_a_repeated_hour(tz, start, expected):
    assert _fires("*/30 * * * *", tz, start, len(expected)) == expected


@pytest.mark.parametrize(
    "tz, start, expected",
    [
        # 01:30 EST, then 03:00 EDT: nothing at 02:00/02:30 (they never happen)
        (
            NY,
            "2026-03-08T06:10:00Z",
            ["2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z"],
        ),
        (
            SYD,
            "2026-10-03T15:10:00Z",
            ["2026-10-03T15:30:00Z", "2026-10-03T16:00:00Z", "2026-10-03T16:30:00Z"],
        ),
    ],
)
def test_wildcard_job_skips_a_skipped_hour(tz, start, expected):
    assert _fires("*/30 * * * *", tz, start, len(expected)) == expected


def test_wildcard_hour_with_fixed_minute_is_a_wildcard_job():
    assert not cadence.is_fixed_time("30 * * * *") and cadence.is_fixed_time("30 1 * * *")
    assert _fires("30 * * * *", NY, "2026-11-01T05:00:00Z", 3) == [
        "2026-11-01T05:30:00Z",  # 01:30 EDT
        "2026-11-01T06:30:00Z",  # 01:30 EST: the wall clock shows it again
        "2026-11-01T07:30:00Z",
    ]


def test_nine_am_stays_nine_am_across_the_boundary():
    fires = cadence.fires("0 9 * * *", NY, _ts("2026-03-07T00:00:00Z"), 2)
    assert [cadence.iso_local(t, NY)[11:19] for t in fires] == ["09:00:00", "09:00:00"]
    assert fires[1] - fires[0] == 23 * 3600


def test_bad_cron_and_zone_are_refused_with_the_rule():
    with pytest.raises(cadence.CadenceError, match="five fields"):
        cadence.validate_cron("* * * *")
    with pytest.raises(cadence.CadenceError, match="minute field '61'"):
        cadence.validate_cron("61 * * * *")
    with pytest.raises(cadence.CadenceError, match="IANA"):
        cadence.zone("Mars/Olympus")
    assert cadence.next_fire("0 0 30 2 *", "UTC", 0) is None


def test_once_at_relative_duration():
    assert cadence.parse_when("30m", NY, now=1000.0) == 1000.0 + 1800
    assert cadence.parse_when("1h30m", NY, now=0.0) == 5400


def test_once_at_rfc3339():
    assert cadence.parse_when("2026-03-08T09:00:00+01:00", NY) == _ts("2026-03-08T08:00:00Z")
    assert cadence.parse_when("2026-03-08T08:00:00Z", SYD) == _ts("2026-03-08T08:00:00Z")


def test_once_at_local_wall_clock_in_the_loop_zone():
    assert cadence.parse_when("2026-07-01 09:00", NY) == _ts("2026-07-01T13:00:00Z")
    assert cadence.parse_when("2026-07-01T09:00:30", SYD) == _ts("2026-06-30T23:00:30Z")
    # a repeated local time means its first occurrence; a skipped one is refused
    assert cadence.parse_when("2026-11-01 01:30", NY) == _ts("2026-11-01T05:30:00Z")
    with pytest.raises(cadence.CadenceError, match="does not exist"):
        cadence.parse_when("2026-03-08 02:30", NY)
    with pytest.raises(cadence.CadenceError, match="RFC 3339"):
        cadence.parse_when("tomorrow", NY)


def test_loop_next_cli_previews_fires_as_utc_json(orcr_home):
    res = orcr_home.run(
        "loop",
        "next",
        "30 1 * * *",
        "--tz",
        NY,
        "--from",
        "2026-10-31T12:00:00Z",
        "--count",
        "2",
        "--json",
        check=True,
    )
    assert json.loads(res.stdout) == {"fires": ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]}
    text = orcr_home.run(
        "loop",
        "next",
        "30 2 * * *",
        "--tz",
        NY,
        "--from",
        "2026-03-07 12:00",
        "--count",
        "1",
        check=True,
    ).stdout
    assert text.split() == ["2026-03-08", "03:00:00", "EDT", "2026-03-08T07:00:00Z"]
    assert not (orcr_home.path / "store.db").exists()  # nothing created, no server
    bad = orcr_home.run("loop", "next", "61 * * * *")
    assert bad.returncode == 2 and "minute field '61'" in bad.stderr


@pytest.mark.parametrize(
    "expr, words",
    [
        ("H * * * *", "minute field 'H'"),  # croniter's hash: not cron
        ("0 25 * * *", "hour field '25'"),
        ("0 9 32 * *", "day-of-month field '32'"),
        ("0 9 * 13 *", "month field '13'"),
        ("0 9 * * 8", "day-of-week field '8'"),
        ("@every5m", "not a cron macro"),
        ("0 9 * * * *", "has 6 fields"),
    ],
)
def test_a_bad_cron_names_its_field_and_never_croniters_words(expr, words):
    with pytest.raises(cadence.CadenceError) as exc:
        cadence.validate_cron(expr)
    msg = str(exc.value)
    assert words in msg and "five fields" in msg
    assert "hash_id" not in msg and "Hashed" not in msg and "Exactly" not in msg


def test_cron_macros_are_the_five_fields_they_stand_for():
    assert cadence.validate_cron("@daily") == "0 0 * * *"
    assert cadence.validate_cron(" @Hourly ") == "0 * * * *"
    assert cadence.validate_cron("@weekly") == "0 0 * * 0"


@pytest.mark.parametrize("text", ["2026-13-01 10:00", "2026-02-30 10:00", "2026-13-01T10:00Z"])
def test_an_impossible_date_is_refused_with_why(text):
    with pytest.raises(cadence.CadenceError, match="not a real date"):
        cadence.parse_when(text, NY)


def test_rfc3339_with_a_space_is_accepted_and_a_posix_tz_rule_is_refused():
    # what date --rfc-3339=seconds prints
    assert cadence.parse_when("2026-03-08 09:00:00+01:00", NY) == _ts("2026-03-08T08:00:00Z")
    with pytest.raises(cadence.CadenceError, match="POSIX TZ rule"):
        cadence.zone("EST5EDT,M3.2.0,M11.1.0")


def test_cli_cadence_errors_are_one_code_and_one_line(orcr_home):
    orcr_home.start_server()
    cases = [
        (("next", "0 9 * * *", "--from", "2026-13-01 10:00"), 2, "not a real date"),
        (("next", "0 9 * * *", "--from", "2026-02-30 10:00"), 2, "not a real date"),
        (("next", "@daily", "--count", "1", "--tz", "UTC"), 0, "00:00:00"),
        (("create", "once1", "--once-at", "2026-13-01 10:00", "--", "true"), 1, "invalid_cadence"),
        (("create", "c1", "H * * * *", "--", "true"), 1, "invalid_cadence"),
        (("create", "c2", "0 0 30 2 *", "--", "true"), 1, "invalid_cadence"),
        (("create", "c3", "0 9 * * *", "--tz", "EST5EDT,M3.2.0,M11.1.0", "--", "true"), 1, "POSIX"),
        (("create", "Bad-Name", "0 9 * * *", "--", "true"), 1, "a loop name is one segment"),
    ]
    for args, code, words in cases:
        res = orcr_home.run("loop", *args)
        assert res.returncode == code, (args, res.stderr)
        assert words in res.stdout + res.stderr, (args, res.stdout, res.stderr)
        assert "Traceback" not in res.stderr and "server_error" not in res.stderr
    assert "agent path" not in orcr_home.run("loop", "create", "a/b", "@daily", "--", "true").stderr
    # $TZ set to a POSIX rule is refused, not silently read as the machine's zone
    res = orcr_home.run(
        "loop", "create", "tzr", "0 9 * * *", "--", "true", env={"TZ": "EST5EDT,M3.2.0,M11.1.0"}
    )
    assert res.returncode == 2 and "POSIX TZ rule" in res.stderr and "--tz" in res.stderr
    res = orcr_home.run("loop", "create", "tzd", "@daily", "--json", "--", "true", env={"TZ": ""})
    assert res.returncode == 0, res.stderr
    assert orcr_home.run("loop", "ls", "--json", check=True).stdout.count('"name"') == 1


def test_loop_logs_and_the_local_zone_name_follow_tz(local_zone):
    """``loop logs`` prints an event at the local time, and a loop made without ``--tz``
    takes ``$TZ``'s zone. Planted: ``loop logs`` prints UTC -> fails."""
    from zoneinfo import ZoneInfo

    from orcr_core.cli.loop_logs import _event_line
    from orcr_core.loops.zone import local_zone_name

    at = datetime(2026, 12, 2, 0, 1, 30, tzinfo=ZoneInfo(local_zone)).timestamp()
    line = _event_line({"ts": at, "kind": "loop.fired", "data": {}})
    assert line == "2026-12-02 00:01:30 loop.fired"
    assert local_zone_name() == local_zone
