"""orcr top's view model: snapshot + events by seq, filter, sort, header, text frame."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orcr_core.top.model import Filter, FleetModel, Gap, duration, iso, local_time
from orcr_core.top.text import format_frame

T0 = 1_800_000_000.0


def agent(uuid, path, status="working", provider="echo", turn=1, **kw):
    a = {
        "uuid": uuid,
        "path": path,
        "provider": provider,
        "status": status,
        "exit_reason": None,
        "turn": turn,
        "created_at": iso(T0),
        "started_at": iso(T0 + 1),
        "turn_started_at": iso(T0 + 2),
        "idle_since": iso(T0 + 3) if status == "idle" else None,
        "ended_at": None,
    }
    a.update(kw)
    return a


def ev(seq, kind, uuid, ts=None, **data):
    return {"seq": seq, "ts": ts or T0 + seq, "kind": kind, "agent": uuid, "data": data}


def status(seq, uuid, path, frm, to, **kw):
    return ev(
        seq, "agent.status", uuid, path=path, provider="echo", **{"from": frm, "to": to}, **kw
    )


def snapshot(seq, *agents):
    return {"snapshot_seq": seq, "agents": list(agents)}


def test_events_apply_in_seq_order_over_the_snapshot():
    m = FleetModel()
    m.load_snapshot(snapshot(10, agent("a", "demo/a")))
    assert m.apply(ev(9, "agent.queued", "old", path="x/old")) is False  # before the snapshot
    assert m.apply(ev(10, "agent.queued", "old", path="x/old")) is False
    assert "old" not in m.rows
    assert m.apply(ev(11, "agent.queued", "b", path="demo/b", provider="echo", queue_seq=2))
    assert m.apply(status(12, "b", "demo/b", "queued", "starting"))
    assert m.rows["b"].status == "starting" and m.rows["b"].since == T0 + 12
    assert m.seq == 12
    with pytest.raises(Gap) as gap:
        m.apply(status(14, "b", "demo/b", "starting", "working"))
    assert (gap.value.expected, gap.value.got) == (13, 14)
    assert m.rows["b"].status == "starting" and m.seq == 12  # a gap applies nothing


def test_a_replayed_event_is_not_applied_twice():
    m = FleetModel()
    m.load_snapshot(snapshot(0))
    m.apply_batch(
        [
            ev(1, "agent.queued", "b", path="demo/b", provider="echo"),
            status(2, "b", "demo/b", "queued", "starting"),
        ]
    )
    # the same frames again (a re-sent batch): the row must stay starting, not go back to queued
    assert (
        m.apply_batch(
            [
                ev(1, "agent.queued", "b", path="demo/b"),
                status(2, "b", "demo/b", "queued", "starting"),
            ]
        )
        == 0
    )
    assert m.rows["b"].status == "starting" and m.duplicates == 2


def test_resnapshot_replaces_rows_keeps_ended_and_reports_vanished():
    m = FleetModel()
    m.load_snapshot(snapshot(5, agent("a", "demo/a"), agent("b", "demo/b", status="idle")))
    m.apply(status(6, "b", "demo/b", "idle", "ended", exit_reason="killed"))
    m.set_answer("a", "first\nsecond")
    # the server restarted: 'a' ended meanwhile (absent from the active snapshot), 'c' is new
    vanished = m.load_snapshot(snapshot(40, agent("c", "demo/c", status="queued")))
    assert vanished == ["a"]
    assert m.rows["a"].status == "ended" and m.rows["a"].exit_reason is None
    assert m.seq == m.snapshot_seq == 40
    assert m.rows["b"].status == "ended" and m.rows["b"].exit_reason == "killed"
    assert m.rows["c"].status == "queued"
    assert m.apply(status(40, "c", "demo/c", "queued", "starting")) is False  # in the snapshot
    assert m.apply(status(41, "c", "demo/c", "queued", "starting"))
    m.set_final(agent("a", "demo/a", status="ended", exit_reason="exited", ended_at=iso(T0 + 30)))
    assert m.rows["a"].status == "ended" and m.rows["a"].answer == "first"


def test_snapshot_time_in_status_comes_from_the_row():
    m = FleetModel()
    m.load_snapshot(
        snapshot(
            1,
            agent("q", "a/q", status="queued"),
            agent("w", "a/w", status="working"),
            agent("i", "a/i", status="idle"),
        )
    )
    assert [m.rows[u].since for u in "qwi"] == [T0, T0 + 2, T0 + 3]
    rows = {a["uuid"]: a for g in m.frame(now=T0 + 70)["groups"] for a in g["agents"]}
    assert rows["w"]["in_status"] == 68 and duration(rows["w"]["in_status"]) == "1m08s"


def test_turns_stalls_and_stale_answers_follow_events():
    m = FleetModel()
    m.load_snapshot(snapshot(0, agent("a", "demo/a", status="idle", turn=1)))
    assert m.stale_answers() == ["a"]  # an idle agent's answer is worth fetching
    m.set_answer("a", "\n  hello there  \nmore")
    assert m.rows["a"].answer == "hello there" and m.stale_answers() == []
    m.apply_batch(
        [
            status(1, "a", "demo/a", "idle", "working"),
            ev(2, "prompt.requested", "a", path="demo/a", turn=2),
            ev(3, "agent.stalled", "a", path="demo/a"),
        ]
    )
    assert m.rows["a"].turn == 2 and m.rows["a"].stalled and m.stale_answers() == []
    m.apply(status(4, "a", "demo/a", "working", "idle", turn_status="completed"))
    assert not m.rows["a"].stalled and m.stale_answers() == ["a"]


def test_filter_by_status_glob_substring_and_stalled():
    m = FleetModel()
    m.load_snapshot(
        snapshot(
            0,
            agent("1", "review/file_1", status="idle"),
            agent("2", "review/deep/file_2"),
            agent("3", "nightly/r1/build", status="queued"),
            agent("4", "nightly/r2/build", stalled=True),
        )
    )

    def paths(text):
        return [r.path for g in m.groups(Filter.parse(text)) for r in g.rows]

    assert paths("review/*") == ["review/file_1"]
    assert paths("review/**") == ["review/deep/file_2", "review/file_1"]
    assert paths("build") == ["nightly/r1/build", "nightly/r2/build"]
    assert paths("working") == ["nightly/r2/build", "review/deep/file_2"]
    assert paths("idle queued") == ["nightly/r1/build", "review/file_1"]
    assert paths("working nightly/**") == ["nightly/r2/build"]
    assert paths("stalled") == ["nightly/r2/build"]
    assert Filter.parse("review/*").glob == "review/*"
    assert Filter.parse("idle review/*").glob == "review/*"
    assert Filter.parse("review").glob is None
    assert [r.path for r in m.matching("nightly/**")] == ["nightly/r1/build", "nightly/r2/build"]


def test_sort_and_grouping_by_level_one():
    m = FleetModel()
    m.load_snapshot(
        snapshot(
            0,
            agent("1", "b/z", status="idle", created_at=iso(T0 + 1)),
            agent("2", "b/a", status="queued", created_at=iso(T0 + 3)),
            agent("3", "b/m", status="working", created_at=iso(T0 + 2)),
            agent("4", "a/x", status="idle"),
        )
    )
    assert [g.name for g in m.groups()] == ["a", "b"]

    def order(sort):
        return [r.path for r in m.groups(sort=sort)[1].rows]

    assert order("path") == ["b/a", "b/m", "b/z"]
    assert order("status") == ["b/m", "b/z", "b/a"]  # working, idle, queued
    assert order("age") == ["b/z", "b/m", "b/a"]  # oldest first


def test_header_counts_rows_and_takes_caps_and_drift_from_status():
    m = FleetModel()
    m.load_snapshot(
        snapshot(
            0,
            agent("1", "a/1", status="queued"),
            agent("2", "a/2", status="working", provider="claude"),
            agent("3", "a/3", status="idle"),
            agent("4", "a/4", status="lost"),
        )
    )
    m.set_status(
        {
            "caps": {"max": 25},
            "providers": {"claude": {"live": 9, "cap": 10}, "codex": {"live": 0, "cap": 5}},
            "drift": {"lost": 1, "repaired": 2, "orphan_agent_panes": 0, "unmarked_panes": 3},
            "driver": {"name": "tmux", "error": None, "info": {}},
        }
    )
    h = m.header()
    assert "unmanaged" not in format_frame(m.frame(now=T0 + 5))  # tmux reports none
    assert h["queue_depth"] == 1 and h["live"] == 2 and h["cap"] == 25
    # live counts are the rows' (exact at the cursor), caps the server's
    assert h["providers"] == {
        "claude": {"live": 1, "cap": 10},
        "codex": {"live": 0, "cap": 5},
        "echo": {"live": 1, "cap": None},
    }
    assert h["held_back"] is None and h["drift"]["repaired"] == 2
    m.apply(ev(1, "agent.queued", "5", path="a/5", provider="echo"))
    assert m.header()["queue_depth"] == 2
    m.set_status(
        dict(m.status, held="memory: 1.2 GiB free", driver={"name": "herdr", "error": "gone"})
    )
    assert m.header()["held_back"] == "memory: 1.2 GiB free"
    text = format_frame(m.frame(now=T0 + 5))
    assert "held back: memory: 1.2 GiB free" in text
    assert "herdr DOWN: gone" in text
    assert "unmanaged 0" in text  # herdr: the agents in the user's other sessions
    m.set_status(dict(m.status, unmanaged=3))
    assert "herdr DOWN: gone  unmanaged 3" in format_frame(m.frame(now=T0 + 5))
    assert "queue 2  live 2/25  claude 1/10  codex 0/5  echo 1/-" in text


def test_text_frame_lists_groups_and_columns():
    m = FleetModel()
    m.load_snapshot(snapshot(0, agent("1", "demo/a", status="idle", turn=3)))
    m.set_answer("1", "the answer\nis long")
    m.apply(status(1, "1", "demo/a", "idle", "ended", exit_reason="killed"))
    text = format_frame(m.frame(now=T0 + 1 + 65))
    assert "demo/ (1 ended)" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("demo/a"))
    assert line.split() == [  # TOKENS -, MEM -
        "demo/a", "echo", "ended", "1m05s", "3", "-", "-", "killed", "the", "answer"
    ]  # fmt: skip


def test_tokens_come_from_the_snapshot_and_each_turn_end_and_total_in_the_header():
    """Usage (issue 25): TOKENS per row, from the snapshot's usage and then the tokens
    each agent.status event carries for the turns that ended with it; the header sums them."""
    m = FleetModel()
    m.load_snapshot(
        snapshot(
            0,
            agent("a", "demo/a", status="working", usage={"tokens": 12_000}),
            agent("b", "demo/b", status="idle"),  # no usage reported: '-'
        )
    )
    assert m.rows["a"].tokens == 12_000 and m.rows["b"].tokens is None
    assert m.header()["tokens"] == 12_000
    m.apply(status(1, "a", "demo/a", "working", "idle", turn_status="completed", tokens=500))
    m.apply(status(2, "b", "demo/b", "idle", "working"))
    m.apply(status(3, "b", "demo/b", "working", "idle", turn_status="completed", tokens=7))
    assert (m.rows["a"].tokens, m.rows["b"].tokens, m.header()["tokens"]) == (12_500, 7, 12_507)
    text = format_frame(m.frame(now=T0 + 5))
    assert "tokens 12.5k" in text.splitlines()[0]
    assert "TOKENS" in text
    assert next(ln for ln in text.splitlines() if ln.startswith("demo/a")).split()[5] == "12.5k"
    # a duplicate (a replayed event) adds nothing
    assert m.apply(status(3, "b", "demo/b", "working", "idle", tokens=7)) is False
    assert m.rows["b"].tokens == 7


def test_mem_comes_from_the_snapshot_then_each_status_and_goes_with_the_group():
    """Issue 35: MEM (current/ceiling of a live agent's group) from the snapshot's
    ``memory``, then each server.status's ``ceilings.agents``; an ended agent shows '-'.

    Planted: set_status not reading ceilings.agents -> fails (still 100M).
    Planted: the ended status keeping row.memory -> fails (MEM of an ended row)."""
    from orcr_core.top.table import COLUMNS

    MiB = 2**20
    m = FleetModel()
    m.load_snapshot(
        snapshot(
            0,
            agent("a", "demo/a", memory={"current": 100 * MiB, "max": 2**31, "peak": 1}),
            agent("b", "demo/b", status="idle"),  # no group: '-'
        )
    )
    assert m.rows["a"].memory["current"] == 100 * MiB and m.rows["b"].memory is None
    m.set_status({"ceilings": {"agents": {"a": {"current": 300 * MiB, "max": 2**31}}}})
    text = format_frame(m.frame(now=T0 + 5))
    head = text.splitlines()[3].split()
    assert head[head.index("TOKENS") + 1] == "MEM" and "MEM" in dict(COLUMNS)
    line = next(ln for ln in text.splitlines() if ln.startswith("demo/a")).split()
    assert line[6] == "300M/2.0G", line
    assert next(ln for ln in text.splitlines() if ln.startswith("demo/b")).split()[6] == "-"
    assert m.frame(now=T0)["groups"][0]["agents"][0]["memory"]["current"] == 300 * MiB
    m.apply(status(1, "a", "demo/a", "working", "ended", exit_reason="oom"))
    assert m.rows["a"].memory is None
    m.set_status({})  # a status without the field (an older server) changes nothing
    assert m.rows["a"].memory is None and m.rows["b"].memory is None


def test_ended_rows_age_out_oldest_first():
    m = FleetModel(keep_ended=2)
    m.load_snapshot(snapshot(0, *(agent(str(i), f"g/a{i}") for i in range(4))))
    m.apply_batch([status(i + 1, str(i), f"g/a{i}", "working", "ended") for i in range(4)])
    assert sorted(m.rows) == ["2", "3"]


# a stream delivered with re-sent frames (duplicates) ends in the same state as the clean one
_kinds = st.sampled_from(["queued", "starting", "working", "idle", "ended", "prompt"])


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(st.tuples(st.integers(0, 4), _kinds), min_size=1, max_size=40),
    resend=st.lists(st.integers(0, 39), max_size=20),
)
def test_duplicates_never_change_the_outcome(steps, resend):
    events = []
    for seq, (who, kind) in enumerate(steps, start=1):
        uid = f"u{who}"
        if kind == "queued":
            events.append(ev(seq, "agent.queued", uid, path=f"p/{uid}", provider="echo"))
        elif kind == "prompt":
            events.append(ev(seq, "prompt.requested", uid, path=f"p/{uid}", turn=seq))
        else:
            events.append(status(seq, uid, f"p/{uid}", "?", kind))
    clean = FleetModel()
    clean.load_snapshot(snapshot(0))
    clean.apply_batch(events)
    noisy = FleetModel()
    noisy.load_snapshot(snapshot(0))
    for i, e in enumerate(events):
        noisy.apply(e)
        for r in resend:
            if r <= i:
                noisy.apply(events[r])  # an old frame again
    assert {u: vars(r) for u, r in noisy.rows.items()} == {
        u: vars(r) for u, r in clean.rows.items()
    }


def test_loops_sit_on_their_group_with_schedule_next_fire_and_runs():
    m = FleetModel()
    m.load_snapshot(snapshot(0, agent("1", "nightly/r82c9s/review", status="working")))
    m.set_loops(
        [
            {
                "uuid": "L1",
                "name": "nightly",
                "status": "active",
                "cron": "0 9 * * 1-5",
                "tz": "Europe/Paris",
                "next_fire_at": "2026-12-01T08:00:00Z",
                "running": 1,
                "pending": 0,
                "last_run": {"run_id": "r82c9s", "status": "ok"},
            },
            {
                "uuid": "L2",
                "name": "weekly",
                "status": "paused",
                "cron": "0 0 * * 0",
                "tz": "UTC",
                "next_fire_at": None,
                "running": 0,
                "pending": 2,
                "last_run": None,
            },
            {"uuid": "L3", "name": "gone", "status": "ended", "cron": "* * * * *", "tz": "UTC"},
        ]
    )
    assert [(g.name, g.loop and g.loop["uuid"]) for g in m.groups()] == [
        ("nightly", "L1"),
        ("weekly", "L2"),
    ]
    f = m.frame()
    info = f["groups"][0]["loop"]
    assert (info["schedule"], info["tz"], info["running"], info["pending"]) == (
        "0 9 * * 1-5",
        "Europe/Paris",
        1,
        0,
    )
    assert info["last_run_status"] == "ok" and info["next_fire"] == local_time(
        "2026-12-01T08:00:00Z"
    )
    assert f["groups"][1]["agents"] == [] and f["groups"][1]["loop"]["status"] == "paused"
    text = format_frame(f)
    assert (
        f"nightly/ (1 working)  loop 0 9 * * 1-5 Europe/Paris · next {info['next_fire']}"
        " · 1 running, 0 pending · last ok"
    ) in text
    assert "weekly/ (no agents)  loop 0 0 * * 0 UTC · PAUSED · 0 running, 2 pending" in text
    # a status filter shows loops through their agents only; naming a loop shows it
    assert [g.name for g in m.groups(Filter.parse("working"))] == ["nightly"]
    assert [g.name for g in m.groups(Filter.parse("weekly"))] == ["weekly"]


def test_a_blocked_start_follows_its_events_and_shows_in_the_frame():
    """``agent.blocked`` sets what a starting agent's dialog asks; ``agent.unblocked``,
    ``agent.dialog_answered`` or leaving ``starting`` clear it."""
    why = "Claude Code asks whether to trust /w — answer it with `orcr agent attach w/a`"
    m = FleetModel()
    m.load_snapshot(
        snapshot(
            0,
            agent("a", "w/a", status="starting", turn=0, blocked=why),
            agent("b", "w/b", status="idle", blocked="stale"),  # only a starting row is
        )
    )
    assert (m.rows["a"].blocked, m.rows["b"].blocked) == (why, None)
    assert m.header()["blocked"] == 1
    text = format_frame(m.frame())
    assert "blocked 1" in text.splitlines()[0]
    line = next(ln for ln in text.splitlines() if ln.startswith("w/a"))
    assert "blocked" in line and why in line
    m.apply(ev(1, "agent.unblocked", "a", path="w/a"))
    assert m.rows["a"].blocked is None and m.header()["blocked"] == 0
    m.apply(ev(2, "agent.blocked", "a", path="w/a", dialog="api_key", reason="key?"))
    assert m.rows["a"].blocked == "key?"
    assert m.frame()["groups"][0]["agents"][0]["blocked"] == "key?"
    m.apply(ev(3, "agent.dialog_answered", "a", path="w/a", dialog="trust"))
    assert m.rows["a"].blocked is None
    m.apply(ev(4, "agent.blocked", "a", path="w/a", dialog="trust", reason="again"))
    m.apply(status(5, "a", "w/a", "starting", "ended", exit_reason="canceled"))
    assert m.rows["a"].blocked is None


def test_parked_follows_moves_and_shows_in_the_flag_column_header_and_filter():
    """A parked agent (its pane in the parking area) is flagged ``parked``: from the
    snapshot, then set and cleared by ``pane.moved`` events and by leaving idle/working."""
    m = FleetModel()
    m.load_snapshot(
        snapshot(
            0,
            agent("a", "demo/a", status="idle", parked=True),
            agent("b", "demo/b", status="idle"),
        )
    )
    assert m.rows["a"].parked and not m.rows["b"].parked
    assert m.header()["parked"] == 1
    frame = format_frame(m.frame(now=T0 + 10))
    line_a = next(ln for ln in frame.splitlines() if ln.startswith("demo/a"))
    assert "parked" in line_a and "parked 1" in frame.splitlines()[0]
    assert [r.path for g in m.groups(Filter.parse("parked")) for r in g.rows] == ["demo/a"]
    m.apply_batch(
        [
            ev(1, "pane.move_requested", "b", path="demo/b", pane_id="%2", to="parking"),
            ev(2, "pane.moved", "b", path="demo/b", pane_id="%9", to="parking", parked=True),
            ev(
                3, "pane.moved", "a", path="demo/a", pane_id="%1", to="workspace demo", parked=False
            ),
        ]
    )
    assert m.rows["b"].parked and m.rows["b"].pane_id == "%9" and not m.rows["a"].parked
    rows = {r["uuid"]: r for g in m.frame(now=T0 + 10)["groups"] for r in g["agents"]}
    assert rows["b"]["parked"] is True and rows["a"]["parked"] is False
    m.apply(status(4, "b", "demo/b", "idle", "ended", exit_reason="gc"))
    assert not m.rows["b"].parked and m.header()["parked"] == 0  # no pane: not parked
