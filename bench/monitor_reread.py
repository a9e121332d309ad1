"""The monitor's re-read of the active rows after a write, per re-read: comparing
every row whole with its object (how it was, the baseline) against the revisions of
:class:`orcr_core.agents.active_rows.ActiveRows` (how it is), nothing moved, on a
real store of N idle rows.

    python bench/monitor_reread.py [N ...]     (default: 40 250)
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from orcr_core.agents.active_rows import ActiveRows
from orcr_core.agents.monitor import MONITORED
from orcr_core.store import db as store_db
from orcr_core.store.models import Agent, db

ROUNDS = 200


def _compare_every_row(sql: str, params: tuple, fields: list, old: dict) -> dict:
    names = [name for name, _ in fields]
    rows = {}
    for raw in db.execute_sql(sql, params):
        before = old.get(raw[1])
        if before is not None and all(
            before.__data__.get(k) == v for k, v in zip(names, raw, strict=True)
        ):
            rows[raw[1]] = before
            continue
        rows[raw[1]] = Agent.from_row(fields, raw)
    return rows


def main(sizes: list[int]) -> None:
    store_db.open_store(Path(tempfile.mkdtemp()) / "store.db")
    sql, params, fields = Agent.compiled(
        "monitored", lambda: Agent.select().where(Agent.status.in_(MONITORED))
    )
    for n in sizes:
        Agent.delete().execute()
        for i in range(n):
            Agent.create(
                uuid=f"u{i}", path=f"p/{i}", name=str(i), provider="echo", queue_seq=i,
                cwd="/", created_at=0.0, status="idle",
            )  # fmt: skip
        old = _compare_every_row(sql, params, fields, {})
        t = time.perf_counter()
        for _ in range(ROUNDS):
            _compare_every_row(sql, params, fields, old)
        before = (time.perf_counter() - t) / ROUNDS * 1e3
        rows = ActiveRows()
        cur, _ = rows.read(sql, params, fields, {})
        t = time.perf_counter()
        for _ in range(ROUNDS):
            rows.read(sql, params, fields, cur)
        after = (time.perf_counter() - t) / ROUNDS * 1e3
        print(
            f"N = {n}: every row compared {before:.3f} ms, revisions {after:.3f} ms "
            f"per re-read (ratio {after / before:.2f})"
        )
    store_db.close_store()


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [40, 250])
