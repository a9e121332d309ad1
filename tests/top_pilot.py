"""Helpers for driving ``orcr top`` headlessly with Textual's Pilot (test_top_*.py)."""

from __future__ import annotations

import time
from contextlib import asynccontextmanager

from orcr_core.top.app import TopApp

SIZE = (160, 40)


async def wait_for(pilot, cond, what: str, timeout: float = 30.0):
    """Let the app run until ``cond()`` holds (a condition, never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        await pilot.pause(0.05)
    raise AssertionError(f"{what} not reached in {timeout}s")


@asynccontextmanager
async def connected(socket):
    """``orcr top`` on the server at ``socket``, once its first snapshot is in:
    yields ``(app, pilot)``."""
    app = TopApp(socket)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.connected, "the first snapshot")
        yield app, pilot


def row(app: TopApp, path: str):
    return next((r for r in app.model.rows.values() if r.path == path), None)


def status_of(app: TopApp, path: str) -> str | None:
    r = row(app, path)
    return r.status if r else None
