"""Subagent (Task/Agent tool) lines never end, start or answer the main turn.

Claude Code writes a subagent's conversation inline with ``isSidechain: true``
(1.0.x; ``fixtures/orcr-1.0.98-init-sidechain.jsonl``) or, since 2.1.x, into
``<root>/projects/<slug>/<sessionId>/subagents/agent-<id>.jsonl`` beside the
session's own file (``fixtures/claude-home``). Both carry their own assistant
answers with ``end_turn`` and ``stop_hook_summary`` lines (TRANSCRIPTS.md 1.1,
1.7). The shared corpus has none, so these fixtures are orcr's own, written from
the documented format.
"""

import os
import shutil
import time
from pathlib import Path

import pytest
from orcr_claude import ClaudeProvider, summarize

from orcr_core.contracts import LaunchSpec, SessionPointer
from orcr_core.kit.testing import FakeClock, feed_in_chunks

FIXTURES = Path(__file__).parent / "fixtures"
SESSION = "3c0ffee1-0000-4000-8000-0000000000b2"
PROJECT = Path("projects") / "-home-dev-shop"
SUBAGENT = PROJECT / SESSION / "subagents" / "agent-a7f3c9e1.jsonl"


@pytest.fixture
def home(tmp_path):
    """A copy of the fixture's Claude config root; the subagent file is the newest."""
    root = tmp_path / "claude-home"
    shutil.copytree(FIXTURES / "claude-home", root)
    day_ago = time.time() - 86400
    os.utime(root / PROJECT / f"{SESSION}.jsonl", (day_ago, day_ago))
    return root


def spec(root: Path) -> LaunchSpec:
    return LaunchSpec(
        uuid=SESSION,
        path="a/b",
        cwd="/home/dev/shop",
        data_dir="/tmp/x",
        options={"home": str(root)},
    )


def test_the_subagent_file_is_never_located_as_the_session(home):
    pointer = SessionPointer("orcr", "id", SESSION)
    found = ClaudeProvider().locate_transcript(pointer, spec(home))
    assert found == str(home / PROJECT / f"{SESSION}.jsonl")


def test_a_finished_subagent_does_not_end_the_main_turn(home):
    """The subagent's file ends on end_turn + stop_hook_summary; the session's
    own turn, waiting on the Task tool, stays open however long it is quiet."""
    clock = FakeClock()
    main = home / PROJECT / f"{SESSION}.jsonl"
    reader = ClaudeProvider().open_reader(str(main), clock=clock, wall=clock)
    reader.poll()
    clock.advance(3600)
    state = reader.poll()
    assert state.state == "working"
    assert [(t.status, t.final_text) for t in state.turns] == [("open", None)]


def test_a_subagent_file_read_alone_has_no_turn(home):
    """Every line is a sidechain line: no prompt, no answer, never idle."""
    result = summarize(str(home / SUBAGENT))
    assert result["turns"] == [] and result["state"] == "unknown"


def test_subagent_lines_spliced_into_the_session_file_change_nothing(home):
    """The same lines inline (the 1.0.x layout), whole or cut anywhere: still
    open; the main chain's own answer then ends the turn with its own text."""
    main = (home / PROJECT / f"{SESSION}.jsonl").read_bytes()
    side = (home / SUBAGENT).read_bytes()
    spliced = main + side
    provider = ClaudeProvider()
    expected = {
        "provider": "claude",
        "version": "2.1.139",
        "state": "working",
        "turns": [{"status": "open", "final_text": None, "error": None}],
    }
    assert feed_in_chunks(provider, spliced, [len(main) + 9, len(spliced) - 3]) == expected
    answer = (
        b'{"type":"user","isSidechain":false,"version":"2.1.139","message":{"role":"user",'
        b'"content":[{"type":"tool_result","tool_use_id":"toolu_D1","content":"fine"}]}}\n'
        b'{"type":"assistant","isSidechain":false,"version":"2.1.139","message":{"id":"msg_D2",'
        b'"role":"assistant","content":[{"type":"text","text":"The reviewer found no bugs."}],'
        b'"stop_reason":"end_turn"}}\n'
    )
    path = home / "spliced.jsonl"
    path.write_bytes(spliced + answer)
    result = summarize(str(path))
    assert result["turns"] == [
        {"status": "completed", "final_text": "The reviewer found no bugs.", "error": None}
    ]


def test_inline_sidechain_answer_is_not_the_final_text():
    """1.0.x: the subagent's "The repository is empty." (end_turn) is in the file
    before the main answer; only the main chain's last response is the answer."""
    result = summarize(str(FIXTURES / "orcr-1.0.98-init-sidechain.jsonl"))
    [turn] = result["turns"]
    assert turn["status"] == "completed"
    assert "repository is empty" not in turn["final_text"]
    cut = FIXTURES.joinpath("orcr-1.0.98-init-sidechain.jsonl").read_bytes().splitlines(True)
    # up to and including the subagent's end_turn and the Task's tool_result: still working
    upto = b"".join(cut[:10])
    partial = feed_in_chunks(ClaudeProvider(), upto, [])
    assert partial["state"] == "working"
    assert partial["turns"] == [{"status": "open", "final_text": None, "error": None}]
