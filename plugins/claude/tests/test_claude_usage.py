"""Usage per turn from Claude Code transcripts (issue 25)."""

import json
from pathlib import Path

import pytest
from orcr_claude.turns import ClaudeTurns

from orcr_core.contracts import Usage
from orcr_core.kit.testing import transcript_fixtures

FIXTURES = Path(__file__).parent / "fixtures"


def turns_of(records):
    t = ClaudeTurns(settle=0)
    for r in records:
        t.feed(r)
    return t.state(1e9).turns


def read(name):
    lines = (FIXTURES / name).read_text().splitlines()
    return turns_of(json.loads(x) for x in lines if x.strip())


def msg(mid, usage, model="m-1", text="ok", sidechain=False):
    return {
        "type": "assistant",
        "isSidechain": sidechain,
        "message": {
            "id": mid,
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "usage": usage,
        },
    }


def prompt(text):
    return {"type": "user", "message": {"role": "user", "content": text}}


U = {
    "input_tokens": 5,
    "output_tokens": 7,
    "cache_read_input_tokens": 100,
    "cache_creation_input_tokens": 20,
}


def test_a_message_repeated_on_several_lines_counts_once_and_messages_sum():
    turns = turns_of(
        [prompt("hi"), msg("a", U, text="one"), msg("a", U, text="two"), msg("b", U, "m-2")]
    )
    assert turns[0].usage == Usage(10, 14, 200, 40, "m-2")


def test_each_turn_has_its_own_usage_and_a_turn_without_any_has_none():
    turns = turns_of([prompt("a"), msg("a", U), prompt("b"), msg("b", None)])
    assert turns[0].usage == Usage(5, 7, 100, 20, "m-1") and turns[1].usage is None


def test_inline_subagent_lines_count_toward_the_turn():
    turns = turns_of([prompt("a"), msg("s", U, "sub", sidechain=True), msg("a", U)])
    assert turns[0].usage == Usage(10, 14, 200, 40, "m-1")  # the model is the main chain's


def test_fixtures_two_turns_and_a_background_agent_total():
    assert [t.usage.total for t in read("orcr-2.1.233-hook-two-turns.jsonl")] == [30, 15]
    # 3 main-chain messages of 100+10 and the notification's <subagent_tokens>110
    (turn,) = read("orcr-2.1.332-background-agent.jsonl")
    assert turn.usage == Usage(410, 30, 0, 0, "claude-opus-5-5")


def test_an_api_error_turn_keeps_a_real_model_name():
    turns = read("real-2.1.332-api-errors.jsonl")
    assert turns[2].status == "errored" and turns[2].usage.model != "<synthetic>"


#: (turns, their summed tokens): the sum over each distinct message's usage in the file
CORPUS_USAGE = {
    "claude-1.0.98-init.jsonl": (1, 116963),  # inline sidechain messages included
    "claude-2.1.233-print-hook.jsonl": (1, 67698),
    "claude-2.1.38-interrupted-short.jsonl": (1, 25366),
    "claude-2.1.38-tool-heavy.jsonl": (2, 106193),
}


@pytest.mark.conformance
@pytest.mark.parametrize("name", sorted(CORPUS_USAGE))
def test_corpus_turns_sum_to_every_message_counted_once(name):
    path = transcript_fixtures("claude") / name
    turns = turns_of(json.loads(x) for x in path.read_text().splitlines() if x.strip())
    assert (len(turns), sum(t.usage.total for t in turns)) == CORPUS_USAGE[name]
