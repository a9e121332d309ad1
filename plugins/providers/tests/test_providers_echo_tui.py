"""The echo agent run for real on a PTY: keys in, screen and transcript out."""

from __future__ import annotations

import os
import time

from orcr_providers.echo_reader import EchoTranscriptReader


def _types(agent) -> list[str]:
    return [r["type"] for r in agent.records()]


def test_prompt_is_answered_in_transcript_and_on_screen(echo_pty):
    agent = echo_pty()
    assert agent.records()[0]["type"] == "session"
    assert "idle" in agent.text().splitlines()[0]
    agent.write(b"hello world\r")
    agent.wait(lambda: "turn_end" in _types(agent), what="turn_end")
    session, prompt, answer, end = agent.records()
    assert session["version"] == "0.1.0" and session["pid"] == agent.proc.pid
    assert prompt == {**prompt, "type": "prompt", "turn": 1, "text": "hello world"}
    assert answer == {**answer, "type": "answer", "turn": 1, "text": "hello world"}
    assert end == {**end, "type": "turn_end", "turn": 1, "status": "completed"}
    agent.wait_screen("echo: hello world")
    lines = agent.text().splitlines()
    assert "you: hello world" in lines
    assert lines[-1] == ">"  # the composer was emptied
    # bracketed paste was switched on for the terminal
    assert b"\x1b[?2004h" in agent.raw


def test_sleep_shows_working_then_idle(echo_pty):
    agent = echo_pty()
    reader = EchoTranscriptReader(agent.transcript_path)
    started = time.monotonic()
    agent.write(b"[sleep 0.5] done later\r")
    agent.wait(lambda: agent.prompts(), what="the prompt line")
    assert reader.poll().state == "working"
    agent.wait_screen("working (turn 1)")
    agent.wait(lambda: reader.poll().state == "idle", what="idle")
    assert time.monotonic() - started >= 0.5
    state = reader.poll()
    assert state.final_text == "done later"
    assert [t.status for t in state.turns] == ["completed"]
    agent.wait_screen("echo: done later")
    assert "idle" in agent.text().splitlines()[0]


def test_fail_ends_the_turn_with_an_error(echo_pty):
    agent = echo_pty()
    agent.write(b"[fail] boom\r")
    agent.wait(lambda: "turn_end" in _types(agent), what="turn_end")
    end = agent.records()[-1]
    assert end["status"] == "errored" and end["error"] == "boom"
    assert "answer" not in _types(agent)
    state = EchoTranscriptReader(agent.transcript_path).poll()
    assert state.state == "idle"
    assert state.turns[0].status == "errored" and state.turns[0].final_text is None
    agent.wait_screen("error: boom")


def test_bracketed_paste_is_one_prompt_with_its_newlines(echo_pty):
    agent = echo_pty()
    # the paste arrives in pieces, cut inside both markers and inside a CRLF
    for piece in (b"\x1b[20", b"0~line one\r", b"\nline two\rline three\x1b[2", b"01~"):
        agent.write(piece)
        time.sleep(0.05)
    agent.wait_screen("> line one↵line two↵line three")
    assert agent.prompts() == []  # newlines inside a paste do not submit
    agent.write(b"\r")
    agent.wait(lambda: "turn_end" in _types(agent), what="turn_end")
    assert [p["text"] for p in agent.prompts()] == ["line one\nline two\nline three"]
    assert agent.records()[2]["text"] == "line one\nline two\nline three"


def test_text_then_enter_in_separate_writes_submits_exactly_once(echo_pty):
    agent = echo_pty()
    agent.write(b"two calls")
    agent.wait_screen("> two calls")
    time.sleep(0.3)
    agent.write(b"\r")
    agent.wait(lambda: "turn_end" in _types(agent), what="turn_end")
    agent.write(b"\r")  # Enter on the now empty composer submits nothing
    agent.write(b"ping\r")
    agent.wait(lambda: len(agent.prompts()) == 2, what="the second prompt")
    assert [p["text"] for p in agent.prompts()] == ["two calls", "ping"]
    assert [p["turn"] for p in agent.prompts()] == [1, 2]


def test_backspace_edits_the_composer(echo_pty):
    agent = echo_pty()
    agent.write(b"helx\x7flo\r")
    agent.wait(lambda: agent.prompts(), what="the prompt")
    assert agent.prompts()[0]["text"] == "hello"


def test_keystrokes_during_a_working_turn_are_kept(echo_pty):
    agent = echo_pty()
    reader = EchoTranscriptReader(agent.transcript_path)
    agent.write(b"[sleep 1] slow\r")
    agent.wait(lambda: reader.poll().state == "working", what="working")
    agent.write(b"next one")
    agent.wait_screen("> next one")
    assert reader.poll().state == "working"
    agent.wait(lambda: reader.poll().state == "idle", what="idle")
    agent.wait_screen("echo: slow")
    assert agent.text().splitlines()[-1] == "> next one"
    agent.write(b"\r")
    agent.wait(lambda: len(reader.poll().turns) == 2 and reader.poll().state == "idle")
    assert reader.poll().final_text == "next one"


def test_enter_while_working_queues_the_prompt(echo_pty):
    agent = echo_pty()
    reader = EchoTranscriptReader(agent.transcript_path)
    agent.write(b"[sleep 0.4] first\r")
    agent.wait(lambda: reader.poll().state == "working", what="working")
    agent.write(b"second\r")
    agent.wait(lambda: len(reader.poll().turns) == 2 and reader.poll().state == "idle")
    assert [t.final_text for t in reader.poll().turns] == ["first", "second"]


def test_ctrl_d_exits_zero(echo_pty):
    agent = echo_pty()
    agent.write(b"\x04")
    assert agent.exit_code() == 0
    assert agent.records()[-1]["type"] == "exit"
    assert agent.records()[-1]["reason"] == "ctrl-d"
    assert b"\x1b[?2004l" in agent.raw  # paste mode switched off again


def test_ctrl_c_during_a_turn_exits_zero_and_closes_the_turn(echo_pty):
    agent = echo_pty()
    reader = EchoTranscriptReader(agent.transcript_path)
    agent.write(b"[sleep 5] never\r")
    agent.wait(lambda: reader.poll().state == "working", what="working")
    agent.write(b"\x03")
    assert agent.exit_code() == 0
    state = reader.poll()
    assert state.state == "idle"
    assert [t.status for t in state.turns] == ["interrupted"]


def test_exit_directive_answers_then_exits(echo_pty):
    agent = echo_pty()
    agent.write(b"[exit] bye\r")
    assert agent.exit_code() == 0
    state = EchoTranscriptReader(agent.transcript_path).poll()
    assert state.final_text == "bye" and state.state == "idle"
    assert agent.records()[-1] == {**agent.records()[-1], "type": "exit", "reason": "exit"}


def test_sh_directive_runs_in_the_agents_directory_and_answers_with_its_output(echo_pty):
    """``[sh] CMD`` lines (pasted with the rest of the prompt) run in the agent's
    directory, in order, before the answer, which starts with their output; a command
    that failed adds its exit status. Planted: the commands not run (only parsed) ->
    fails; run in another directory -> made.txt is not in the agent's, fails."""
    agent = echo_pty()
    prompt = b"[sh] echo made > made.txt && echo wrote it\n[sh] cat made.txt; exit 3\nthe rest"
    agent.write(b"\x1b[200~" + prompt + b"\x1b[201~\r")
    agent.wait(lambda: "turn_end" in _types(agent), what="turn_end")
    made = os.path.join(agent.spec.cwd, "made.txt")
    assert open(made).read() == "made\n"
    state = EchoTranscriptReader(agent.transcript_path).poll()
    assert state.final_text == "wrote it\nmade\n[sh: exit 3]\nthe rest"
