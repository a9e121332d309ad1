"""The echo transcript reader: incremental, cheap when nothing changed."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest
from orcr_providers import echo_reader
from orcr_providers.echo_reader import EchoTranscriptReader, summarize

PROMPTS = "hello\n[fail] boom\n[sleep 0.05] later\nmulti word answer\n[exit] bye\n"


@pytest.fixture(scope="module")
def real_transcript(tmp_path_factory) -> bytes:
    """A transcript written by the real agent (stdin not a tty)."""
    path = tmp_path_factory.mktemp("echo") / "echo.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "orcr_providers.echo_agent", "--transcript", str(path)],
        input=PROMPTS.encode(),
        capture_output=True,
        timeout=20,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().splitlines() == [
        "echo: hello",
        "error: boom",
        "echo: later",
        "echo: multi word answer",
        "echo: bye",
    ]
    return path.read_bytes()


def _whole(path, data: bytes):
    path.write_bytes(data)
    return EchoTranscriptReader(str(path)).poll()


def test_whole_read(tmp_path, real_transcript):
    state = _whole(tmp_path / "t.jsonl", real_transcript)
    assert state.state == "idle"
    assert state.version == "0.1.0"
    assert [(t.status, t.final_text) for t in state.turns] == [
        ("completed", "hello"),
        ("errored", None),
        ("completed", "later"),
        ("completed", "multi word answer"),
        ("completed", "bye"),
    ]
    assert state.final_text == "bye"
    assert [t.error for t in state.turns] == [None, "boom", None, None, None]


@pytest.mark.parametrize("seed", range(5))
def test_chunked_reads_match_whole_reads(tmp_path, real_transcript, seed):
    rng = random.Random(seed)
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"")
    reader = EchoTranscriptReader(str(path))
    pos = 0
    while pos < len(real_transcript):
        step = rng.randint(1, 60)
        chunk = real_transcript[pos : pos + step]
        with open(path, "ab") as f:
            f.write(chunk)
        pos += len(chunk)
        got = reader.poll()
        # a fresh reader over the complete lines so far must agree
        complete = real_transcript[: real_transcript.rfind(b"\n", 0, pos) + 1]
        assert got == _whole(tmp_path / "ref.jsonl", complete), (seed, pos)
    assert reader.poll() == _whole(tmp_path / "ref.jsonl", real_transcript)


def test_partial_last_line_waits_for_its_newline(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"type": "session", "version": "0.1.0"}\n')
    reader = EchoTranscriptReader(str(path))
    assert reader.poll().state == "idle"
    line = json.dumps({"type": "prompt", "turn": 1, "text": "x"})
    with open(path, "a") as f:
        f.write(line[:10])
    assert reader.poll().state == "idle"
    with open(path, "a") as f:
        f.write(line[10:])
    assert reader.poll().state == "idle"
    with open(path, "a") as f:
        f.write("\n")
    state = reader.poll()
    assert state.state == "working" and [t.status for t in state.turns] == ["open"]


def test_unchanged_file_costs_one_stat_and_no_read(tmp_path, real_transcript, monkeypatch):
    path = tmp_path / "t.jsonl"
    path.write_bytes(real_transcript)
    reader = EchoTranscriptReader(str(path))
    first = reader.poll()
    calls = {"stat": 0, "open": 0}
    real_stat = os.stat

    def counting_stat(*a, **k):
        calls["stat"] += 1
        return real_stat(*a, **k)

    def no_open(*a, **k):
        calls["open"] += 1
        return open(*a, **k)

    monkeypatch.setattr(echo_reader.os, "stat", counting_stat)
    monkeypatch.setattr(echo_reader, "open", no_open, raising=False)
    assert reader.poll() is first
    monkeypatch.undo()
    assert calls == {"stat": 1, "open": 0}


def test_states_before_and_between_turns(tmp_path):
    path = tmp_path / "t.jsonl"
    reader = EchoTranscriptReader(str(path))
    assert reader.poll().state == "unknown"  # no file yet
    path.write_bytes(b"")
    assert reader.poll().state == "unknown"
    lines = [
        {"type": "session", "version": "0.1.0"},
        {"type": "prompt", "turn": 1, "text": "a"},
        # the agent died mid-turn and was started again on the same transcript
        {"type": "session", "version": "0.1.1"},
        {"type": "prompt", "turn": 1, "text": "b"},
        {"type": "answer", "turn": 1, "text": "b"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    state = reader.poll()
    assert state.state == "working" and state.version == "0.1.1"
    assert [t.status for t in state.turns] == ["interrupted", "open"]
    assert state.final_text is None
    with open(path, "a") as f:
        f.write(json.dumps({"type": "turn_end", "turn": 1, "status": "completed"}) + "\n")
    state = reader.poll()
    assert state.state == "idle" and state.final_text == "b"


def test_replaced_file_is_read_from_the_start(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"type": "session", "version": "0.1.0"}\n{"type": "prompt", "turn": 1}\n')
    reader = EchoTranscriptReader(str(path))
    assert reader.poll().state == "working"
    path.write_text('{"type": "session", "version": "0.1.0"}\n')
    state = reader.poll()
    assert state.state == "idle" and state.turns == ()


def test_summarize(tmp_path, real_transcript):
    path = tmp_path / "t.jsonl"
    path.write_bytes(real_transcript)
    summary = summarize(str(path))
    assert summary["provider"] == "echo" and summary["version"] == "0.1.0"
    assert summary["state"] == "idle"
    assert summary["turns"][0] == {"status": "completed", "final_text": "hello", "error": None}
    assert summary["turns"][1] == {"status": "errored", "final_text": None, "error": "boom"}
