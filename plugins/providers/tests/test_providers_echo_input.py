"""The echo agent's input parser, fed in every possible split."""

from __future__ import annotations

from orcr_providers.echo_agent import parse_prompt
from orcr_providers.echo_input import InputParser

SAMPLE = (
    "héllo\x1b[A\x7f\r"  # UTF-8 text, an arrow key (dropped), backspace, Enter
    "\x1b[200~a\r\nb\rc\x1b[201~\n"  # a paste with CRLF and CR newlines, then LF
    "\x1bx\x1bOP\x04"  # Alt+x, F1, Ctrl-D
).encode()


def _merge(events):
    out = []
    for e in events:
        if e[0] == "text" and out and out[-1][0] == "text":
            out[-1] = ("text", out[-1][1] + e[1])
        else:
            out.append(e)
    return out


def test_whole_feed():
    assert _merge(InputParser().feed(SAMPLE)) == [
        ("text", "héllo"),
        ("backspace",),
        ("submit",),
        ("text", "a\nb\nc"),
        ("submit",),
        ("text", "x"),
        ("exit", "ctrl-d"),
    ]


def test_byte_by_byte_feed_gives_the_same_events():
    parser = InputParser()
    events = []
    for i in range(len(SAMPLE)):
        events += parser.feed(SAMPLE[i : i + 1])
    assert _merge(events) == _merge(InputParser().feed(SAMPLE))


def test_every_two_way_split_gives_the_same_events():
    whole = _merge(InputParser().feed(SAMPLE))
    for cut in range(len(SAMPLE) + 1):
        parser = InputParser()
        events = parser.feed(SAMPLE[:cut]) + parser.feed(SAMPLE[cut:])
        assert _merge(events) == whole, cut


def test_directives():
    assert parse_prompt("[sleep 1.5] hi there ").sleep == 1.5
    assert parse_prompt("[sleep .25]x").text == "x"
    plan = parse_prompt(" [fail] [exit] bad")
    assert (plan.fail, plan.exit, plan.text) == (True, True, "bad")
    plan = parse_prompt("say [fail] later")
    assert not plan.fail and plan.text == "say [fail] later"
