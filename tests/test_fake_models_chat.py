"""The fake Chat Completions API (tests/fake_models/openai_chat.py), spoken to over real
HTTP the way OpenAI-compatible clients speak to it: streamed ``data:`` chunks, tool
calls by the offered tool's own name, errors that give way after their count, side
requests (no tools) kept apart from turns."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

from fake_models import Error, Hold, Reply, Script, StreamError, Thinking, Tool, chat_server

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]


def _post(url: str, body: dict) -> tuple[int, list]:
    """(status, the chunks of a stream, or [the JSON body])."""
    req = urllib.request.Request(
        url + "/v1/chat/completions",
        json.dumps(body).encode(),
        {"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw, status = resp.read().decode(), resp.status
    except urllib.error.HTTPError as exc:
        return exc.code, [json.loads(exc.read())]
    if not raw.startswith("data: "):
        return status, [json.loads(raw)]
    out = []
    for block in raw.split("\n\n"):
        if block.startswith("data: "):
            data = block[6:]
            out.append(data if data == "[DONE]" else json.loads(data))
    return status, out


def _body(*messages, tools=TOOLS, **extra) -> dict:
    return {"model": "fake-chat", "stream": True, "tools": tools, "messages": list(messages),
            "stream_options": {"include_usage": True}, **extra}  # fmt: skip


def _user(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _content(chunks: list) -> str:
    return "".join(
        c["choices"][0]["delta"].get("content") or ""
        for c in chunks
        if isinstance(c, dict) and c.get("choices")
    )


def test_streams_the_scripted_answer_then_usage_and_done():
    with chat_server(Script({"hello": "Hi there, streamed"})) as srv:
        status, chunks = _post(srv.url, _body({"role": "system", "content": "sys"}, _user("hello")))
    assert status == 200 and chunks[-1] == "[DONE]"
    assert _content(chunks) == "Hi there, streamed"
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    finish = [c["choices"][0]["finish_reason"] for c in chunks[:-1] if c["choices"]]
    assert finish[-1] == "stop" and set(finish[:-1]) == {None}
    assert chunks[-2]["usage"]["prompt_tokens"] == 100 and chunks[-2]["choices"] == []
    assert srv.prompts() == ["hello"]


def test_a_bash_call_by_the_offered_name_then_the_answer_after_its_result():
    with chat_server(Script({"list": [Tool.bash("ls"), "listed"]})) as srv:
        _, chunks = _post(srv.url, _body(_user("list files")))
        calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks[:-2]
                 if c["choices"] and "tool_calls" in c["choices"][0]["delta"]]  # fmt: skip
        assert calls[0]["function"]["name"] == "bash" and calls[0]["id"]
        args = "".join(c["function"]["arguments"] for c in calls)
        assert json.loads(args)["command"] == "ls"
        assert chunks[-3]["choices"][0]["finish_reason"] == "tool_calls"
        call = {"id": calls[0]["id"], "type": "function",
                "function": {"name": "bash", "arguments": args}}  # fmt: skip
        _, chunks = _post(srv.url, _body(
            _user("list files"),
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": calls[0]["id"], "content": "a\nb"},
        ))  # fmt: skip
    assert _content(chunks) == "listed"
    assert [r.index for r in srv.conversation()] == [0, 1]
    assert srv.prompts() == ["list files"]


def test_errors_give_way_and_side_requests_take_no_step():
    script = Script({"flaky": [Error(status=503, message="busy"), "after the error"]})
    with chat_server(script) as srv:
        status, body = _post(srv.url, _body(_user("flaky one"), tools=[]))
        assert status == 200 and _content(body) == "Fake title"  # a title request: side
        status, body = _post(srv.url, _body(_user("flaky one")))
        assert status == 503 and body[0]["error"]["message"] == "busy"
        status, body = _post(srv.url, _body(_user("flaky one")))
    assert status == 200 and _content(body) == "after the error"
    assert [r.answer for r in srv.requests] == ["side", "error", "str"]


def test_variety_thinking_truncation_a_stream_error_and_a_whole_answer():
    script = Script({
        "think": Reply([Thinking("hmm"), "thought"], truncated=True),
        "break": [StreamError(text="partial"), "whole again"],
        "plain": "not streamed",
    })  # fmt: skip
    with chat_server(script) as srv:
        _, chunks = _post(srv.url, _body(_user("think")))
        deltas = [c["choices"][0]["delta"] for c in chunks if isinstance(c, dict) and c["choices"]]
        assert {"reasoning_content": "hmm"} in deltas and _content(chunks) == "thought"
        assert chunks[-3]["choices"][0]["finish_reason"] == "length"
        _, chunks = _post(srv.url, _body(_user("break")))
        assert _content(chunks) == "partial" and "[DONE]" not in chunks
        assert chunks[-1]["error"]["message"] == "Overloaded (fake)"
        _, chunks = _post(srv.url, _body(_user("break")))
        assert _content(chunks) == "whole again"
        _, (whole,) = _post(srv.url, _body(_user("plain"), stream=False))
    assert whole["choices"][0]["message"]["content"] == "not streamed"


def test_a_held_stream_stays_open_until_released():
    hold = Hold("held then finished")
    with chat_server(Script({"wait": hold})) as srv:
        got = {}
        body = _body(_user("wait"))
        t = threading.Thread(target=lambda: got.update(r=_post(srv.url, body)))
        t.start()
        assert hold.started.wait(10)
        t.join(0.5)
        assert t.is_alive()
        hold.release()
        t.join(10)
    assert _content(got["r"][1]) == "held then finished"
