"""The reader on what the real OpenCode 1.18.33 wrote (fixtures/real-*.json, captured
from its TUI in tmux against the fake Chat Completions API, redacted)."""

from orcr_opencode.store import StoreReader

from orcr_core.contracts import Usage


def test_answers_reasoning_a_tool_call_an_error_and_an_interrupt(store):
    store.load("real-1.18.33-turns.json")
    got = StoreReader(store.wal).poll()
    assert (got.state, got.version) == ("idle", "1.18.33")
    assert [(t.status, t.final_text, t.error) for t in got.turns] == [
        ("completed", "Hi there from fake", None),
        ("completed", "Thought it over", None),  # reasoning is not the answer
        ("completed", "made the file", None),  # after the allowed bash call
        ("errored", None, "APIError: bad request (fake)"),
        ("interrupted", None, None),  # Esc Esc: MessageAbortedError
    ]
    assert got.turns[2].usage == Usage(200, 20, 0, 0, model="fake-chat")  # two steps
    assert got.turns[3].usage == Usage(0, 0, 0, 0, model="fake-chat")


def test_a_refused_permission_ends_the_turn(store):
    store.load("real-1.18.33-refused.json")
    got = StoreReader(store.wal).poll()
    assert [(t.status, t.final_text) for t in got.turns] == [
        ("completed", "A slowly streamed answer"),
        ("interrupted", None),
    ]
    assert got.state == "idle"


def test_row_by_row_as_written_never_an_error_and_the_same_end(store):
    """The rows inserted one at a time in the order written (a reader polled between
    each): the turns never shrink, and the end is the whole fixture's."""
    rows = store.rows("real-1.18.33-turns.json")
    reader = StoreReader(store.wal)
    store.insert("session", rows["session"][0])
    events = sorted(
        [("message", r) for r in rows["message"]] + [("part", r) for r in rows["part"]],
        key=lambda e: (e[1]["time_created"], e[0] == "part"),
    )
    seen = 0
    for table, row in events:
        store.insert(table, row)
        state = reader.poll()
        assert len(state.turns) >= seen
        seen = len(state.turns)
    assert [t.status for t in state.turns] == [
        "completed", "completed", "completed", "errored", "interrupted",
    ]  # fmt: skip
