"""pi session records -> turns: on the real 0.73.1 and 1.6.0 sessions (fixtures,
captured by driving pi against tests/fake_models: tests/real_cli/test_pi_session_format.py
with ORCR_PI_CAPTURE) and on hand-written records."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from orcr_core.contracts import Turn, Usage
from orcr_core.kit.testing import feed_in_chunks

orcr_pi = pytest.importorskip("orcr_pi", reason="orcr-pi not installed: pip install ./plugins/pi")
PiProvider = orcr_pi.PiProvider
FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: the pi releases whose sessions are fixtures (the last one the real_cli tier's)
RELEASES = pytest.mark.parametrize("release", ["0.73.1", "1.6.0"])


@RELEASES
def test_real_session_turns_tool_call_error_and_interrupt(release):
    """hello; a bash tool call then its answer; a 400 pi does not retry; Esc mid-answer.
    Planted: ``aborted`` read as completed -> fails on both releases."""
    s = PiProvider().summarize(str(FIXTURES / f"real-{release}-turns.jsonl"))
    assert s["state"] == "idle"
    assert [(t["status"], t["final_text"]) for t in s["turns"]] == [
        ("completed", "Hi there from fake"),
        ("completed", "ran it"),
        ("errored", None),
        ("interrupted", None),
    ]
    assert s["turns"][2]["error"].startswith("400 ")
    assert "invalid_request_error" in s["turns"][2]["error"]


@RELEASES
def test_real_session_retries_thinking_and_a_cut_answer(release):
    """A 500 retried by pi (an error message, then the answer with no new prompt: one
    turn), thinking before two text blocks, an answer cut at the output limit, a stream
    failing halfway retried by pi (1.6.0: the failed attempt's ``context_edit`` too)."""
    s = PiProvider().summarize(str(FIXTURES / f"real-{release}-retries.jsonl"))
    assert [(t["status"], t["final_text"]) for t in s["turns"]] == [
        ("completed", "after the retry"),
        ("completed", "thought answer\nsecond block"),
        ("completed", "cut off ans"),
        ("completed", "done"),
    ]


@RELEASES
def test_the_same_whether_the_file_arrives_whole_or_in_pieces(release):
    data = (FIXTURES / f"real-{release}-turns.jsonl").read_bytes()
    whole = PiProvider().summarize(str(FIXTURES / f"real-{release}-turns.jsonl"))
    cuts = [1, 57, len(data) // 3, len(data) // 2 + 5, len(data) - 2]
    assert feed_in_chunks(PiProvider(), data, cuts)["turns"] == whole["turns"]


def header():
    return {"type": "session", "version": 3, "id": "s-1", "timestamp": "t", "cwd": "/w"}


def user(text):
    return {"type": "message", "id": "u", "message": {"role": "user", "content": text}}


def assistant(stop, text=None, error=None, usage=None, tool=False):
    content = [{"type": "text", "text": text}] if text else []
    if tool:
        content.append({"type": "toolCall", "id": "c1", "name": "bash", "arguments": {}})
    m = {"role": "assistant", "content": content, "stopReason": stop, "model": "m1",
         "usage": usage or {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}  # fmt: skip
    if error:
        m["errorMessage"] = error
    return {"type": "message", "id": "a", "message": m}


def reader(session, clock):
    return PiProvider().open_reader(str(session.path), clock=clock, wall=time.time)


def test_a_tool_call_keeps_the_turn_working_until_the_answer(session, clock):
    r = reader(session, clock)
    assert r.poll().state == "unknown"
    session.add(header(), user("list"), assistant("toolUse", tool=True))
    st = r.poll()
    assert (st.state, st.turns) == ("working", (Turn("open", usage=st.turns[0].usage),))
    session.add({"type": "message", "message": {"role": "toolResult", "toolCallId": "c1"}})
    assert r.poll().state == "working"
    session.add(assistant("stop", "listed"))
    st = r.poll()
    assert (st.state, st.turns[0].status, st.final_text) == ("idle", "completed", "listed")


def test_a_transient_error_waits_for_pis_retry(session, clock):
    """pi retries a 5xx after 2 s (then 4, 8): the error ends the turn only when the
    file stays quiet past pi's next delay; the retry's answer is the turn's."""
    r = reader(session, clock)
    session.add(header(), user("go"), assistant("error", error="500 internal server error"))
    assert r.poll().state == "working"
    clock.advance(4.9)  # 2 s (pi's first delay) + 3 s settle
    assert r.poll().state == "working"
    session.add(assistant("error", error="529 overloaded_error"))
    r.poll()
    clock.advance(5.5)  # second delay: 4 s + 3 s
    assert r.poll().state == "working"
    clock.advance(2)
    st = r.poll()
    assert (st.state, st.turns[0].status) == ("idle", "errored")
    assert "overloaded" in st.turns[0].error
    session.add(assistant("stop", "finally"))  # a retry after all (user's maxRetries)
    st = r.poll()
    assert (st.state, st.turns[0].status, st.final_text) == ("idle", "completed", "finally")


def test_an_error_pi_does_not_retry_ends_the_turn_at_once(session, clock):
    r = reader(session, clock)
    session.add(header(), user("go"), assistant("error", error='400 {"type":"error"}'))
    st = r.poll()
    assert (st.state, st.turns[0].status, st.turns[0].error) == (
        "idle", "errored", '400 {"type":"error"}'
    )  # fmt: skip


def test_past_pis_default_retries_the_error_is_final(session, clock):
    r = reader(session, clock)
    session.add(header(), user("go"), *[assistant("error", error="503") for _ in range(4)])
    assert r.poll().turns[0].status == "errored"


def test_usage_is_the_sum_of_the_turns_messages(session, clock):
    u1 = {"input": 100, "output": 10, "cacheRead": 50, "cacheWrite": 5, "totalTokens": 165}
    u2 = {"input": 20, "output": 7, "cacheRead": 150, "cacheWrite": 0}
    session.add(header(), user("go"), assistant("toolUse", usage=u1, tool=True),
                assistant("stop", "ok", usage=u2), user("two"), assistant("stop", "b"))  # fmt: skip
    st = reader(session, clock).poll()
    assert st.turns[0].usage == Usage(120, 17, 200, 5, "m1")
    assert st.turns[1].usage == Usage(0, 0, 0, 0, "m1")


def test_a_user_message_mid_turn_ends_the_open_turn_interrupted(session, clock):
    session.add(header(), user("one"), assistant("toolUse", tool=True), user("steer"))
    st = reader(session, clock).poll()
    assert [t.status for t in st.turns] == ["interrupted", "open"]


def test_records_that_carry_no_turn_are_ignored(session, clock):
    session.add(
        header(),
        {"type": "model_change", "provider": "p", "modelId": "m"},
        {"type": "thinking_level_change", "thinkingLevel": "off"},
        user("one"),
        {"type": "message", "message": {"role": "bashExecution", "command": "ls"}},
        {"type": "custom", "customType": "x", "data": {}},
        {"type": "something_new", "x": 1},
        assistant("stop", "a"),
        {"type": "compaction", "summary": "s", "firstKeptEntryId": "a", "tokensBefore": 5},
    )
    st = reader(session, clock).poll()
    assert (st.state, [t.status for t in st.turns], st.final_text) == ("idle", ["completed"], "a")


def test_a_retry_that_calls_a_tool_reopens_the_turn(session, clock):
    """After an ended-looking turn, an assistant message with no new prompt (pi's retry,
    or a retry after compaction) is that turn running again."""
    session.add(header(), user("go"), *[assistant("error", error="503") for _ in range(4)])
    r = reader(session, clock)
    assert r.poll().state == "idle"
    session.add(assistant("toolUse", tool=True))
    st = r.poll()
    assert (st.state, [t.status for t in st.turns]) == ("working", ["open"])


def test_usage_entries_count_in_the_turn(session, clock):
    """pi 1.x writes usage outside a message (``{"type":"usage","kind":"cache_warm"}``,
    its session-format.md) and counts it in the session's totals; so does orcr.
    Planted: usage entries ignored -> fails."""
    warm = {"type": "usage", "kind": "cache_warm", "provider": "p", "model": "m0",
            "usage": {"input": 0, "output": 0, "cacheRead": 500, "cacheWrite": 0}}  # fmt: skip
    u = {"input": 100, "output": 10, "cacheRead": 0, "cacheWrite": 0}
    session.add(header(), warm, user("go"), assistant("stop", "ok", usage=u), warm)
    st = reader(session, clock).poll()
    assert st.turns[0].usage == Usage(100, 10, 1000, 0, "m0")


def test_system_messages_and_context_edits_carry_no_turn(session, clock):
    """pi 1.x persists the prompt and tool loadout as ``role: "system"`` messages and
    context edits as ``context_edit`` entries."""
    system = {"type": "message", "message": {"role": "system", "content": "", "sections": {}}}
    edit = {"type": "context_edit", "targetId": "a", "replacement": None}
    session.add(header(), system, user("one"), system, assistant("stop", "a"), edit)
    st = reader(session, clock).poll()
    assert (st.state, [t.status for t in st.turns], st.final_text) == ("idle", ["completed"], "a")


@pytest.mark.parametrize(
    "error, retried",
    [
        ("Connection closed.", True),  # 1.6.0 (#12064), not 0.73.1
        ("read ECONNRESET", True),
        ("500 internal server error", True),
        ("request id req_4290012", False),  # a status code inside another token
        ('429 {"error":{"type":"insufficient_quota"}}', False),  # quota: never retried
        ('400 {"type":"error"}', False),
    ],
)
def test_which_errors_pi_retries(error, retried):
    """pi-ai's ``isRetryableAssistantError`` (1.6.0). Planted: a bare
    ``429|500|…|overloaded|rate limit`` pattern -> the first four cases fail."""
    assert orcr_pi.turns.retryable(error) is retried
