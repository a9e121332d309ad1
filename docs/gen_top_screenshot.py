"""Regenerate docs/top.svg: the orcr top screen with a populated fleet.

The screen is the real app; a static stream stands in for the server so the
picture is the same on every machine. Run: python docs/gen_top_screenshot.py
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from orcr_core.top.app import Snapshot, TopApp
from orcr_core.top.model import iso

DOCS = Path(__file__).resolve().parent
NOW = time.time()

FLEET = [
    # path, provider, status, seconds in status, turn, exit reason, answer
    ("nightly/r82c9s/review/file_1", "claude", "working", 95, 2, None, None),
    (
        "nightly/r82c9s/review/file_2",
        "claude",
        "idle",
        40,
        1,
        None,
        "No issues in file_2.py; two nits inline.",
    ),
    ("nightly/r82c9s/review/file_3", "codex", "working", 1260, 3, None, None),
    ("nightly/r82c9s/review/file_4", "claude", "queued", 12, 0, None, None),
    ("nightly/r82c9s/summary", "claude", "queued", 12, 0, None, None),
    ("docs/readme", "claude", "idle", 300, 1, None, "Rewrote the quick start; tests pass."),
    ("docs/changelog", "codex", "ended", 20, 2, "killed", "Drafted 0.2.0 notes."),
    ("fix/flaky_test", "codex", "working", 30, 1, None, None),
    ("fix/issue_412", "claude", "starting", 3, 0, None, None),
    ("fix/issue_415", "claude", "lost", 610, 4, None, "Patched the parser; waiting for CI."),
    ("scratch/echo_demo", "echo", "ended", 4, 1, "exited", "hello"),
]


class StaticSource:
    app: TopApp

    def start(self):
        agents = []
        for i, (path, provider, status, age, turn, reason, _answer) in enumerate(FLEET):
            since = iso(NOW - age)
            agents.append(
                {
                    "uuid": f"u{i}",
                    "path": path,
                    "provider": provider,
                    "status": status,
                    "exit_reason": reason,
                    "turn": turn,
                    "stalled": path == "nightly/r82c9s/review/file_3",
                    "created_at": since,
                    "started_at": since,
                    "turn_started_at": since,
                    "idle_since": since,
                    "ended_at": since,
                }
            )
        self.app.post_message(Snapshot({"snapshot_seq": 4182, "agents": agents}))
        return self

    def stop(self):
        pass

    def resnapshot(self):
        pass


LOOPS = [
    {
        "uuid": "l1",
        "name": "nightly",
        "status": "active",
        "cron": "0 3 * * *",
        "tz": "Europe/Paris",
        "next_fire_at": "2026-12-01T02:00:00Z",
        "running": 1,
        "pending": 0,
        "last_run": {"run_id": "r82c9s", "status": "ok"},
    }
]


class ShotApp(TopApp):
    def refresh_loops(self):
        self.model.set_loops(LOOPS)

    def refresh_status(self):
        self.model.set_status(
            {
                "caps": {"max": 8},
                "providers": {
                    "claude": {"live": 0, "cap": 5},
                    "codex": {"live": 0, "cap": 3},
                    "echo": {"live": 0, "cap": None},
                },
                "drift": {"lost": 1, "repaired": 2, "orphan_agent_panes": 0, "unmarked_panes": 1},
                "driver": {"name": "tmux", "error": None},
            }
        )

    def _ask_answers(self):
        for i, row in enumerate(FLEET):
            if row[6]:
                self.model.set_answer(f"u{i}", row[6])


async def main() -> None:
    source = StaticSource()
    app = ShotApp(Path("/nonexistent/orcr.sock"), source=source)
    source.app = app
    async with app.run_test(size=(132, 24)) as pilot:
        while not app.connected:
            await pilot.pause(0.01)
        app.refresh_view()
        app.select("nightly/r82c9s/review/file_2")
        await pilot.pause(0.2)
        path = app.save_screenshot("top.svg", path=str(DOCS))
    print(f"wrote {path}")


if __name__ == "__main__":
    asyncio.run(main())
