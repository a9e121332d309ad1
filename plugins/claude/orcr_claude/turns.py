"""Claude Code transcript records -> turns (TRANSCRIPTS.md sections 1.2-1.7).

Fed one record at a time in file order (timestamps are not ordered; file
position is). The rules, and why:

* Sidechain lines (``isSidechain: true``, subagents written inline by 1.0.x)
  are dropped: they have their own assistant messages and end_turns.
* A turn starts at a main-chain ``user`` record that is a prompt: not a tool
  result, not ``isMeta``, not an interrupt marker, not a compact summary, not
  local-command or bash-mode output. ``<task-notification>`` starts a turn
  (a background task woke the agent), except when the turn it follows ended
  with background agents still running (``turn_duration``'s
  ``pendingBackgroundAgentCount``, 2.1.332 runs every subagent in the
  background): that turn is not over, the notification continues it, and its
  answer is the one given once no background agent is left. A
  ``<command-name>`` line is held as a
  *pending command*: it becomes a turn when an ``isMeta`` expansion (``/init``)
  or an assistant line follows, and is dropped when local-command output
  follows (``/mcp``, ``/model``).
* Assistant lines are grouped into responses by ``message.id`` (one line per
  content block). The turn's outcome is read from its last response:
  interrupt marker after it -> ``interrupted``; an API error message
  (``isApiErrorMessage`` / ``error``), ``system/error`` or an api_error retry
  that gave up -> ``errored``; text and no ``tool_use`` -> ``completed`` with
  the response's non-blank text blocks, one per line, in file order; an end
  marker (below) with no response at all (the model answered nothing) ->
  ``completed`` without text.
* An answer cut at the output limit (``stop_reason: "max_tokens"``, text and no
  tool) is resumed by Claude Code in the same turn (an ``isMeta`` "Output token
  limit hit" prompt, 2.1.3xx): the next response continues it, and the final
  answer is both texts run together.
* ``stop_reason`` is not trusted (null on every line in 2.1.38). A text-only
  last response is *provisional* while the file may still be growing (its
  ``tool_use`` line can follow within a few hundred ms): it is confirmed by a
  ``stop_hook_summary``/``turn_duration`` line after it, by ``settle`` seconds
  of quiet, or by ``settle_end_turn`` seconds of quiet when the version writes
  ``stop_reason: "end_turn"``; a turn that launched a background agent only by its
  ``turn_duration`` (or ``LAUNCHED_QUIET`` seconds of quiet): read before it, a
  turn whose agents still run went idle. A one-shot parse passes ``settle=0``. Once
  confirmed, only turn activity (an assistant line, a tool result) reopens it:
  Claude Code 2.1.299+ compacts a conversation left idle (over
  ``CLAUDE_CODE_IDLE_COMPACT_MIN_TOKENS``, 200K, after 0.9 of the 1 h prompt-cache
  TTL: about 54 min) by appending a ``compact_boundary``, an ``isCompactSummary``
  user line, ``attachment`` lines and a ``system/informational`` notice, with no
  prompt: no turn, and the file growing must not make the idle turn look open.

Usage: a turn's usage is the sum of its assistant messages' ``usage``
(``input_tokens``, ``output_tokens``, ``cache_read_input_tokens``,
``cache_creation_input_tokens``), each message counted once (Claude Code repeats
``usage`` on every line of a message; the last line's counts). Subagents count
toward the turn that ran them: inline sidechain messages (1.0.x) by their own
``usage``; a subagent run as a tool (2.x, its transcript in ``subagents/``) by
the tool result's ``toolUseResult.usage``; a background agent by the
``<subagent_tokens>`` total of its ``<task-notification>`` (only a total is
written: it counts as input). The model is the last main-chain message's.

Blocked: a pending permission prompt writes nothing (section 1.5), so what the
transcript can show is limited to

* determinable: a pending ``AskUserQuestion`` / ``ExitPlanMode`` tool_use
  (those tools always wait on the human);
* a labelled guess (when ``blocked_after`` is set): the last response's tool
  calls have no result, the file has been quiet for ``blocked_after`` seconds,
  the recorded ``permissionMode`` (2.1.x) allows prompts, and some pending tool
  is one that asks. A long-running Bash looks exactly the same; use a
  ``PermissionRequest`` hook for certainty.
"""

from __future__ import annotations

import re
from typing import Any

from orcr_claude.records import Response, TurnSoFar, has_tool_result, text_of, usage_of, words
from orcr_core.contracts import Turn, TurnState, Usage

INTERRUPT_PREFIX = "[Request interrupted by user"
TASK_NOTIFICATION = "<task-notification>"
LOCAL_OUTPUT = ("<local-command-stdout>", "<local-command-stderr>")
NOT_PROMPTS = LOCAL_OUTPUT + (
    "<local-command-caveat>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
)
WAITS_ON_USER = frozenset({"AskUserQuestion", "ExitPlanMode"})
NEVER_ASKS = frozenset(
    {"Read", "Glob", "Grep", "LS", "NotebookRead", "TodoRead", "TodoWrite", "Task", "Agent"}
    | {"BashOutput", "TaskOutput", "KillShell", "KillBash"}
)
EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
NO_PROMPT_MODES = frozenset({"bypassPermissions", "dontAsk"})
END_MARKERS = frozenset({"stop_hook_summary", "turn_duration"})
FINAL_STOP_REASONS = frozenset({"end_turn", "stop_sequence", "max_tokens"})
LAUNCHED_QUIET = 60.0  # quiet that ends a turn that launched agents, with no turn_duration
SUBAGENT_TOKENS = re.compile(r"<subagent_tokens>(\d+)</subagent_tokens>")


class ClaudeTurns:
    """The record parser behind :class:`orcr_claude.provider.ClaudeProvider`'s reader."""

    def __init__(
        self,
        *,
        settle: float = 3.0,
        settle_end_turn: float = 0.5,
        blocked_after: float | None = 30.0,
    ):
        self.settle = settle
        self.settle_end_turn = min(settle_end_turn, settle)
        self.blocked_after = blocked_after
        self.version: str | None = None
        self.permission_mode: str | None = None
        self._closed: list[Turn] = []
        self._turn: TurnSoFar | None = None
        self._pending_command = False
        self._lines = 0

    # -- feeding -----------------------------------------------------------

    def feed(self, record: dict[str, Any]) -> None:
        self._lines += 1
        if record.get("isSidechain") is True:
            if record.get("type") == "assistant" and self._turn is not None:
                self._spend(self._turn, record, main=False)  # inline subagent (1.0.x)
            return
        kind = record.get("type")
        if kind in ("user", "assistant", "system", "progress"):
            version = record.get("version")
            if isinstance(version, str) and version:
                self.version = version  # the running CLI wrote the latest line
        if kind == "user":
            self._user(record)
        elif kind == "assistant":
            self._assistant(record)
        elif kind == "system":
            self._system(record)

    def _user(self, record: dict[str, Any]) -> None:
        mode = record.get("permissionMode")
        if isinstance(mode, str):
            self.permission_mode = mode
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        turn = self._turn
        if has_tool_result(content):
            if turn is not None:
                result = record.get("toolUseResult")
                if isinstance(result, dict):  # a subagent run as a tool (2.x): its usage
                    turn.add(usage_of(result.get("usage")))
                    if result.get("isAsync") is True or result.get("status") == "async_launched":
                        turn.launched = True
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        turn.pending.pop(block.get("tool_use_id"), None)
                turn.activity()
            return
        if "toolUseResult" in record or record.get("isCompactSummary"):
            return
        text, has_image = text_of(content)
        head = text.lstrip()
        if head.startswith(INTERRUPT_PREFIX):
            if turn is not None:
                turn.interrupted = True
            self._pending_command = False
            return
        if head.startswith(TASK_NOTIFICATION):
            spent = SUBAGENT_TOKENS.search(text)
            if turn is not None and spent:  # a background agent's total (counted as input)
                turn.add(Usage(input=int(spent.group(1))))
            if turn is not None and turn.background:
                turn.background = 0  # the turn it launched them from goes on
                turn.activity()
            else:
                self._start_turn()
            return
        if record.get("isMeta"):
            # A slash command's expansion makes it an agent turn; caveats do not.
            if self._pending_command and not head.startswith("<local-command-caveat>"):
                self._start_turn()
            return
        if head.startswith(NOT_PROMPTS):
            if head.startswith(LOCAL_OUTPUT):
                self._pending_command = False
            return
        if "<command-name>" in text:
            self._pending_command = True
            return
        if head or has_image:
            self._start_turn()

    def _assistant(self, record: dict[str, Any]) -> None:
        if self._pending_command or self._turn is None:
            self._start_turn()  # a confirmed slash command, or a file cut before its prompt
        turn = self._turn
        message = record.get("message")
        if not isinstance(message, dict):
            message = {}
        key = message.get("id") or record.get("uuid") or f"line-{self._lines}"
        response = turn.responses.pop(key, None)
        if response is None:
            response = Response()
            last = turn.last
            if last is not None and last.stop_reason == "max_tokens" and not last.tools:
                # Claude Code asks the model to resume an answer cut at the output limit:
                # the answer is the cut text and its continuation(s)
                response.cut_text = last.cut_text + "".join(last.texts)
        turn.responses[key] = response  # (re)inserted last: the newest response
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                response.texts.append(block["text"])
            elif block.get("type") == "tool_use":
                tool_id, name = str(block.get("id")), str(block.get("name"))
                response.tools[tool_id] = name
                turn.pending[tool_id] = name
        self._spend(turn, record, main=True)
        stop = message.get("stop_reason")
        response.stop_reason = stop if isinstance(stop, str) else None
        if record.get("isApiErrorMessage") or record.get("error"):
            response.api_error = True
        turn.activity()

    def _spend(self, turn: TurnSoFar, record: dict[str, Any], main: bool) -> None:
        message = record.get("message")
        usage = usage_of(message.get("usage")) if isinstance(message, dict) else None
        if usage is None:
            return
        turn.seen_usage = True
        key = message.get("id") or record.get("uuid") or f"line-{self._lines}"
        turn.spent[("" if main else "side:") + str(key)] = usage
        if main and isinstance(message.get("model"), str) and not message["model"].startswith("<"):
            turn.model = message["model"]

    def _system(self, record: dict[str, Any]) -> None:
        subtype = record.get("subtype")
        turn = self._turn
        if subtype == "local_command":
            self._pending_command = False
        elif turn is None:
            return
        elif subtype in END_MARKERS:
            turn.end_marker = True
            if subtype == "turn_duration":
                turn.duration_seen = True
                pending = record.get("pendingBackgroundAgentCount")
                turn.background = pending if isinstance(pending, int) and pending > 0 else 0
        elif subtype == "error":
            turn.error_tail = True
            turn.error_text = words(record.get("content")) or words(record.get("error"))
        elif subtype == "api_error":
            attempt, limit = record.get("retryAttempt"), record.get("maxRetries")
            if isinstance(attempt, int) and isinstance(limit, int) and attempt >= limit:
                turn.error_tail = True
                turn.error_text = words(record.get("error"))

    def _start_turn(self) -> None:
        if self._turn is not None:
            status, text = self._outcome(self._turn, quiet_for=float("inf"))
            # A new prompt ends the previous turn; one left open was abandoned.
            status = "interrupted" if status == "open" else status
            error = self._turn.error if status == "errored" else None
            self._closed.append(Turn(status, text, error, self._turn.usage()))
        self._turn = TurnSoFar()
        self._pending_command = False

    # -- reading -----------------------------------------------------------

    def _outcome(self, turn: TurnSoFar, quiet_for: float) -> tuple[str, str | None]:
        if turn.interrupted:
            return "interrupted", None
        last = turn.last
        if turn.error_tail or (last is not None and last.api_error):
            return "errored", None
        if last is None:
            # an answer with no content writes no assistant line at all (2.1.332 asks the
            # model once more, then ends the turn): only the end marker shows it ended
            return ("completed", None) if turn.end_marker else ("open", None)
        if last.tools:
            return "open", None
        text = last.answer()
        if not text:
            ended = turn.end_marker or last.stop_reason in FINAL_STOP_REASONS
            return ("completed", None) if ended else ("open", None)
        if turn.launched and not turn.duration_seen and self.settle:
            # its turn_duration says if agents still run (its stop hook can be seconds late)
            quiet = quiet_for >= max(self.settle, LAUNCHED_QUIET)
        else:
            quiet = quiet_for >= self.settle or (
                last.stop_reason == "end_turn" and quiet_for >= self.settle_end_turn
            )
        confirmed = turn.marker_ends or turn.settled or quiet
        if confirmed:
            # Records that are no turn activity (an idle compaction's boundary, summary and
            # notice, last-prompt lines) make the file grow: they must not reopen it
            turn.settled = True
            return "completed", text
        return "open", None

    def _blocked(self, turn: TurnSoFar, quiet_for: float) -> bool:
        last = turn.last
        if last is None:
            return False
        waiting = [name for tid, name in last.tools.items() if tid in turn.pending]
        if any(name in WAITS_ON_USER for name in waiting):
            return True
        if self.blocked_after is None or quiet_for < self.blocked_after:
            return False
        if self.permission_mode in NO_PROMPT_MODES:
            return False
        quiet_tools = NEVER_ASKS | (EDIT_TOOLS if self.permission_mode == "acceptEdits" else set())
        return any(name not in quiet_tools for name in waiting)

    def state(self, quiet_for: float) -> TurnState:
        turns = list(self._closed)
        state = "idle" if turns else "unknown"
        if self._turn is not None:
            status, text = self._outcome(self._turn, quiet_for)
            if status == "completed" and self._turn.background:
                status, text = "open", None  # its background agents will wake it again
            error = self._turn.error if status == "errored" else None
            turns.append(Turn(status, text, error, self._turn.usage()))
            if status == "open":
                state = "blocked" if self._blocked(self._turn, quiet_for) else "working"
            else:
                state = "idle"
        return TurnState(state=state, turns=tuple(turns), version=self.version)
