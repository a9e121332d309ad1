"""The fake model servers the real_cli tier runs the CLIs against (tests/fake_models).

Spoken to here over real HTTP the way the CLIs speak to them: a streamed Messages
API answer, a streamed Responses API answer, scripted tool calls, errors and rate
limits that give way after their count, side requests kept apart from turns.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest
from fake_models import (
    Error,
    Hold,
    RateLimit,
    Refusal,
    Reply,
    Script,
    StreamError,
    Text,
    Thinking,
    Tool,
    Wire,
    anthropic_server,
    responses_server,
)


def _post(url: str, body: dict) -> tuple[int, dict, list[tuple[str, dict]]]:
    req = urllib.request.Request(
        url, json.dumps(body).encode(), {"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read().decode()
            headers = dict(resp.headers)
            status = resp.status
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), [("json", json.loads(exc.read()))]
    if "event-stream" not in headers.get("Content-Type", headers.get("content-type", "")):
        return status, headers, [("json", json.loads(raw))]
    events = []
    for block in raw.split("\n\n"):
        lines = dict(ln.split(": ", 1) for ln in block.splitlines() if ": " in ln and ln[0] != ":")
        if "event" in lines:
            events.append((lines["event"], json.loads(lines["data"])))
    return status, headers, events


def _claude_body(*messages, tools=("Bash", "Agent"), stream=True) -> dict:
    return {
        "model": "claude-x",
        "stream": stream,
        "tools": [{"name": n} for n in tools],
        "messages": list(messages),
    }


def _user(text: str) -> dict:
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": "<system-reminder>\nnot the prompt\n</system-reminder>"},
            {"type": "text", "text": text},
        ],
    }


def _text_of(events) -> str:
    return "".join(d["delta"].get("text", "") for e, d in events if e == "content_block_delta")


def test_anthropic_streams_the_scripted_answer_per_prompt():
    script = Script({"hello": Text("Hi there, slowly", delay=0.01, chunk=3)}, default="plain")
    with anthropic_server(script) as srv:
        status, _, events = _post(srv.url + "/v1/messages", _claude_body(_user("hello you")))
        assert status == 200
        kinds = [e for e, _ in events]
        assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
        assert _text_of(events) == "Hi there, slowly"
        assert [d for e, d in events if e == "content_block_delta"][0]["delta"]["text"] == "Hi "
        assert events[-2][1]["delta"]["stop_reason"] == "end_turn"
        _, _, events = _post(srv.url + "/v1/messages", _claude_body(_user("other")))
        assert _text_of(events) == "plain"
        assert srv.prompts() == ["hello you", "other"]


def test_anthropic_tool_call_then_answer_after_the_result():
    script = Script({"run it": [Tool.bash("touch x"), "ran"], "delegate": Tool.task("sub job")})
    with anthropic_server(script) as srv:
        _, _, events = _post(srv.url + "/v1/messages", _claude_body(_user("run it")))
        start = next(d for e, d in events if e == "content_block_start")["content_block"]
        assert (start["type"], start["name"]) == ("tool_use", "Bash")
        args = "".join(
            d["delta"]["partial_json"]
            for e, d in events
            if d.get("delta", {}).get("type") == "input_json_delta"
        )
        assert json.loads(args)["command"] == "touch x"
        assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
        tool_use = {"role": "assistant", "content": [dict(start, input=json.loads(args))]}
        result = {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": start["id"], "content": "ok"}],
        }
        _, _, events = _post(
            srv.url + "/v1/messages", _claude_body(_user("run it"), tool_use, result)
        )
        assert _text_of(events) == "ran"
        # the subagent tool takes the name the CLI offers (Agent here, not Task)
        _, _, events = _post(srv.url + "/v1/messages", _claude_body(_user("delegate")))
        start = next(d for e, d in events if e == "content_block_start")["content_block"]
        assert start["name"] == "Agent"


def test_errors_and_rate_limits_give_way_after_their_count():
    script = Script({"busy": [RateLimit(retry_after=2), "after the wait"],
                     "broken": [Error(status=529, type="overloaded_error", times=2), "fixed"]})  # fmt: skip
    with anthropic_server(script) as srv:
        status, headers, events = _post(srv.url + "/v1/messages", _claude_body(_user("busy")))
        assert (status, headers.get("retry-after")) == (429, "2")
        assert events[0][1]["error"]["type"] == "rate_limit_error"
        _, _, events = _post(srv.url + "/v1/messages", _claude_body(_user("busy")))
        assert _text_of(events) == "after the wait"
        codes = [
            _post(srv.url + "/v1/messages", _claude_body(_user("broken")))[0] for _ in range(3)
        ]
        assert codes == [529, 529, 200]


def test_side_requests_never_take_a_scripted_step():
    """A request without tools (a title, a classifier) is answered aside: the
    script's tool call is given to the conversation only."""
    script = Script({"job": [Tool.bash("ls"), "done"]}, side="A title")
    with anthropic_server(script) as srv:
        _, _, events = _post(srv.url + "/v1/messages", _claude_body(_user("job"), tools=()))
        assert _text_of(events) == "A title"
        _, _, events = _post(srv.url + "/v1/messages", _claude_body(_user("job")))
        assert (
            next(d for e, d in events if e == "content_block_start")["content_block"]["type"]
            == "tool_use"
        )
        assert [r.answer for r in srv.requests] == ["side", "tool"]
        assert srv.prompts() == ["job"]
        status, _, body = _post(srv.url + "/v1/messages/count_tokens", {"messages": []})
        assert (status, body[0][1]) == (200, {"input_tokens": 100})


def _codex_body(*items, tools=("exec_command",)) -> dict:
    return {"model": "gpt-x", "stream": True, "tools": [{"type": "function", "name": n} for n in tools],
            "input": list(items)}  # fmt: skip


def _codex_user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def test_the_clis_own_requests_with_tools_are_answered_aside():
    """Claude Code 2.1.20's prompt suggestions and Codex 0.150's title request carry
    the tools but are no turn: answered aside, never given a scripted step."""
    script = Script(default="scripted", side="A title")
    with anthropic_server(script) as srv:
        suggest = _user("[SUGGESTION MODE: Suggest what the user might type next.]")
        _, _, events = _post(srv.url + "/v1/messages", _claude_body(_user("job"), suggest))
        assert _text_of(events) == "A title" and srv.prompts() == []
    with responses_server(script) as srv:
        title = _codex_user("Generate a concise, single-line task title of at most 36 characters")
        _post(srv.url + "/v1/responses", _codex_body(_codex_user("job"), title))
        assert [r.answer for r in srv.requests] == ["side"] and srv.prompts() == []


def test_responses_streams_text_and_shell_calls():
    script = Script({"hi": "Hello from responses", "shell": [Tool.bash("touch y"), "touched"]})
    with responses_server(script) as srv:
        env = _codex_user("<environment_context>cwd</environment_context>")
        _, _, events = _post(srv.url + "/v1/responses", _codex_body(env, _codex_user("hi")))
        kinds = [e for e, _ in events]
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
        text = "".join(d["delta"] for e, d in events if e == "response.output_text.delta")
        assert text == "Hello from responses"
        done = events[-1][1]["response"]
        assert done["status"] == "completed"
        assert done["output"][0]["content"][0]["text"] == "Hello from responses"

        _, _, events = _post(srv.url + "/v1/responses", _codex_body(_codex_user("shell")))
        call = events[-1][1]["response"]["output"][0]
        assert (call["type"], call["name"], json.loads(call["arguments"])) == (
            "function_call", "exec_command", {"cmd": "touch y"},
        )  # fmt: skip
        out = {"type": "function_call_output", "call_id": call["call_id"], "output": "ok"}
        _, _, events = _post(
            srv.url + "/v1/responses", _codex_body(_codex_user("shell"), call, out)
        )
        assert events[-1][1]["response"]["output"][0]["content"][0]["text"] == "touched"
        assert srv.prompts() == ["hi", "shell"]


@pytest.mark.parametrize("serve", [anthropic_server, responses_server])
def test_a_held_stream_stays_open_until_released(serve):
    hold = Hold("held words")
    script = Script({"wait": hold})
    body = (
        _claude_body(_user("wait"))
        if serve is anthropic_server
        else _codex_body(_codex_user("wait"))
    )
    path = "/v1/messages" if serve is anthropic_server else "/v1/responses"
    with serve(script) as srv:
        result = {}
        t = threading.Thread(target=lambda: result.setdefault("r", _post(srv.url + path, body)))
        t.start()
        assert hold.started.wait(10)
        t.join(0.5)
        assert t.is_alive()  # still streaming: the turn is surely working
        hold.release()
        t.join(10)
        events = result["r"][2]
        if serve is anthropic_server:
            assert _text_of(events) == "held words"
        else:
            assert (
                "".join(d["delta"] for e, d in events if e == "response.output_text.delta")
                == "held words"
            )


def test_anthropic_variety_thinking_blocks_pings_and_another_model():
    """What other Messages APIs send: thinking and redacted_thinking blocks before the
    text, several text blocks, text and a tool call in one message, ``ping`` events, a
    model id other than the one asked for, lean usage, long random ids, max_tokens."""
    script = Script(
        {"think": Reply([Thinking("hmm"), Thinking(redacted=True), "One.", "Two."]),
         "look": Reply(["Reading.", Tool("Read", {"file_path": "/x"})]),
         "long": Reply(["cut"], truncated=True), "no": Reply([Refusal("No.")])},
        wire=Wire(model="other-model", ping=True, lean=True, ids="real"),
    )  # fmt: skip
    with anthropic_server(script) as srv:
        _, _, events = _post(srv.url + "/v1/messages", _claude_body(_user("think")))
        start = events[0][1]["message"]
        assert start["model"] == "other-model" and len(start["id"]) > 40
        assert start["usage"] == {"input_tokens": 100, "output_tokens": 10}
        assert "ping" in [e for e, _ in events]
        blocks = [d["content_block"]["type"] for e, d in events if e == "content_block_start"]
        assert blocks == ["thinking", "redacted_thinking", "text", "text"]
        deltas = [d["delta"]["type"] for e, d in events if e == "content_block_delta"]
        assert deltas[:2] == ["thinking_delta", "signature_delta"]
        assert _text_of(events) == "One.Two."
        _, _, events = _post(srv.url + "/v1/messages", _claude_body(_user("look")))
        blocks = [d["content_block"]["type"] for e, d in events if e == "content_block_start"]
        assert blocks == ["text", "tool_use"]
        assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
        for prompt, stop in (("long", "max_tokens"), ("no", "refusal")):
            _, _, events = _post(srv.url + "/v1/messages", _claude_body(_user(prompt)))
            assert events[-2][1]["delta"]["stop_reason"] == stop


def test_a_stream_error_fails_the_stream_then_gives_way():
    script = Script({"cut": [StreamError(times=1), "whole"]})
    with anthropic_server(script) as srv:
        _, _, events = _post(srv.url + "/v1/messages", _claude_body(_user("cut")))
        assert events[-1] == ("error", {"type": "error", "error": {
            "type": "overloaded_error", "message": "Overloaded (fake)"}})  # fmt: skip
        assert "message_stop" not in [e for e, _ in events]
        _, _, events = _post(srv.url + "/v1/messages", _claude_body(_user("cut")))
        assert _text_of(events) == "whole"
    with responses_server(Script({"cut": [StreamError(), "whole"]})) as srv:
        _, _, events = _post(srv.url + "/v1/responses", _codex_body(_codex_user("cut")))
        assert events[-1][0] == "response.failed"
        assert events[-1][1]["response"]["error"]["message"] == "Overloaded (fake)"
        _, _, events = _post(srv.url + "/v1/responses", _codex_body(_codex_user("cut")))
        assert events[-1][0] == "response.completed"
    with responses_server(Script({"cut": StreamError(event="error")})) as srv:
        _, _, events = _post(srv.url + "/v1/responses", _codex_body(_codex_user("cut")))
        assert events[-1][0] == "error" and events[-1][1]["message"] == "Overloaded (fake)"


def test_responses_variety_reasoning_parts_messages_and_lean_events():
    """Reasoning items before the message, several output_text parts or messages,
    response.incomplete, refusal parts; a lean server leaves the optional events out."""
    script = Script(
        {"think": Reply([Thinking("hmm"), "A. ", "B."]),
         "apart": Reply(["A.", "B."], separate=True),
         "long": Reply(["cut"], truncated=True), "no": Reply([Refusal("No.")])},
        wire=Wire(model="other-model", lean=True, ids="uuid"),
    )  # fmt: skip
    with responses_server(script) as srv:
        _, _, events = _post(srv.url + "/v1/responses", _codex_body(_codex_user("think")))
        kinds = [e for e, _ in events]
        assert not [k for k in kinds if "content_part" in k or k == "response.output_text.done"]
        done = events[-1][1]["response"]
        assert done["model"] == "other-model"
        assert [i["type"] for i in done["output"]] == ["reasoning", "message"]
        assert [c["text"] for c in done["output"][1]["content"]] == ["A. ", "B."]
        assert "_" not in done["id"]  # a bare UUID
        _, _, events = _post(srv.url + "/v1/responses", _codex_body(_codex_user("apart")))
        assert [i["content"][0]["text"] for i in events[-1][1]["response"]["output"]] == [
            "A.",
            "B.",
        ]
        _, _, events = _post(srv.url + "/v1/responses", _codex_body(_codex_user("long")))
        assert events[-1][0] == "response.incomplete"
        assert events[-1][1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
        _, _, events = _post(srv.url + "/v1/responses", _codex_body(_codex_user("no")))
        assert events[-1][1]["response"]["output"][0]["content"] == [
            {"type": "refusal", "refusal": "No."}
        ]


def test_the_record_says_whether_each_prompt_was_received_exactly_once():
    """The exactly-once record (issue 19): per request, every user text; a prompt
    doubled in one message, or sent again as a second user message, is caught."""
    with anthropic_server() as srv:
        url = srv.url + "/v1/messages"

        def user(t):
            return {"role": "user", "content": [{"type": "text", "text": t}]}

        said = {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}
        _post(url, _claude_body(user("<system-reminder>x</system-reminder>"), user("one")))
        _post(url, _claude_body(user("one"), said, user("two two")))
        _post(url, _claude_body(user("one"), said, user("two two"), said, user("one")))
        assert srv.user_texts()[1] == ["one", "two two"]
        assert srv.received("one") == [1, 1, 2]
        assert srv.turn_starts("one") == 2
        assert srv.once_problems(["two", "one", "three"]) == [
            "'two': received 2 times in one request, 1 turns started with it",
            "'one': received 2 times in one request, 2 turns started with it",
            "'three': never received",
        ]
    with responses_server() as srv:
        url = srv.url + "/v1/responses"

        def item(t):
            return {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": t}],
            }

        body = {"model": "m", "tools": [{"type": "function", "name": "shell"}], "stream": False}
        _post(
            url,
            dict(body, input=[item("<environment_context>x</environment_context>"), item("hi")]),
        )
        assert srv.once_problems(["hi"]) == [] and srv.user_texts() == [["hi"]]
