"""Fake model APIs for driving the real provider CLIs: scriptable, local, recorded.

Four servers speak just enough of the real wire protocols for Claude Code,
Codex, Gemini CLI and the OpenAI-compatible CLIs to run a conversation against them,
with streaming (SSE):

- :func:`anthropic_server` — the Anthropic Messages API (``POST /v1/messages``,
  ``stream: true``), plus the side endpoints Claude Code calls
  (``/v1/messages/count_tokens``, ``/v1/models``);
- :func:`responses_server` — the OpenAI Responses API (``POST /v1/responses``,
  ``stream: true``), plus ``/v1/models``;
- :func:`chat_server` — the OpenAI Chat Completions API (``POST
  /v1/chat/completions``, streamed ``data:`` chunks), for OpenAI-compatible
  providers with a base URL (OpenCode, pi), plus ``/v1/models``;
- :func:`gemini_server` — the Gemini API (``POST /v1beta/models/<model>:streamGenerateContent``,
  ``alt=sse``), for Gemini CLI (``GOOGLE_GEMINI_BASE_URL``).

All run in-process on 127.0.0.1 with an ephemeral port, answer from a
:class:`Script` and record every request::

    from fake_models import Script, Text, Tool, anthropic_server

    script = Script({"hello": "Hi there", "list files": [Tool.bash("ls"), "listed"]})
    with anthropic_server(script) as srv:
        env = {"ANTHROPIC_BASE_URL": srv.url, "ANTHROPIC_API_KEY": srv.api_key}
        ...
        assert srv.prompts() == ["hello", "list files"]
        assert srv.once_problems(["hello", "list files"]) == []

Exactly once, from what the model was sent: every conversation request keeps its
user texts (``Request.user_texts``: the whole conversation, the CLI's reminders and
context messages left out). ``srv.received(prompt)`` gives, per request carrying
it, how often it occurs (a prompt pasted twice into one composer counts 2 in one
text; one sent as a second user message counts 2 in every later request);
``srv.turn_starts(prompt)`` how many turns began with it; ``srv.once_problems(
prompts)`` lists what breaks "each received exactly once" (empty when none).
The fake CLIs (tests/fakes) send their turns to these servers when
``ANTHROPIC_BASE_URL`` (claude) or ``OPENAI_BASE_URL`` (codex) is set.

See :mod:`fake_models.script` for what a script can answer (text, slow
streaming, a held stream, a tool call, a subagent, an error, a rate limit, a
message of thinking/text/tool parts, a stream that fails) and how it says it
(:class:`Wire`: model id, ``ping`` events, lean events, id formats).
"""

from fake_models.anthropic import anthropic_server
from fake_models.gemini import gemini_server
from fake_models.openai_chat import chat_server
from fake_models.openai_responses import responses_server
from fake_models.script import (
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
)

__all__ = [
    "Error",
    "Hold",
    "RateLimit",
    "Refusal",
    "Reply",
    "Script",
    "StreamError",
    "Text",
    "Thinking",
    "Tool",
    "Wire",
    "anthropic_server",
    "gemini_server",
    "chat_server",
    "responses_server",
]
