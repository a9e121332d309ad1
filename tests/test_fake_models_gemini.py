"""The fake Gemini API (tests/fake_models/gemini.py) spoken to over real HTTP the way
Gemini CLI speaks to it: streamed ``data:`` chunks, a scripted shell call as
``run_shell_command``, the API's error body, its side requests kept apart."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from fake_models import Error, Hold, Reply, Script, Thinking, Tool, gemini_server

CONTEXT = {"text": "<session_context>\nThis is the Gemini CLI.\n</session_context>"}
TOOLS = [{"functionDeclarations": [{"name": "run_shell_command"}]}]


def _post(url: str, body: dict) -> tuple[int, list[dict]]:
    req = urllib.request.Request(
        url, json.dumps(body).encode(), {"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read().decode()
            status = resp.status
    except urllib.error.HTTPError as exc:
        return exc.code, [json.loads(exc.read())]
    if raw.startswith("data:"):
        return status, [json.loads(x[5:]) for x in raw.split("\r\n\r\n") if x.startswith("data:")]
    return status, [json.loads(raw)]


def _stream(srv, *contents) -> tuple[int, list[dict]]:
    url = f"{srv.url}/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    return _post(url, {"contents": list(contents), "tools": TOOLS})


def _parts(chunks):
    return [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]


def test_streams_the_answer_then_a_shell_call_then_the_answer_after_it():
    script = Script({"make": [Reply([Thinking("hmm"), "I will.", Tool.bash("touch x")]), "made"]})
    with gemini_server(script) as srv:
        prompt = {"role": "user", "parts": [CONTEXT, {"text": "make a file"}]}
        status, chunks = _stream(srv, prompt)
        assert status == 200 and chunks[-1]["candidates"][0]["finishReason"] == "STOP"
        parts = _parts(chunks)
        assert parts[0] == {"text": "hmm", "thought": True}
        assert "".join(p.get("text", "") for p in parts[1:]) == "I will."
        call = parts[-1]["functionCall"]
        assert (call["name"], call["args"]["command"]) == ("run_shell_command", "touch x")
        model = {"role": "model", "parts": parts}
        result = {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command"}}]}
        _, chunks = _stream(srv, prompt, model, result)
        assert "".join(p.get("text", "") for p in _parts(chunks)) == "made"
        assert chunks[-1]["usageMetadata"]["promptTokenCount"] == 100
        assert srv.prompts() == ["make a file"]
        assert srv.user_texts() == [["make a file"], ["make a file"]]  # the context left out
        assert srv.once_problems(["make a file"]) == []


def test_an_error_is_the_apis_error_body_and_gives_way_after_its_count():
    with gemini_server(Script({"broken": [Error(500, "boom", times=1), "fine"]})) as srv:
        prompt = {"role": "user", "parts": [{"text": "broken please"}]}
        status, (body,) = _stream(srv, prompt)
        assert status == 500 and body["error"] == {"code": 500, "message": "boom",
                                                   "status": "INTERNAL"}  # fmt: skip
        status, chunks = _stream(srv, prompt)
        assert status == 200 and _parts(chunks)[0]["text"] == "fine"


def test_side_requests_never_take_a_scripted_step():
    hold = Hold()
    with gemini_server(Script({"hello": hold})) as srv:
        url = f"{srv.url}/v1beta/models/gemini-2.5-flash-lite:generateContent"
        body = {"contents": [{"role": "user", "parts": [{"text": "hello"}]}],
                "generationConfig": {"responseJsonSchema": {"properties": {"model_choice": {}}}}}  # fmt: skip
        status, (resp,) = _post(url, body)
        text = resp["candidates"][0]["content"]["parts"][0]["text"]
        assert status == 200 and json.loads(text) == {"model_choice": "flash"}
        assert not hold.started.is_set() and srv.requests[-1].answer == "side"
        status, (count,) = _post(url.replace("generateContent", "countTokens"), body)
        assert count == {"totalTokens": 100}
