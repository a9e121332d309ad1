"""Synthetic transcripts for what the fixtures lack (TRANSCRIPTS.md section 1)."""

import itertools
import json
import os
from pathlib import Path

import pytest
from orcr_claude import ClaudeProvider

from orcr_core.kit.testing import Transcript

_ids = itertools.count()


def user(content, **extra):
    return {
        "type": "user",
        "isSidechain": False,
        "version": "2.1.38",
        "message": {"role": "user", "content": content},
        **extra,
    }


def assistant(msg_id, *blocks, stop_reason=None, **extra):
    return {
        "type": "assistant",
        "isSidechain": False,
        "version": "2.1.38",
        "message": {
            "id": msg_id,
            "role": "assistant",
            "content": list(blocks),
            "stop_reason": stop_reason,
        },
        **extra,
    }


def text(t):
    return {"type": "text", "text": t}


def tool_use(tool_id, name="Bash"):
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {}}


def tool_result(tool_id, **extra):
    return user(
        [{"type": "tool_result", "tool_use_id": tool_id, "content": "ok"}],
        toolUseResult={"stdout": "ok"},
        **extra,
    )


def system(subtype, **extra):
    return {"type": "system", "subtype": subtype, "isSidechain": False, **extra}


@pytest.fixture
def read(transcript, clock):
    """poll() on a live reader over ``transcript`` (settle 3 s, blocked guess after 30 s)."""
    reader = ClaudeProvider().open_reader(str(transcript.path), clock=clock, wall=clock)
    return reader.poll


def statuses(state):
    return [(t.status, t.final_text) for t in state.turns]


def test_empty_or_missing_file_is_unknown(tmp_path, clock):
    reader = ClaudeProvider().open_reader(str(tmp_path / "absent.jsonl"), clock=clock, wall=clock)
    assert reader.poll().state == "unknown"


def test_text_answer_is_provisional_until_quiet(transcript, read, clock):
    transcript.add(user("hi"), assistant("m1", text("Hello.")))
    state = read()
    assert state.state == "working" and statuses(state) == [("open", None)]
    clock.advance(2.9)
    assert read().state == "working"
    clock.advance(0.1)
    state = read()
    assert state.state == "idle" and statuses(state) == [("completed", "Hello.")]
    assert state.final_text == "Hello."


def test_tool_use_line_after_text_line_reopens_the_turn(transcript, read, clock):
    transcript.add(user("hi"), assistant("m1", text("Let me look.")))
    read()
    transcript.add(assistant("m1", tool_use("t1", "Read")))
    read()
    clock.advance(5)
    state = read()
    assert statuses(state) == [("open", None)] and state.state == "working"


def test_growth_resets_the_quiet_period(transcript, read, clock):
    transcript.add(user("hi"), assistant("m1", text("A")))
    read()
    clock.advance(2)
    transcript.raw(b'{"type":"progress"')  # a partial line is growth too
    read()
    clock.advance(2)
    assert read().state == "working"
    clock.advance(1)
    assert read().state == "idle"


def test_stop_hook_summary_confirms_at_once_unless_work_follows(transcript, read, clock):
    transcript.add(user("hi"), assistant("m1", text("Done.")), system("stop_hook_summary"))
    assert statuses(read()) == [("completed", "Done.")]
    transcript.add(assistant("m2", tool_use("t1")))  # a blocking Stop hook: the turn goes on
    assert read().state == "working"


def test_an_end_marker_ends_a_turn_with_no_response(transcript, read):
    """The model answered nothing (twice): Claude Code writes no assistant line, only its
    nudge and the turn's end markers."""
    transcript.add(
        user("say nothing"),
        user("[Your previous response had no visible output. ...]", isMeta=True),
    )
    assert read().state == "working"
    transcript.add(system("stop_hook_summary"), system("turn_duration", durationMs=5))
    state = read()
    assert statuses(state) == [("completed", None)] and state.state == "idle"


def test_turn_duration_is_an_end_marker(transcript, read):
    transcript.add(
        user("hi"), assistant("m1", text("Done.")), system("turn_duration", durationMs=5)
    )
    assert read().state == "idle"


def test_end_turn_stop_reason_shortens_the_wait(transcript, read, clock):
    transcript.add(user("hi"), assistant("m1", text("Done."), stop_reason="end_turn"))
    assert read().state == "working"
    clock.advance(0.5)
    assert statuses(read()) == [("completed", "Done.")]


def test_stop_reason_end_turn_on_a_thinking_line_is_not_an_answer(transcript, read, clock):
    # 2.1.233 writes the final stop_reason on every split line, thinking first.
    transcript.add(
        user("hi"), assistant("m1", {"type": "thinking", "thinking": ""}, stop_reason="tool_use")
    )
    read()
    clock.advance(10)
    assert read().state == "working"


def test_split_message_text_blocks_joined_in_file_order(transcript, read, clock):
    """Each text block of the last response is a paragraph of the answer (Claude Code
    shows them apart); blank ones are left out."""
    transcript.add(
        user("hi"),
        assistant("m1", tool_use("t1", "Read")),
        tool_result("t1"),
        assistant("m2", text("\n\n")),
        assistant("m2", {"type": "thinking", "thinking": "", "signature": "x"}),
        {"type": "progress", "data": {"type": "hook_progress"}},
        assistant("m2", text("First part. ")),
        assistant("m2", text("Second part.")),
    )
    read()
    clock.advance(3)
    assert statuses(read()) == [("completed", "First part. \nSecond part.")]


def test_only_the_last_message_id_counts(transcript, read, clock):
    transcript.add(
        user("hi"), assistant("m1", text("Earlier text")), assistant("m2", text("Final"))
    )
    read()
    clock.advance(3)
    assert read().final_text == "Final"


def test_last_response_with_text_and_tool_use_is_not_final(transcript, read, clock):
    transcript.add(user("hi"), assistant("m1", text("Running it")), assistant("m1", tool_use("t1")))
    read()
    clock.advance(10)
    assert statuses(read()) == [("open", None)]


def test_inline_sidechain_lines_never_end_or_start_a_turn(transcript, read, clock):
    side = {"isSidechain": True}
    transcript.add(
        user("review the code"),
        assistant("m1", tool_use("task1", "Task")),
        user("Subagent prompt: look at foo.py", **side),
        assistant("s1", text("Subagent finished: all good."), stop_reason="end_turn", **side),
        system("stop_hook_summary", **side),
    )
    read()
    clock.advance(10)
    state = read()
    assert statuses(state) == [("open", None)] and state.state == "working"
    transcript.add(tool_result("task1"), assistant("m2", text("Main answer.")))
    read()
    clock.advance(3)
    assert statuses(read()) == [("completed", "Main answer.")]


def test_interrupt_marker(transcript, read, clock):
    transcript.add(
        user("hi"),
        assistant("m1", text("Working on it")),
        assistant("m1", tool_use("t1")),
        user([text("[Request interrupted by user for tool use]")]),
    )
    state = read()
    assert statuses(state) == [("interrupted", None)] and state.state == "idle"


def test_interrupt_after_a_complete_answer_still_interrupts(transcript, read, clock):
    transcript.add(
        user("hi"), assistant("m1", text("Answer")), user("[Request interrupted by user]")
    )
    read()
    clock.advance(5)
    assert statuses(read()) == [("interrupted", None)]


def test_non_prompts_do_not_start_turns(transcript, read, clock):
    transcript.add(
        user("hi"),
        assistant("m1", text("Done.")),
        system("stop_hook_summary"),
        user("<local-command-caveat>Caveat</local-command-caveat>", isMeta=True),
        user("Expanded skill banner", isMeta=True),
        user("This session is being continued... summary", isCompactSummary=True),
        system("compact_boundary", content="Conversation compacted"),
        user("<bash-input>ls</bash-input>"),
        user("<bash-stdout>a b</bash-stdout><bash-stderr></bash-stderr>"),
        {"type": "queue-operation", "operation": "enqueue", "content": "later"},
        {"type": "summary", "summary": "Title"},
    )
    state = read()
    assert statuses(state) == [("completed", "Done.")] and state.state == "idle"


def test_local_slash_command_is_not_a_turn(transcript, read):
    transcript.add(
        user("hi"),
        assistant("m1", text("Done.")),
        system("stop_hook_summary"),
        user("<command-name>/mcp</command-name>\n<command-message>mcp</command-message>"),
        user("<local-command-stdout>Reconnected.</local-command-stdout>"),
        system("local_command", content="<local-command-stdout>x</local-command-stdout>"),
    )
    assert statuses(read()) == [("completed", "Done.")]


def test_init_style_command_with_meta_expansion_is_a_turn(transcript, read, clock):
    transcript.add(
        user(
            "<command-message>init is analyzing…</command-message>\n<command-name>/init</command-name>"
        ),
        user([text("Please analyze this codebase")], isMeta=True),
    )
    state = read()
    assert statuses(state) == [("open", None)] and state.state == "working"
    transcript.add(assistant("m1", text("Created CLAUDE.md")))
    read()
    clock.advance(3)
    assert statuses(read()) == [("completed", "Created CLAUDE.md")]


def test_task_notification_starts_a_turn_with_no_human_prompt(transcript, read, clock):
    transcript.add(
        user("start the server in background"),
        assistant("m1", text("Started.")),
        system("stop_hook_summary"),
    )
    assert read().state == "idle"
    transcript.add(user("<task-notification><task-id>b1</task-id>done</task-notification>"))
    state = read()
    assert state.state == "working"
    assert statuses(state) == [("completed", "Started."), ("open", None)]
    assert state.final_text == "Started."  # the last *ended* turn's answer
    transcript.add(assistant("m2", text("The server is up.")), system("stop_hook_summary"))
    assert statuses(read()) == [("completed", "Started."), ("completed", "The server is up.")]


def test_new_prompt_abandons_an_open_turn(transcript, read):
    transcript.add(user("one"), assistant("m1", tool_use("t1")), user("two"))
    assert statuses(read()) == [("interrupted", None), ("open", None)]


def test_api_error_message_errors_the_turn(transcript, read):
    transcript.add(
        user("hi"),
        system("api_error", retryAttempt=1, maxRetries=10, retryInMs=500),
    )
    assert read().state == "working"  # a retry is not terminal
    transcript.add(
        assistant(
            "e1",
            text("API Error: Rate limit reached"),
            isApiErrorMessage=True,
            error="rate_limit",
            apiErrorStatus=429,
        )
    )
    state = read()
    assert statuses(state) == [("errored", None)] and state.state == "idle"
    assert state.turns[0].error == "API Error: Rate limit reached"
    transcript.add(user("again"))  # closed by the next prompt, it keeps its error
    assert read().turns[0].error == "API Error: Rate limit reached"


def test_retry_after_api_error_recovers(transcript, read, clock):
    transcript.add(
        user("hi"),
        assistant("m1", tool_use("t1", "Read")),
        system("api_error", retryAttempt=1, maxRetries=10),
        tool_result("t1"),
        assistant("m2", text("Fine.")),
    )
    read()
    clock.advance(3)
    assert statuses(read()) == [("completed", "Fine.")]


def test_exhausted_api_error_retries_error_the_turn(transcript, read):
    transcript.add(
        user("hi"),
        assistant("m1", tool_use("t1", "Read")),
        tool_result("t1"),
        system("api_error", retryAttempt=10, maxRetries=10, error={"message": "overloaded"}),
    )
    state = read()
    assert statuses(state) == [("errored", None)] and state.turns[0].error == "overloaded"


def test_system_error_errors_the_turn(transcript, read):
    transcript.add(
        user("hi"),
        assistant("m1", tool_use("t1", "Read")),
        tool_result("t1"),
        system("error", content="boom"),
    )
    state = read()
    assert statuses(state) == [("errored", None)] and state.turns[0].error == "boom"


def test_ask_user_question_is_blocked_at_once(transcript, read):
    transcript.add(user("hi"), assistant("m1", tool_use("q1", "AskUserQuestion")))
    assert read().state == "blocked"
    transcript.add(tool_result("q1"))
    assert read().state == "working"


def test_blocked_guess_after_quiet_pending_tool(transcript, read, clock):
    transcript.add(user("hi", permissionMode="default"), assistant("m1", tool_use("t1", "Bash")))
    read()
    clock.advance(29)
    assert read().state == "working"
    clock.advance(1)
    assert read().state == "blocked"
    transcript.add(tool_result("t1"))
    assert read().state == "working"


@pytest.mark.parametrize("mode", ["bypassPermissions", "dontAsk"])
def test_no_blocked_guess_when_prompts_are_off(transcript, read, clock, mode):
    transcript.add(user("hi", permissionMode=mode), assistant("m1", tool_use("t1", "Bash")))
    read()
    clock.advance(60)
    assert read().state == "working"


def test_no_blocked_guess_for_tools_that_never_ask(transcript, read, clock):
    transcript.add(user("hi"), assistant("m1", tool_use("t1", "Read"), tool_use("t2", "Grep")))
    read()
    clock.advance(60)
    assert read().state == "working"


def test_accept_edits_mode_does_not_ask_for_edits(transcript, read, clock):
    transcript.add(
        user("hi", permissionMode="acceptEdits"), assistant("m1", tool_use("t1", "Edit"))
    )
    read()
    clock.advance(60)
    assert read().state == "working"
    transcript.add(tool_result("t1"), assistant("m2", tool_use("t2", "Bash")))
    read()
    clock.advance(60)
    assert read().state == "blocked"


def test_blocked_guess_can_be_turned_off(transcript, clock):
    reader = ClaudeProvider().open_reader(
        str(transcript.path), blocked_after=None, clock=clock, wall=clock
    )
    transcript.add(user("hi"), assistant("m1", tool_use("t1", "Bash")))
    reader.poll()
    clock.advance(600)
    assert reader.poll().state == "working"


def test_version_is_the_latest_written(transcript, read):
    transcript.add(
        user("hi"),
        {**assistant("m1", text("x")), "version": "2.1.40"},
        {"type": "last-prompt", "lastPrompt": "hi"},
    )
    assert read().version == "2.1.40"


def test_image_only_prompt_starts_a_turn(transcript, read):
    transcript.add(user([{"type": "image", "source": {}}]))
    assert statuses(read()) == [("open", None)]


def test_first_read_ages_the_file_by_its_mtime(transcript, clock):
    """A reader created after a server restart sees an old answer as settled at once,
    and an old pending tool as the blocked guess; later growth uses the monotonic clock."""
    transcript.add(user("hi"), assistant("m1", text("Old answer.")))
    os.utime(transcript.path, (1000.0 - 3600, 1000.0 - 3600))
    reader = ClaudeProvider().open_reader(str(transcript.path), clock=clock, wall=clock)
    assert statuses(reader.poll()) == [("completed", "Old answer.")]
    transcript.add(user("next"), assistant("m2", text("New.")))
    assert reader.poll().state == "working"  # fresh growth: provisional again


def test_first_read_of_an_old_pending_tool_is_the_blocked_guess(transcript, clock):
    transcript.add(user("hi"), assistant("m1", tool_use("t1", "Bash")))
    os.utime(transcript.path, (1000.0 - 60, 1000.0 - 60))
    reader = ClaudeProvider().open_reader(str(transcript.path), clock=clock, wall=clock)
    assert reader.poll().state == "blocked"


def test_error_before_any_response_errors_the_turn(transcript, read):
    transcript.add(user("hi"), system("api_error", retryAttempt=10, maxRetries=10))
    assert statuses(read()) == [("errored", None)]


# -- background agents (2.1.332 runs every subagent in the background) -----------------

BACKGROUND = Path(__file__).parent / "fixtures" / "orcr-2.1.332-background-agent.jsonl"


def _records() -> list[dict]:
    return [json.loads(ln) for ln in BACKGROUND.read_text().splitlines()]


def _until_first_turn_duration(records: list[dict]) -> int:
    return next(i for i, r in enumerate(records) if r.get("subtype") == "turn_duration") + 1


def test_a_turn_ended_with_background_agents_running_is_not_over(transcript, read, clock):
    """The real 2.1.332 file cut after the main agent's first answer: its turn_duration
    says one background agent still runs, so the turn is still working (no answer yet),
    however long it stays quiet; the task-notification continues it, and the answer
    given after it is the turn's."""
    records = _records()
    cut = _until_first_turn_duration(records)
    transcript.add(*records[:cut])
    clock.advance(600)
    state = read()
    assert (state.state, [(t.status, t.final_text) for t in state.turns]) == (
        "working",
        [("open", None)],
    )
    transcript.add(*records[cut:])
    clock.advance(5)
    state = read()
    assert state.state == "idle"
    assert [(t.status, t.final_text) for t in state.turns] == [("completed", "after the helper")]


def test_a_read_between_the_stop_hook_and_the_turn_duration_is_still_working(
    transcript, read, clock
):
    """The turn that launched a background agent is not over at its stop_hook_summary:
    the turn_duration written a moment later says whether agents still run. Read in
    between (a loaded machine), the turn went idle and orcr closed it (CI: the real
    Claude Code test failed 3 of 3)."""
    records = _records()
    cut = _until_first_turn_duration(records)
    transcript.add(*records[: cut - 1])  # up to the stop_hook_summary
    clock.advance(0.5)  # well inside the settle time
    assert read().state == "working"
    transcript.add(records[cut - 1])  # turn_duration: one agent still runs
    clock.advance(600)
    assert read().state == "working"
    transcript.add(*records[cut:])
    clock.advance(0.5)  # the last answer's own end lines end the turn at once
    state = read()
    assert (state.state, state.turns[-1].final_text) == ("idle", "after the helper")


def test_a_quiet_answer_before_the_stop_hook_does_not_end_a_turn_that_launched_agents(
    transcript, read, clock
):
    """Under load Claude Code's stop hook can come seconds after the answer (about 1 s
    here, unloaded): the quiet that confirms an ordinary answer (``end_turn``: 0.5 s,
    else 3 s) must not end a turn whose background agent may still run (CI: the real
    Claude Code test read it ``idle`` while its helper ran). Its turn_duration decides,
    or a long quiet (``LAUNCHED_QUIET``) when a release writes none."""
    from orcr_claude.turns import LAUNCHED_QUIET

    records = _records()
    answer = _until_first_turn_duration(records) - 2  # before the stop_hook_summary
    assert records[answer - 1]["type"] == "assistant"
    transcript.add(*records[:answer])
    clock.advance(5)
    assert read().state == "working"
    transcript.add(*records[answer : answer + 2])  # the stop hook, turn_duration: 1 runs
    clock.advance(600)
    assert read().state == "working"
    transcript.add(*records[answer + 2 :])
    clock.advance(0.5)
    assert read().state == "idle"
    fresh = Transcript(transcript.path.with_name("other.jsonl"))
    fresh.add(*records[:answer])  # a release that writes no turn_duration: a long quiet
    reader = ClaudeProvider().open_reader(str(fresh.path), clock=clock, wall=clock)
    assert reader.poll().state == "working"
    clock.advance(LAUNCHED_QUIET - 1)
    assert reader.poll().state == "working"
    clock.advance(2)
    assert reader.poll().state == "idle"


def test_two_background_agents_keep_the_turn_open_until_the_last_reports(transcript, read, clock):
    records = _records()
    cut = _until_first_turn_duration(records)
    first = [dict(r) for r in records[:cut]]
    first[-1]["pendingBackgroundAgentCount"] = 2
    woken = records[cut:]
    still_one = [dict(r) for r in woken]
    still_one[-1]["pendingBackgroundAgentCount"] = 1
    transcript.add(*first, *still_one)
    clock.advance(60)
    assert read().state == "working"
    transcript.add(*woken)
    clock.advance(5)
    state = read()
    assert (state.state, len(state.turns)) == ("idle", 1)


def test_a_prompt_typed_while_background_agents_run_closes_the_turn_completed(
    transcript, read, clock
):
    """A person may type on: the earlier turn ends with the answer it had given."""
    records = _records()
    cut = _until_first_turn_duration(records)
    transcript.add(*records[:cut], user("something else"), assistant("m9", text("ok")))
    read()
    clock.advance(5)
    turns = read().turns
    assert [(t.status, t.final_text) for t in turns] == [
        ("completed", "main final answer"),
        ("completed", "ok"),
    ]


IDLE_COMPACT = Path(__file__).parent / "fixtures" / "orcr-2.1.332-idle-compact.jsonl"


@pytest.mark.parametrize("hook", [True, False], ids=["stop-hook", "no-stop-hook"])
def test_idle_compaction_is_no_turn_and_does_not_reopen_the_idle_one(transcript, read, clock, hook):
    """Claude Code 2.1.299+ compacts a conversation left idle (~54 min, over 200K
    tokens): a compact_boundary, an isCompactSummary user line, an attachment and a
    system/informational notice arrive with no prompt. The idle turn stays completed
    while they arrive (the file grows: without the Stop hook its end came from the
    quiet period only), and the prompt after them is turn 2."""
    records = [json.loads(line) for line in IDLE_COMPACT.read_text().splitlines()]
    if not hook:
        records = [r for r in records if r.get("subtype") != "stop_hook_summary"]
    at = next(i for i, r in enumerate(records) if r.get("subtype") == "compact_boundary")
    prompt2 = next(i for i, r in enumerate(records) if r.get("promptId") == "p2")
    transcript.add(*records[:at])
    read()
    clock.advance(5)
    idle = [("completed", "I read all 412 files.")]
    assert (read().state, statuses(read())) == ("idle", idle)
    for record in records[at:prompt2]:
        transcript.add(record)
        state = read()  # no time passes: the file is growing
        assert (state.state, statuses(state)) == ("idle", idle), record
    transcript.add(records[prompt2])
    state = read()
    assert state.state == "working" and statuses(state) == [*idle, ("open", None)]
    transcript.add(*records[prompt2 + 1 :])
    read()
    clock.advance(5)
    state = read()
    assert statuses(state) == [*idle, ("completed", "A small CLI with one module.")]
