"""Enters pressed after a turn began (issue 40 item 3), counted the same way by every
test that checks them: ``test_enter_at_load_claude.py`` and the playbook at scale.

A turn began at the earliest of the independent signs of it: the fake model API's
first request for the prompt, and for Claude Code its transcript's user record (its
own timestamp: Claude Code may write the record seconds later). Every Enter orcr
requested for a prompt (the first, and any pressed again) after that is one too many.
"""

from __future__ import annotations

import json
from datetime import datetime

#: the events of a key orcr sends for a prompt: the first Enter and any pressed again
ENTERS = ("prompt.enter_requested", "prompt.resubmit")


def accepted(real, session: str, text: str) -> float | None:
    """When Claude Code took the prompt holding ``text`` in ``session``: its user
    record's own timestamp (None when no record of it is found)."""
    for transcript in real.cli_home.glob(f"projects/*/{session}.jsonl"):
        for line in transcript.read_text().splitlines():
            r = json.loads(line)
            content = r.get("message", {}).get("content") if r.get("type") == "user" else None
            body = content if isinstance(content, str) else json.dumps(content)
            if content and text in body:
                return datetime.fromisoformat(r["timestamp"].replace("Z", "+00:00")).timestamp()
    return None


def late(events: list[dict], began: float) -> list[tuple[str, float]]:
    """The agent's Enters requested after ``began``: (event kind, seconds after)."""
    return [(e["kind"], round(e["ts"] - began, 2)) for e in events
            if e["kind"] in ENTERS and e["ts"] > began]  # fmt: skip


def resubmits(events: list[dict]) -> list[tuple[str, str | None]]:
    """orcr's decisions about pressing Enter again (``prompt.resubmit*``), with why."""
    return [(e["kind"], e["data"].get("reason")) for e in events
            if e["kind"].startswith("prompt.resubmit")]  # fmt: skip
