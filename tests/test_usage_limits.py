"""Usage limits hold the queue (issue 38 part 5): a Claude Code turn that waits out its
plan's usage limit ("Usage limit reached · continuing automatically at 7pm · esc or type
to cancel") stays ``working (waiting: usage limit until 19:00)``, holds new claude
promotions until it goes on (``queued (held: usage limit claude until 19:00)``), and
ends its turn normally once the CLI continues."""

from __future__ import annotations

import time

import pytest
from fake_clis import configure, run_agent, wait_idle
from orcr_claude.screen import screen_state, usage_limit

from orcr_core.contracts import LaunchSpec
from orcr_core.kit.screens import reset_at
from orcr_core.kit.testing import until

#: the line as seen on a real Claude Code pane (issue 38's report), as Claude Code's
#: own documentation shows it ("Wait for usage limit reset", v2.1.234+), and as the real
#: 2.1.332 logged in to a plan shows it under its composer while it waits
REAL_LINES = (
    "Usage limit reached · continuing automatically at 7pm · esc or type to cancel",
    "Usage limit reached · continuing automatically at 3:45pm · esc to cancel",
    "Continuing automatically at 7pm · Esc to cancel",
    "Continuing automatically at 3:45pm · Esc to cancel",
)


def _at(clock: str, now: float) -> str:
    return time.strftime("%H:%M", time.localtime(reset_at(clock, now)))


def test_reset_clocks_are_the_next_such_time():
    noon = time.mktime((2026, 12, 6, 12, 0, 0, 0, 0, -1))
    assert _at("7pm", noon) == "19:00" and _at("3:45pm", noon) == "15:45"
    assert _at("3:28 PM", noon) == "15:28" and _at("12am", noon) == "00:00"
    assert reset_at("11am", noon) - noon == 23 * 3600  # already past today: tomorrow's
    assert reset_at("soon", noon) is None and reset_at("3", noon) is None


@pytest.mark.parametrize("line", REAL_LINES)
def test_claude_reads_the_usage_limit_line(line):
    spec = LaunchSpec(uuid="u", path="w/a", cwd="/", data_dir="/tmp")
    shown = screen_state(f"✻ Thinking…\n\n{line}\n{'─' * 50}\n❯ \n", spec)
    assert (shown.state, shown.kind) == ("waiting", "usage_limit")
    clock = "19:00" if "7pm" in line else "15:45"
    assert shown.reason == f"usage limit until {clock}" and shown.until is not None
    # the line Claude Code draws once the reset came is no wait, nor 2.1.332's message
    # left in the conversation once Esc cancelled the wait
    assert usage_limit("Usage limit reset · continuing automatically") is None
    assert usage_limit("● Usage limit reached · set to continue automatically at 7pm") is None


def test_claude_reads_a_shortly_reset_and_its_429_turn_error():
    """The real 2.1.332 with an API key ends the turn on the API's 429 (captured:
    plugins/claude/tests/fixtures/screens/2.1.332-api-429.txt); that holds claude too.

    Planted: ClaudeProvider.usage_limit missing -> fails (no hook)."""
    from pathlib import Path

    from orcr_claude import ClaudeProvider

    shown = usage_limit("Continuing automatically shortly · Esc to cancel")
    assert (shown.kind, shown.reason, shown.until) == ("usage_limit", "usage limit", None)
    screen = (
        Path(__file__).parent.parent / "plugins/claude/tests/fixtures/screens/2.1.332-api-429.txt"
    ).read_text()
    (line,) = [ln for ln in screen.splitlines() if "API Error" in ln]
    error = line.strip().removeprefix("● ")
    assert ClaudeProvider().usage_limit(error).kind == "usage_limit"
    assert ClaudeProvider().usage_limit("API Error: 500 Internal server error") is None
    spec = LaunchSpec(uuid="u", path="w/a", cwd="/", data_dir="/tmp")
    assert screen_state(screen, spec).kind != "usage_limit"  # the turn ended: no wait


def test_claude_reads_a_plans_usage_limit_as_the_real_cli_shows_it():
    """The real 2.1.332 logged in to a claude.ai plan (``.credentials.json``), the API's
    429 with ``anthropic-ratelimit-unified-status: rejected``: the turn ends with "You've
    hit your 5-hour limit · resets 12:24am (UTC)" and the pane waits to continue
    (captured: plugins/claude/tests/fixtures/screens/2.1.332-usage-limit-plan.txt).

    Planted: LIMIT_ERROR without the plan's "You've hit your ... limit" -> fails (None)."""
    from pathlib import Path

    from orcr_claude import ClaudeProvider

    shown = ClaudeProvider().usage_limit("You've hit your 5-hour limit · resets 12:24am (UTC)")
    assert (shown.kind, shown.reason) == ("usage_limit", "usage limit until 00:24")
    screen = (
        Path(__file__).parent.parent
        / "plugins/claude/tests/fixtures/screens/2.1.332-usage-limit-plan.txt"
    ).read_text()
    spec = LaunchSpec(uuid="u", path="w/a", cwd="/", data_dir="/tmp")
    waiting = screen_state(screen, spec)
    assert (waiting.state, waiting.reason) == ("waiting", "usage limit until 00:24")


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_a_usage_limit_holds_its_provider_until_the_cli_goes_on(live, short_tmp):
    """w/lim's turn waits out a limit for 12 s; w/next (claude) stays queued, held, while
    a codex agent starts; w/lim's turn then ends with its answer and w/next starts.

    Planted: Limits.held ignored in the queue worker -> fails (w/next starts at once).
    Planted: asking.check not noting the wait -> fails (no waiting on w/lim).
    Planted: a stalled flag kept when the wait is seen -> fails (``working (stalled)``).
    Planted: top's model not reading status usage_limits -> fails (top's held)."""
    cwd = short_tmp / "w"
    cwd.mkdir()
    configure(live, short_tmp, timings='blocked_after = "1s"\nstall_after = "1s"\n')
    live.start_server()
    # 12 s of limit: the checks below (two CLI runs, a codex start) took over 5 s on the
    # loaded 2-core machine, and the hold had lifted before top was asked (a rerun)
    run_agent(live, "claude", "w/lim", "[limit 12] went on", cwd=cwd)
    with live.sdk() as o:
        a = until(lambda: (a := o.get("w/lim"))["waiting"] and a, 15, "w/lim waiting")
        assert a["status"] == "working" and a["waiting"].startswith("usage limit until ")
        clock = a["waiting"].removeprefix("usage limit until ")
        o.run("next", provider="claude", path="w/next", cwd=str(cwd))
        o.run("other", provider="codex", path="w/other", cwd=str(cwd))
        until(lambda: o.get("w/other")["status"] != "queued", 10, "codex not held")
        held = o.get("w/next")
        assert (held["status"], held["held"]) == ("queued", f"usage limit claude until {clock}")
        ls = live.run("agent", "ls", check=True).stdout
        assert f"queued (held: usage limit claude until {clock})" in ls, ls
        assert f"working (waiting: usage limit until {clock})" in ls, ls
        assert not o.get("w/lim")["stalled"]  # quiet past stall_after: a wait, no stall
        assert o.status()["usage_limits"] == {"claude": f"usage limit claude until {clock}"}
        top = live.run("top", "--once", "--json", check=True).stdout
        assert f'"held": "usage limit claude until {clock}"' in top, top
    wait_idle(live, "w/lim")
    assert live.run("agent", "read", "w/lim", check=True).stdout == "went on\n"
    wait_idle(live, "w/next")
    kinds = [e["kind"] for e in live.events(live.get("w/lim")["uuid"])]
    assert kinds.count("agent.usage_limit") == 1 and "agent.usage_limit_over" in kinds


def test_hold_on_limit_false_lets_the_provider_start(monkeypatch):
    """Per provider, and only while the reset is ahead; the rule that notifies.

    Planted: Limits.held not checking hold_on_limit -> fails (codex held)."""
    from types import SimpleNamespace

    from orcr_core.config import DEFAULTS, Config, _merge
    from orcr_core.notify.rules import classify
    from orcr_core.usage_limits import Limits, Wait

    cfg = Config(_merge(DEFAULTS, {"providers": {"codex": {"hold_on_limit": False}}}), None)
    server = SimpleNamespace(config=cfg)
    now = 1000.0
    waits = {
        "a": Wait("claude", "usage limit until 19:00", now + 60, now, now),
        "b": Wait("codex", "usage limit", None, now, now),
    }
    limits = Limits()
    monkeypatch.setattr(limits, "_live", lambda now: waits)
    held = limits.held(server, now)
    assert set(held) == {"claude"} and held["claude"].startswith("usage limit claude until ")
    ev = {"kind": "agent.usage_limit", "data": {"path": "w/a", "provider": "claude",
          "reason": "usage limit until 19:00", "hold": True}}  # fmt: skip
    rule, subject, fields = classify(ev, {})
    assert (rule, subject) == ("usage_limit", "w/a") and "19:00" in fields["title"]


#: Codex's own words (codex-rs/core/src/error.rs, UsageLimitReachedError): today's reset,
#: another day's, and none known
CODEX_ERRORS = (
    ("You've hit your usage limit. Try again at 3:28 PM.", "usage limit until 15:28"),
    (
        "You've hit your usage limit. Visit https://chatgpt.com/codex/settings/usage to "
        "purchase more credits or try again at Aug 8th, 2030 12:30 PM.",
        "usage limit until 12:30",
    ),
    ("You've hit your usage limit. Try again later.", "usage limit"),
    # the real 0.171.0's (captured, plugins/codex/tests/fixtures/screens/README.md): a
    # typographic apostrophe, a plan's hint, another day's reset
    (
        "You\u2019ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), "
        "visit https://chatgpt.com/settings/usage to purchase more credits or try again at "
        "Dec 7th, 2026 2:01 AM.",
        "usage limit until 02:01",
    ),
    ("Quota exceeded. Check your plan and billing details.", "usage limit"),
)


@pytest.mark.parametrize("error, reason", CODEX_ERRORS)
def test_codex_reads_its_usage_limit_error(error, reason):
    """Planted: the pattern's apostrophe only ASCII (as before the capture) -> fails
    (the real 0.171.0's "You\u2019ve")."""
    from orcr_codex.screen import usage_limit as codex_limit

    shown = codex_limit(error)
    assert (shown.state, shown.kind, shown.reason) == ("waiting", "usage_limit", reason)
    if "2030" in error:
        assert time.localtime(shown.until)[:3] == (2030, 8, 8)
    assert codex_limit("We're currently experiencing high demand") is None


@pytest.mark.parametrize("live", ["tmux"], indirect=True)
def test_a_codex_turn_that_ends_on_its_limit_holds_codex(live, short_tmp):
    """Codex ends the turn (errored) on a usage limit: the agent goes idle with the error,
    and codex's queued rows are held until the reset it names; claude goes on.

    Planted: turns.follow not passing the turn's error to Limits -> fails (w/c2 starts)."""
    cwd = short_tmp / "w"
    cwd.mkdir()
    configure(live, short_tmp)
    live.start_server()
    run_agent(live, "codex", "w/c1", "[limit 30] x", cwd=cwd)
    with live.sdk() as o:
        until(lambda: o.get("w/c1")["status"] == "idle", 20, "w/c1's turn to end")
        assert o.get("w/c1")["turn_error"].startswith("You've hit your usage limit.")
        o.run("next", provider="codex", path="w/c2", cwd=str(cwd))
        o.run("other", provider="claude", path="w/cl", cwd=str(cwd))
        until(lambda: o.get("w/cl")["status"] != "queued", 10, "claude not held")
        held = o.get("w/c2")
        assert held["status"] == "queued" and held["held"].startswith("usage limit codex until ")


@pytest.mark.parametrize("live", ["tmux", "herdr"], indirect=True)
def test_a_plans_limit_waits_working_until_the_cli_goes_on(live, short_tmp):
    """Claude Code on a plan ends the turn on its limit and waits at its composer,
    "Continuing automatically at … · Esc to cancel" (the fake's ``[planlimit N]``, as the
    captured 2.1.332 screen shows it). The ``--rm`` agent w/on stays ``working (waiting:
    usage limit until …)``, not ended, and ends ``done`` with its answer once the CLI goes
    on; w/esc, whose wait a person cancels with Esc, goes idle with the limit's error.

    Planted: limit_wait.waits always False (the line not read) -> fails (w/on ends done
    with the error at once, never waiting). Planted: USAGE_LIMIT also taking the "●
    Usage limit reached · set to continue automatically" message left above -> fails
    (w/esc stays working after Esc)."""
    cwd = short_tmp / "w"
    cwd.mkdir()
    configure(live, short_tmp)
    live.start_server()
    with live.sdk() as o:
        o.run("[planlimit 4] went on", provider="claude", path="w/on", cwd=str(cwd), rm=True)
        o.run("[planlimit 120] never", provider="claude", path="w/esc", cwd=str(cwd))
        for path in ("w/on", "w/esc"):
            a = until(lambda p=path: (a := o.get(p))["waiting"] and a, 15, f"{path} waiting")
            assert a["status"] == "working" and a["waiting"].startswith("usage limit until ")
        o.keys("w/esc", ["esc"])
        esc = until(lambda: (a := o.get("w/esc"))["status"] == "idle" and a, 10, "w/esc idle")
        assert esc["turn_error"].startswith("You've hit your 5-hour limit · resets ")
        on = until(lambda: (a := o.get("w/on"))["status"] == "ended" and a, 20, "w/on done")
        assert on["exit_reason"] == "done" and not on["turn_error"]
    assert live.run("agent", "read", "w/on", check=True).stdout == "went on\n"


def test_the_captured_plan_screen_keeps_the_ended_turn_waiting(monkeypatch):
    """limit_wait.waits on the captured 2.1.332 plan screen: waiting (noted as seen);
    the same screen once Esc took its "Continuing automatically" line off: the wait is
    over and the turn's end is taken; an error that is no usage limit reads no screen.

    Planted: USAGE_LIMIT also taking "● Usage limit reached · set to continue
    automatically" (left in the conversation) -> fails (still waiting after Esc).
    Planted: waits always False -> fails. Planted: a running turn not read (the line
    gone as the CLI goes on taken for Esc) -> fails. Planted: the Esc branch not calling
    ``usage_limits.over`` -> fails (no ``agent.usage_limit_over``; the e2e still passes:
    the turn's end is taken either way)."""
    from pathlib import Path
    from types import SimpleNamespace

    from orcr_claude import ClaudeProvider

    from orcr_core.agents import limit_wait

    screen = (
        Path(__file__).parent.parent
        / "plugins/claude/tests/fixtures/screens/2.1.332-usage-limit-plan.txt"
    ).read_text()
    shown, calls = [screen], []
    limits = SimpleNamespace(
        noticed=lambda uuid: 1.0 if ("seen", uuid) in calls else None,
        seen=lambda server, agent, reason, until: calls.append(("seen", agent.uuid)),
        over=lambda server, agent, why: calls.append(("over", why)),
    )
    server = SimpleNamespace(
        dialog_checked={}, driver=SimpleNamespace(read=lambda pane: shown[0]), usage_limits=limits
    )
    agent = SimpleNamespace(uuid="u", stalled_at=None)
    spec = LaunchSpec(uuid="u", path="w/a", cwd="/", data_dir="/tmp")
    monkeypatch.setattr(limit_wait, "pane_of", lambda agent: "%1")
    monkeypatch.setattr(limit_wait, "launch_spec", lambda server, agent: spec)
    monkeypatch.setattr(limit_wait.stall, "grew_at", lambda server, agent: 0.0)
    error = "You've hit your 5-hour limit · resets 12:24am (UTC)"
    claude = ClaudeProvider()
    assert limit_wait.waits(server, agent, claude, error, now=100.0)
    assert calls == [("seen", "u")]
    server.dialog_checked.clear()
    line = "Continuing automatically at 12:24am · Esc to cancel"
    shown[0] = screen.replace(line, "✻ Thinking… (esc to interrupt)")  # the CLI went on
    assert limit_wait.waits(server, agent, claude, error, now=100.0) and len(calls) == 1
    server.dialog_checked.clear()  # keys sent: the screen is read again at once
    shown[0] = screen.replace(line, "")
    assert not limit_wait.waits(server, agent, claude, error, now=100.0)
    assert calls[-1] == ("over", "the limit left the screen")
    server.dialog_checked.clear()
    shown[0] = screen
    assert not limit_wait.waits(server, agent, claude, "API Error: 500 boom", now=100.0)
