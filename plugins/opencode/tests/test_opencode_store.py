"""The reader of OpenCode's session database, on rows written the way the CLI writes
them: turns open and end by the same rules as OpenCode's own loop."""

from __future__ import annotations

from orcr_opencode.store import StoreReader

from orcr_core.contracts import Usage

ABORTED = {"name": "MessageAbortedError", "data": {"message": "The operation was aborted."}}
API = {"name": "APIError", "data": {"message": "bad request (fake)", "statusCode": 400}}


def test_nothing_before_the_first_prompt(store, tmp_path):
    assert StoreReader(str(tmp_path / "none.db")).poll().state == "unknown"
    assert StoreReader(store.wal).poll().state == "unknown"  # no session yet
    store.add_session()
    assert StoreReader(store.wal).poll().state == "idle"


def test_a_turn_opens_with_the_prompt_and_ends_with_the_final_step(store):
    reader = StoreReader(store.wal)
    store.add_session()
    user = store.prompt("list files")
    got = reader.poll()
    assert (got.state, [t.status for t in got.turns], got.version) == (
        "working",
        ["open"],
        "1.18.33",
    )
    # a tool step: finish tool-calls is no end, nor is the next step before it finishes
    store.answer(user, "let me look", finish="tool-calls",
                 tool={"status": "completed", "input": {"command": "ls"}, "output": "a"})  # fmt: skip
    assert reader.poll().state == "working"
    last = store.answer(user, None, finish=None)
    assert reader.poll().state == "working"
    store.answer(user, "two files", mid=last)  # the same message, finished
    got = reader.poll()
    assert got.state == "idle"
    assert (got.turns[0].status, got.turns[0].final_text) == ("completed", "two files")
    assert got.turns[0].usage == Usage(200, 20, 0, 0, model="fake-chat")


def test_errored_interrupted_and_refused_turns(store):
    reader = StoreReader(store.wal)
    store.add_session()
    store.answer(store.prompt("broken one"), None, finish=None, error=API)
    store.answer(store.prompt("a long one"), "never fin", finish=None, error=ABORTED)
    refused = {"status": "error", "input": {"command": "touch x"},
               "error": "The user rejected permission to use this specific tool call."}  # fmt: skip
    store.answer(store.prompt("run a command"), None, finish="tool-calls", tool=refused)
    got = reader.poll()
    assert [(t.status, t.error) for t in got.turns] == [
        ("errored", "APIError: bad request (fake)"),
        ("interrupted", None),
        ("interrupted", "a tool call was refused"),
    ]
    assert got.state == "idle"


def test_a_failed_tool_that_was_not_refused_keeps_the_turn_open(store):
    reader = StoreReader(store.wal)
    store.add_session()
    failed = {"status": "error", "input": {"command": "false"}, "error": "exit status 1"}
    store.answer(store.prompt("run a command"), None, finish="tool-calls", tool=failed)
    assert reader.poll().state == "working"  # the loop goes on with the error as the result


def test_synthetic_user_messages_open_no_turn_and_subagent_sessions_are_not_read(store):
    reader = StoreReader(store.wal)
    store.add_session()
    user = store.prompt("hello")
    store.answer(user, "Hi")
    synthetic = store.prompt("Continue if you have next steps", synthetic=True)
    store.answer(synthetic, "continued")
    child = store.add_session("ses_test0002", parent=store.session)
    cu = store.message({"role": "user"}, session=child)
    store.part(cu, {"type": "text", "text": "subagent task"}, session=child)
    got = reader.poll()
    assert [(t.status, t.final_text) for t in got.turns] == [("completed", "continued")]


def test_a_prompt_left_unanswered_by_a_later_one_is_interrupted(store):
    reader = StoreReader(store.wal)
    store.add_session()
    store.prompt("first")
    second = store.prompt("second")
    store.answer(second, "answer two")
    got = reader.poll()
    assert [(t.status, t.final_text) for t in got.turns] == [
        ("interrupted", None),
        ("completed", "answer two"),
    ]


def test_the_reader_reads_again_only_after_a_write(store, monkeypatch):
    import orcr_opencode.store as mod

    reader = StoreReader(store.wal)
    store.add_session()
    store.answer(store.prompt("hello"), "Hi")
    assert reader.poll().final_text == "Hi"
    calls = []
    real = mod.read_messages
    monkeypatch.setattr(mod, "read_messages", lambda *a: calls.append(1) or real(*a))
    reader.poll()
    assert calls == []
    store.answer(store.prompt("again"), "Hi again")
    assert reader.poll().final_text == "Hi again" and calls == [1]
