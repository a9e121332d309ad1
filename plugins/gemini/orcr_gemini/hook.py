"""Gemini CLI's ``AfterAgent`` hook for orcr's agents: mark the turn's end in its transcript.

Gemini CLI writes no record when a turn ends (docs/providers/gemini.md). orcr's
agents run with this module as an ``AfterAgent`` command hook (a settings file of
their own, ``GEMINI_CLI_SYSTEM_SETTINGS_PATH``): Gemini CLI fires it when the model
answered with no tool call left to run, with ``{session_id, transcript_path,
prompt_response, ...}`` on stdin. It appends one line to that transcript::

    {"orcr": "turn_end", "session_id": "...", "timestamp": "..."}

Gemini CLI's own loader skips lines with neither ``id``, ``$set``, ``$rewindTo`` nor
``sessionId``, so a resumed session reads the file as before. The line is written
with one ``O_APPEND`` write, as Gemini CLI writes its own. It prints ``{}`` (no
decision) and always exits 0: a hook that fails must never stop the agent.
"""

from __future__ import annotations

import json
import os
import sys

MARK = "turn_end"


def main(stdin=None) -> int:
    try:
        data = json.load(stdin or sys.stdin)
        path = data.get("transcript_path")
        if isinstance(path, str) and path.endswith(".jsonl") and os.path.isfile(path):
            line = {"orcr": MARK, "session_id": data.get("session_id"),
                    "timestamp": data.get("timestamp")}  # fmt: skip
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, (json.dumps(line) + "\n").encode())
            finally:
                os.close(fd)
    except (OSError, ValueError, AttributeError):
        pass
    print("{}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
