"""Gemini CLI session records -> turns (orcr_gemini.turns), on records written by hand
and on the session file the real Gemini CLI 0.61.0 wrote (fixtures/README.md)."""

import time
from pathlib import Path

import pytest
from orcr_gemini import GeminiProvider, summarize
from orcr_gemini.turns import GeminiTurns

from orcr_core.contracts import Usage
from orcr_core.kit.jsonl_tail import JsonlTurnReader

FIXTURES = Path(__file__).parent / "fixtures"
META = {"sessionId": "11111111-2222-4333-8444-555555555555", "projectHash": "ab", "kind": "main",
        "startTime": "2026-12-01T23:43:09.225Z", "lastUpdated": "2026-12-01T23:43:09.225Z"}  # fmt: skip
CONTEXT = {"$set": {"messages": [{"id": "c0", "type": "user",
                                  "content": [{"text": "<session_context>\nThis is the Gemini CLI."}]}]}}  # fmt: skip
TOKENS = {"input": 100, "output": 10, "cached": 40, "thoughts": 5, "tool": 0, "total": 115}
END = {"orcr": "turn_end", "session_id": META["sessionId"]}


def user(i, text):
    return {"id": f"u{i}", "type": "user", "content": [{"text": text}]}


def gemini(i, text, **more):
    return {"id": f"g{i}", "type": "gemini", "content": text, "thoughts": [], "tokens": TOKENS,
            "model": "gemini-3.1-pro-preview", **more}  # fmt: skip


def reader(path, clock, hooked=True, settle=3.0):
    return JsonlTurnReader(
        path, lambda: GeminiTurns(settle=settle, hooked=hooked, version="0.61.0"), clock=clock,
        wall=time.time,
    )  # fmt: skip


def test_a_turn_ends_at_orcrs_hook_line_with_its_answer(session, clock):
    r = reader(session.path, clock)
    session.add(META, CONTEXT)
    assert r.poll().state == "idle" and r.poll().turns == ()  # started, no prompt yet
    session.add(user(1, "hello"), {"$set": {"lastUpdated": "x"}}, gemini(1, "Hi there"))
    s = r.poll()
    assert s.state == "working" and [t.status for t in s.turns] == ["open"]
    clock.advance(60)  # an answer alone never ends a hooked turn: a tool call may follow
    assert r.poll().state == "working"
    session.add(END)
    s = r.poll()
    assert s.state == "idle" and s.version == "0.61.0"
    assert [(t.status, t.final_text) for t in s.turns] == [("completed", "Hi there")]


def test_text_then_a_tool_call_is_no_answer_until_the_tool_ran(session, clock):
    """The message is written with its text first and rewritten (same id) with its
    toolCalls once they ran: the answer is the message after the tool result."""
    r = reader(session.path, clock)
    call = {"id": "c1", "name": "run_shell_command", "args": {"command": "touch x"},
            "status": "success", "result": []}  # fmt: skip
    session.add(META, user(1, "make a file"), gemini(1, "I will make it."))
    assert r.poll().state == "working"
    session.add(gemini(1, "I will make it.", toolCalls=[call]))
    session.add({"id": "u2", "type": "user",
                 "content": [{"functionResponse": {"id": "c1", "name": "run_shell_command"}}]})  # fmt: skip
    s = r.poll()
    assert s.state == "working" and len(s.turns) == 1  # a tool result is no prompt
    session.add(gemini(2, "made it"), END)
    s = r.poll()
    assert [(t.status, t.final_text) for t in s.turns] == [("completed", "made it")]
    # two messages, each once (the rewrite replaced the first)
    assert s.turns[0].usage == Usage(120, 30, 80, 0, "gemini-3.1-pro-preview")


def test_cancelled_and_errored_turns(session, clock):
    r = reader(session.path, clock)
    session.add(META, user(1, "a long one"), {"id": "i1", "type": "info",
                                              "content": "Request cancelled."})  # fmt: skip
    session.add(END)  # Gemini CLI runs AfterAgent after a cancel too: no second end
    session.add(user(2, "broken"), {"id": "e1", "type": "error",
                                    "content": "[API Error: fake server error]"})  # fmt: skip
    session.add(user(3, "again"), gemini(3, "fine"), END)
    s = r.poll()
    assert [(t.status, t.final_text, t.error) for t in s.turns] == [
        ("interrupted", None, None),
        ("errored", None, "[API Error: fake server error]"),
        ("completed", "fine", None),
    ]
    assert s.state == "idle"


def test_without_the_hook_an_answer_ends_the_turn_after_the_quiet_period(session, clock):
    r = reader(session.path, clock, hooked=False, settle=3.0)
    session.add(META, user(1, "hello"), gemini(1, "Hi there"))
    assert r.poll().state == "working"
    clock.advance(3.1)
    s = r.poll()
    assert s.state == "idle" and s.turns[0].final_text == "Hi there"
    session.add(user(2, "make"), {"id": "g2", "type": "gemini", "content": ""})
    clock.advance(10)
    assert r.poll().state == "working"  # no text: a tool call is coming or running


def test_a_half_written_line_waits(session, clock):
    r = reader(session.path, clock)
    session.add(META, user(1, "hello"), gemini(1, "Hi"))
    session.raw(b'{"orcr": "turn_')
    assert r.poll().state == "working"
    session.raw(b'end"}\n')
    assert r.poll().state == "idle"


def test_the_real_session_file():
    """Gemini CLI 0.61.0 against the fake Gemini API with orcr's hook: a text answer, a
    text + shell call answered after the tool ran, a 500 retried and then cancelled with
    Esc (its history rewritten by a ``$set messages``), and a held turn still open."""
    got = summarize(str(FIXTURES / "real-0.61.0-turns.jsonl"))
    assert got["state"] == "working"
    assert [(t["status"], t["final_text"]) for t in got["turns"]] == [
        ("completed", "Hi there from fake gemini"),
        ("completed", "made it"),
        ("interrupted", None),
        ("open", None),
    ]


@pytest.mark.parametrize("cut", range(1, 40))
def test_the_real_file_fed_in_two_pieces_reads_the_same(tmp_path, cut):
    data = (FIXTURES / "real-0.61.0-turns.jsonl").read_bytes()
    at = len(data) * cut // 40
    path = tmp_path / "s.jsonl"
    path.write_bytes(data[:at])
    r = GeminiProvider().open_reader(str(path), settle=0.0)
    r.poll()
    with open(path, "ab") as fh:
        fh.write(data[at:])
    whole = GeminiProvider().open_reader(str(FIXTURES / "real-0.61.0-turns.jsonl"), settle=0.0)
    assert r.poll() == whole.poll()
