"""Usage per turn from Codex rollouts: cumulative token_count -> per turn (issue 25)."""

import json
from pathlib import Path

import pytest
from orcr_codex.turns import CodexTurns

from orcr_core.contracts import Usage
from orcr_core.kit.testing import transcript_fixtures

FIXTURES = Path(__file__).parent / "fixtures"


def ev(kind, **payload):
    return {"type": "event_msg", "payload": {"type": kind, **payload}}


def count(inp, cached, out, last=None):
    total = {"input_tokens": inp, "cached_input_tokens": cached, "output_tokens": out}
    return ev("token_count", info={"total_token_usage": total, "last_token_usage": last or total})


def turns_of(records):
    t = CodexTurns(settle=0)
    t.feed({"type": "session_meta", "payload": {"id": "th", "cli_version": "0.171.0"}})
    t.feed({"type": "turn_context", "payload": {"model": "gpt-x"}})
    for r in records:
        t.feed(r)
    return t.state(1e9).turns


def test_cumulative_counts_become_per_turn_amounts():
    turns = turns_of(
        [
            ev("task_started", turn_id="1"),
            count(100, 40, 10),
            count(250, 140, 30),
            ev("task_complete", turn_id="1", last_agent_message="a"),
            ev("task_started", turn_id="2"),
            ev("token_count", info=None),  # rate limits only: skipped
            count(400, 200, 35),
            ev("task_complete", turn_id="2", last_agent_message="b"),
        ]
    )
    assert [t.usage for t in turns] == [
        Usage(110, 30, 140, 0, "gpt-x"),
        Usage(90, 5, 60, 0, "gpt-x"),
    ]


def test_a_resumed_rollout_starts_from_its_first_request():
    last = {"input_tokens": 50, "cached_input_tokens": 0, "output_tokens": 5}
    turns = turns_of(
        [
            ev("task_started", turn_id="9"),
            count(1000, 0, 100, last=last),  # the thread's earlier turns are in the total
            ev("task_complete", turn_id="9", last_agent_message="x"),
        ]
    )
    assert turns[0].usage == Usage(50, 5, 0, 0, "gpt-x")


def test_real_fixture_sums_equal_the_last_cumulative_total():
    t = CodexTurns(settle=0)
    for line in (FIXTURES / "real-0.171.0-answer-shapes.jsonl").read_text().splitlines():
        t.feed(json.loads(line))
    turns = t.state(1e9).turns
    assert sum(x.usage.input for x in turns) == t._total[0]
    assert sum(x.usage.output for x in turns) == t._total[1]
    assert {x.usage.model for x in turns} == {"acme-model-7"}


def test_a_rollout_without_counts_has_no_usage():
    assert [
        t.usage
        for t in turns_of([ev("task_started", turn_id="1"), ev("task_complete", turn_id="1")])
    ] == [None]


#: (turns, summed tokens) = the rollout's last cumulative total_token_usage
CORPUS_USAGE = {
    "codex-0.104.0-alpha.1-desktop-2turns.jsonl": (2, 1292170),
    "codex-0.128.0-exec-1turn.jsonl": (1, 14552),
    "codex-0.155.1-exec-paginated.jsonl": (1, 12792),
}


@pytest.mark.conformance
@pytest.mark.parametrize("name", sorted(CORPUS_USAGE))
def test_corpus_turns_sum_to_the_last_cumulative_total(name):
    t = CodexTurns(settle=0)
    for line in (transcript_fixtures("codex") / name).read_text().splitlines():
        t.feed(json.loads(line))
    turns = t.state(1e9).turns
    assert (len(turns), sum(x.usage.total for x in turns)) == CORPUS_USAGE[name]
