"""Drift counters, kept in the store so a server restart does not reset them.

``lost`` and ``repaired`` count agents seen lost and repaired since the store was
created; each bump is written in the transaction of the status change it counts
(so a crash either keeps both or neither). ``orphan_agent_panes`` and
``unmarked_panes`` are what the last reconciliation found. Every counter carries
``at``: when it last took its value.
"""

from __future__ import annotations

import time

from orcr_core.store.models import Drift, db

COUNTS = ("lost", "repaired")
GAUGES = ("orphan_agent_panes", "unmarked_panes")
NAMES = COUNTS + GAUGES


def bump(name: str, n: int = 1) -> None:
    """Add ``n`` to a count. Call it inside the transaction of what it counts."""
    if name not in COUNTS:
        raise ValueError(f"unknown drift count {name!r}; known: {', '.join(COUNTS)}")
    now = time.time()
    Drift.insert(name=name, value=n, at=now).on_conflict(
        conflict_target=[Drift.name], update={Drift.value: Drift.value + n, Drift.at: now}
    ).execute()


def measure(values: dict[str, int]) -> None:
    """Record the gauges; ``at`` moves only when a value changes, and an unchanged
    set costs no write transaction (a steady fleet writes nothing)."""
    unknown = set(values) - set(GAUGES)
    if unknown:
        raise ValueError(f"unknown drift gauge(s) {sorted(unknown)}; known: {', '.join(GAUGES)}")
    now = snapshot()
    changed = {k: v for k, v in values.items() if now[k][0] != v or now[k][1] is None}
    if not changed:
        return
    with db.atomic("IMMEDIATE"):
        at = time.time()
        for name, value in changed.items():
            Drift.insert(name=name, value=value, at=at).on_conflict(
                conflict_target=[Drift.name], update={Drift.value: value, Drift.at: at}
            ).execute()


def snapshot() -> dict[str, tuple[int, float | None]]:
    """Every counter as ``(value, at)``; ``(0, None)`` for one never written."""
    rows = {d.name: (d.value, d.at) for d in Drift.select()}
    return {name: rows.get(name, (0, None)) for name in NAMES}
