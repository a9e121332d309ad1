"""Synthetic rollouts for what the fixtures lack (TRANSCRIPTS.md section 2)."""

import pytest
from orcr_codex import CodexProvider


def meta(version="0.128.0", history_mode=None, thread="019e-thread"):
    payload = {"id": thread, "cli_version": version, "originator": "codex-tui"}
    if history_mode:
        payload["history_mode"] = history_mode
    return {"type": "session_meta", "payload": payload}


def event(kind, **payload):
    return {"type": "event_msg", "payload": {"type": kind, **payload}}


def item(kind, **payload):
    return {"type": "response_item", "payload": {"type": kind, **payload}}


def context(policy="on-request", turn_id=None):
    return {"type": "turn_context", "payload": {"approval_policy": policy, "turn_id": turn_id}}


def assistant(text, phase=None):
    payload = {"role": "assistant", "content": [{"type": "output_text", "text": text}]}
    if phase:
        payload["phase"] = phase
    return item("message", **payload)


def call(call_id, name="exec_command"):
    return item("function_call", name=name, arguments="{}", call_id=call_id)


def output(call_id):
    return item("function_call_output", call_id=call_id, output="ok")


@pytest.fixture
def read(rollout, clock):
    return CodexProvider().open_reader(str(rollout.path), clock=clock, wall=clock).poll


def statuses(state):
    return [(t.status, t.final_text) for t in state.turns]


def test_no_turn_yet_is_unknown(rollout, read):
    rollout.add(meta(), item("message", role="developer", content=[]))
    state = read()
    assert state.state == "unknown" and state.version == "0.128.0"


def test_task_complete_ends_the_turn_with_last_agent_message(rollout, read):
    rollout.add(meta(), event("task_started", turn_id="t1"), event("user_message", message="hi"))
    assert read().state == "working"
    rollout.add(
        assistant("Hello", "final_answer"),
        event("task_complete", turn_id="t1", last_agent_message="Hello"),
    )
    state = read()
    assert statuses(state) == [("completed", "Hello")] and state.state == "idle"


def test_turn_aborted_is_interrupted(rollout, read):
    rollout.add(
        meta(),
        event("task_started", turn_id="t1"),
        event("user_message", message="hi"),
        call("c1"),
        event("turn_aborted", turn_id="t1", reason="interrupted"),
    )
    state = read()
    assert statuses(state) == [("interrupted", None)] and state.state == "idle"


def test_task_complete_with_error_is_errored(rollout, read):
    rollout.add(
        meta(),
        event("task_started", turn_id="t1"),
        event("user_message", message="hi"),
        event(
            "task_complete",
            turn_id="t1",
            last_agent_message=None,
            error={"message": "unauthorized", "codex_error_info": "unauthorized"},
        ),
    )
    state = read()
    assert statuses(state) == [("errored", None)] and state.state == "idle"
    assert state.turns[0].error == "unauthorized"


def test_error_event_errors_the_open_turn(rollout, read):
    rollout.add(
        meta(),
        event("task_started", turn_id="t1"),
        event("user_message", message="hi"),
        event("error", message="stream disconnected"),
        event("task_complete", turn_id="t1", last_agent_message=None),
    )
    state = read()
    assert statuses(state) == [("errored", None)]
    assert state.turns[0].error == "stream disconnected"


def test_stream_error_is_not_terminal(rollout, read):
    rollout.add(meta(), event("task_started", turn_id="t1"), event("stream_error", message="retry"))
    assert read().state == "working"


def test_two_turns_and_rollback(rollout, read):
    for tid in ("t1", "t2", "t3"):
        rollout.add(
            event("task_started", turn_id=tid),
            event("task_complete", turn_id=tid, last_agent_message=tid),
        )
    rollout.add(event("thread_rolled_back", num_turns=2))
    assert statuses(read()) == [("completed", "t1")]


def test_first_session_meta_wins(rollout, read):
    rollout.add(meta("0.150.0", thread="child"), meta("0.149.0", thread="parent"))
    assert read().version == "0.150.0"


def test_legacy_implicit_turns(rollout, read, clock):
    rollout.add(
        meta("0.58.0"),
        event("user_message", message="one"),
        call("c1"),
        output("c1"),
        event("agent_message", message="Answer one"),
    )
    read()
    assert statuses(read()) == [("open", None)]  # not quiet yet
    clock.advance(3)
    state = read()
    assert statuses(state) == [("completed", "Answer one")] and state.state == "idle"
    rollout.add(event("user_message", message="two"), call("c2"))
    read()
    clock.advance(10)
    assert statuses(read()) == [("completed", "Answer one"), ("open", None)]
    rollout.add(event("user_message", message="three"))
    assert statuses(read())[:2] == [("completed", "Answer one"), ("interrupted", None)]


def test_explicit_turn_does_not_end_on_a_final_answer_alone(rollout, read, clock):
    rollout.add(meta(), event("task_started", turn_id="t1"), assistant("Done", "final_answer"))
    read()
    clock.advance(60)
    assert statuses(read()) == [("open", None)]


def test_blocked_guess_with_pending_call(rollout, read, clock):
    rollout.add(meta(), context("on-request"), event("task_started", turn_id="t1"), call("c1"))
    read()
    clock.advance(29)
    assert read().state == "working"
    clock.advance(1)
    assert read().state == "blocked"
    rollout.add(output("c1"))
    assert read().state == "working"


@pytest.mark.parametrize(
    ("policy", "answered"),
    [("never", False), ("on-request", True)],
    ids=["when_approval_is_never", "without_a_pending_call"],
)
def test_no_blocked_guess(rollout, read, clock, policy, answered):
    rollout.add(meta(), context(policy), event("task_started", turn_id="t1"), call("c1"))
    if answered:
        rollout.add(output("c1"))
    read()
    clock.advance(60)
    assert read().state == "working"


def test_custom_tool_call_pending_and_answered(rollout, read, clock):
    rollout.add(
        meta(),
        event("task_started", turn_id="t1"),
        item("custom_tool_call", name="apply_patch", call_id="p1", input="*** Begin"),
    )
    read()
    clock.advance(31)
    assert read().state == "blocked"
    rollout.add(item("custom_tool_call_output", call_id="p1", output="Done"))
    assert read().state == "working"


# records -> (status, final text) of each turn the reader shows
READS_AS = [
    pytest.param(
        [
            meta(),
            event("turn_started", turn_id="t1"),
            event("turn_complete", turn_id="t1", last_agent_message="x"),
        ],
        [("completed", "x")],
        id="turn_complete_spelling_is_accepted",
    ),
    pytest.param(
        [
            meta(),
            event("task_started", turn_id="t1"),
            call("c1"),
            event("task_started", turn_id="t2"),
        ],
        [("interrupted", None), ("open", None)],
        id="new_task_started_abandons_the_open_turn",
    ),
    pytest.param(
        [
            meta(),
            event("task_started", turn_id="t2"),
            event("task_complete", turn_id="t1", last_agent_message="stale"),
        ],
        [("open", None)],
        id="complete_for_another_turn_id_is_ignored",
    ),
    pytest.param(  # task_complete with no last_agent_message at all
        [
            meta(),
            event("task_started", turn_id="t1"),
            event("user_message", message="hi"),
            event("agent_message", message="Looking around"),
            assistant("Looking around", "commentary"),
            call("c1"),
            output("c1"),
            event("task_complete", turn_id="t1"),
        ],
        [("completed", None)],
        id="commentary_is_never_the_final_answer",
    ),
    pytest.param(
        [
            meta(),
            event("task_started", turn_id="t1"),
            event("agent_message", message="The answer"),
            assistant("The answer", "final_answer"),
            event("agent_message", message="PS, commentary"),
            assistant("PS, commentary", "commentary"),
            event("task_complete", turn_id="t1", last_agent_message=None),
        ],
        [("completed", "The answer")],
        id="fallback_to_final_answer_when_last_agent_message_is_null",
    ),
    pytest.param(
        [
            meta("0.155.1", "paginated"),
            event("task_started", turn_id="t1"),
            event(
                "item_completed",
                item={"type": "UserMessage", "content": [{"type": "text", "text": "q"}]},
            ),
            event(
                "item_completed",
                item={
                    "type": "AgentMessage",
                    "phase": "commentary",
                    "content": [{"type": "Text", "text": "thinking aloud"}],
                },
            ),
            event(
                "item_completed",
                item={
                    "type": "AgentMessage",
                    "phase": "final_answer",
                    "content": [{"type": "Text", "text": "ok"}],
                },
            ),
            event("task_complete", turn_id="t1"),
        ],
        [("completed", "ok")],
        id="paginated_mode_fallback_from_item_completed",
    ),
    pytest.param(
        [
            meta(),
            event("user_message", message="hi"),
            event("task_started", turn_id="t1"),
            event("task_complete", turn_id="t1", last_agent_message="done"),
        ],
        [("completed", "done")],
        id="implicit_turn_adopted_by_task_started",
    ),
    pytest.param(
        [
            meta(),
            event("user_message", message="one"),
            event("agent_message", message="Answer one"),
            event("task_started", turn_id="t2"),
        ],
        [("completed", "Answer one"), ("open", None)],
        id="task_started_after_a_finished_implicit_turn_starts_a_new_one",
    ),
]


@pytest.mark.parametrize(("records", "expected"), READS_AS)
def test_reads_as(rollout, read, records, expected):
    rollout.add(*records)
    assert statuses(read()) == expected
