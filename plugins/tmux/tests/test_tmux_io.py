"""send_prompt, send_keys and read against real programs in real tmux panes."""

from __future__ import annotations

import shutil

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")

TEXT = "hello world $HOME ; \"dq\" 'sq' `tick` #{pane_id} x\\; é ✓ \t tab"


def _ready(h, pane, marker="ready"):
    h.wait_for(lambda: marker in h.driver.read(pane), what=f"{marker!r} on screen")


def test_send_prompt_delivers_text_exactly_once_then_enter(h, sandbox):
    out = sandbox.root / "lines.jsonl"
    pane = h.start_script("print('ready', flush=True)\n" + h.LINE_READER, str(out))
    _ready(h, pane)
    h.driver.send_prompt(pane, TEXT)
    h.wait_for(lambda: h.read_json_lines(out), what="the line to arrive")
    h.driver.send_prompt(pane, "second")
    h.wait_for(lambda: len(h.read_json_lines(out)) >= 2, what="the second line")
    assert h.read_json_lines(out) == [TEXT + "\n", "second\n"]


def _chunks(h, path):
    return [(c["t"], bytes.fromhex(c["hex"])) for c in h.read_json_lines(path)]


def test_multiline_prompt_is_one_bracketed_paste_and_enter_comes_later(h, sandbox):
    out = sandbox.root / "raw.jsonl"
    pane = h.start_script(h.RAW_RECORDER, str(out))
    _ready(h, pane)
    text = "first line\nsecond $HOME line\n\nlast é"
    h.driver.send_prompt(pane, text)
    h.wait_for(lambda: b"".join(d for _, d in _chunks(h, out)).endswith(b"\r"), what="Enter")
    chunks = _chunks(h, out)
    received = b"".join(d for _, d in chunks)
    # One paste, newlines inside the bracket (a TUI does not submit on them), then Enter.
    paste = b"\x1b[200~" + text.replace("\n", "\r").encode() + b"\x1b[201~"
    assert received == paste + b"\r"
    paste_end = max(t for t, d in chunks if b"\x1b[201~" in d)
    enter_at = chunks[-1][0]
    assert chunks[-1][1] == b"\r"
    assert enter_at - paste_end >= 0.15  # prompt_delay is 0.3; slack for a loaded machine


def test_send_prompt_strips_paste_end_markers(h, sandbox):
    out = sandbox.root / "raw.jsonl"
    pane = h.start_script(h.RAW_RECORDER, str(out))
    _ready(h, pane)
    h.driver.send_prompt(pane, "a\x1b[201~b")
    h.wait_for(lambda: b"".join(d for _, d in _chunks(h, out)).endswith(b"\r"), what="Enter")
    assert b"".join(d for _, d in _chunks(h, out)) == b"\x1b[200~ab\x1b[201~\r"


def test_send_keys_maps_logical_names(h, sandbox):
    out = sandbox.root / "raw.jsonl"
    pane = h.start_script(h.RAW_RECORDER, str(out))
    _ready(h, pane)
    keys = ["escape", "ctrl+c", "up", "tab", "shift+tab", "x", "-", ";", "backspace", "enter"]
    h.driver.send_keys(pane, keys)
    h.wait_for(lambda: b"".join(d for _, d in _chunks(h, out)).endswith(b"\r"), what="the keys")
    received = b"".join(d for _, d in _chunks(h, out))
    assert received == b"\x1b\x03\x1b[A\t\x1b[Zx-;\x7f\r"


def test_read_shows_the_screen(h):
    pane = h.start_script("import time\nprint('marker: $HOME é', flush=True)\ntime.sleep(60)")
    screen = h.wait_for(
        lambda: (s := h.driver.read(pane)) and "marker" in s and s, what="the marker"
    )
    assert "marker: $HOME é" in screen.splitlines()[0]
