"""OpenCode's session store (a SQLite database) read as turns.

OpenCode 1.x keeps its sessions in SQLite (``opencode.db``, WAL mode), not in a
transcript file: a ``session`` row (``version`` is the CLI's), ``message`` rows
(``data`` JSON: ``role`` ``user``/``assistant``; an assistant's ``parentID`` is the
user message it answers, ``finish`` the model's finish reason, ``error`` when the
step failed, ``tokens`` what it spent) and ``part`` rows (``data`` JSON: ``type``
``text``/``reasoning``/``tool``/``step-start``/``step-finish``/...). Ids are
time-ordered (``msg_<time><random>``), so ``ORDER BY id`` is the order written.

A turn is a user message with a text part not marked ``synthetic`` and the
assistant messages answering it. It ends the way OpenCode's own loop ends
(``SessionPrompt.run`` in the CLI's source): the last assistant message has a
``finish`` other than ``tool-calls``/``unknown`` (completed; its text parts are
the final answer), or an ``error`` (``MessageAbortedError``: interrupted, else
errored with ``error.data.message``), or it finished with ``tool-calls`` and a
tool the person refused (``PermissionRejectedError``: OpenCode stops the loop;
interrupted). Otherwise the turn is open. See docs/providers/opencode.md.

The reader opens the database read-only and reads it again only when the
database or its WAL changed (size and mtime); it never holds a transaction open,
so OpenCode's checkpoints are never held back. Parts are read through SQLite's
JSON functions, so tool outputs (large) are never loaded.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from orcr_core.contracts import Turn, TurnState, Usage

NOT_DONE = ("tool-calls", "unknown")
ABORTED = "MessageAbortedError"
REJECTED = "The user rejected permission"

_PARTS = """SELECT message_id, json_extract(data, '$.type'), json_extract(data, '$.text'),
  json_extract(data, '$.synthetic'), json_extract(data, '$.ignored'),
  json_extract(data, '$.state.status'), substr(json_extract(data, '$.state.error'), 1, 200)
FROM part WHERE session_id = ? ORDER BY id"""


def db_path(path: str) -> str:
    """The database a transcript path names (the WAL file names its database)."""
    return path[: -len("-wal")] if path.endswith("-wal") else path


@dataclass
class Message:
    id: str
    info: dict[str, Any]
    texts: list[str] = field(default_factory=list)
    prompt: bool = False  # a user message with a text part of the person's
    rejected: bool = False  # a tool the person refused


def main_session(conn: sqlite3.Connection) -> tuple[str, str] | None:
    """(id, version) of the store's first top-level session: orcr gives each agent a
    database of its own, so that is the agent's (subagent sessions have a parent)."""
    row = conn.execute(
        "SELECT id, version FROM session WHERE parent_id IS NULL ORDER BY time_created, id LIMIT 1"
    ).fetchone()
    return (row[0], row[1]) if row else None


def read_messages(conn: sqlite3.Connection, session: str) -> list[Message]:
    messages: dict[str, Message] = {}
    for mid, data in conn.execute(
        "SELECT id, data FROM message WHERE session_id = ? ORDER BY id", (session,)
    ):
        try:
            info = json.loads(data)
        except ValueError:
            continue
        if isinstance(info, dict):
            messages[mid] = Message(mid, info)
    for mid, kind, text, synthetic, ignored, status, error in conn.execute(_PARTS, (session,)):
        msg = messages.get(mid)
        if msg is None:
            continue
        if kind == "text" and text and not ignored:
            if msg.info.get("role") == "user":
                msg.prompt = msg.prompt or not synthetic
            if not synthetic:
                msg.texts.append(text)
        elif kind == "tool" and status == "error" and (error or "").startswith(REJECTED):
            msg.rejected = True
    return list(messages.values())


def turns_of(messages: Iterable[Message]) -> list[Turn]:
    """Each prompt's turn, in order (the last may be open)."""
    opened: list[tuple[Message, list[Message]]] = []
    for msg in messages:
        role = msg.info.get("role")
        if role == "user" and msg.prompt:
            opened.append((msg, []))
        elif role == "assistant" and opened:
            parent = msg.info.get("parentID")
            for user, answers in reversed(opened):
                if user.id == parent:
                    answers.append(msg)
                    break
            else:
                opened[-1][1].append(msg)  # a synthetic user message's answer: the same turn
    turns = []
    for n, (_, answers) in enumerate(opened):
        turn = _turn(answers)
        if turn.status == "open" and n < len(opened) - 1:
            turn = Turn("interrupted", usage=turn.usage)  # a later prompt took over
        turns.append(turn)
    return turns


def _turn(answers: list[Message]) -> Turn:
    usage = _usage(answers)
    if not answers:
        return Turn("open")
    last = answers[-1].info
    error = last.get("error")
    if isinstance(error, dict):
        name = error.get("name") or "error"
        if name == ABORTED:
            return Turn("interrupted", usage=usage)
        data = error.get("data") if isinstance(error.get("data"), dict) else {}
        return Turn("errored", error=f"{name}: {data.get('message') or ''}".strip(), usage=usage)
    finish = last.get("finish")
    if finish and finish not in NOT_DONE:
        text = next(("\n".join(m.texts).strip() for m in reversed(answers) if m.texts), "")
        return Turn("completed", final_text=text or None, usage=usage)
    completed = (last.get("time") or {}).get("completed")
    if finish == "tool-calls" and completed and answers[-1].rejected:
        return Turn("interrupted", error="a tool call was refused", usage=usage)
    return Turn("open")


def _usage(answers: list[Message]) -> Usage | None:
    """The sum of the turn's assistant messages' ``tokens`` (OpenCode's ``input`` is
    the uncached input; reasoning counts as output)."""
    if not answers:
        return None
    total = [0, 0, 0, 0]
    model = None
    for m in answers:
        t = m.info.get("tokens") if isinstance(m.info.get("tokens"), dict) else {}
        cache = t.get("cache") if isinstance(t.get("cache"), dict) else {}
        for i, v in enumerate(
            (
                t.get("input"),
                (t.get("output") or 0) + (t.get("reasoning") or 0),
                cache.get("read"),
                cache.get("write"),
            )
        ):
            total[i] += int(v or 0)
        model = m.info.get("modelID") or model
    return Usage(*total, model=model)


def state_of(turns: list[Turn], version: str | None) -> TurnState:
    if not turns:
        return TurnState("idle", (), version)
    return TurnState("working" if turns[-1].status == "open" else "idle", tuple(turns), version)


class StoreReader:
    """A :class:`orcr_core.contracts.TranscriptReader` over one OpenCode database
    (``path``: the database or its ``-wal`` file)."""

    def __init__(self, path: str):
        self.path = path
        self.db = db_path(path)
        self._seen: tuple | None = None
        self._state = TurnState("unknown")
        self.session: str | None = None

    def _signature(self) -> tuple | None:
        sig = []
        for p in (self.db, self.db + "-wal"):
            try:
                st = os.stat(p)
                sig.append((st.st_size, st.st_mtime_ns))
            except OSError:
                if p == self.db:
                    return None
                sig.append(None)
        return tuple(sig)

    def poll(self) -> TurnState:
        sig = self._signature()
        if sig is None:
            return self._state
        if sig == self._seen:
            return self._state
        try:
            conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=2.0)
        except sqlite3.Error:
            return self._state
        try:
            found = main_session(conn)
            if found is None:
                self._seen = sig
                return self._state
            self.session, version = found
            state = state_of(turns_of(read_messages(conn, self.session)), version)
        except sqlite3.Error:  # being created, or locked past the timeout: next poll
            return self._state
        finally:
            conn.close()
        self._seen, self._state = sig, state
        return state
