"""Open pane closes whose pane is gone: settled, so no intent stays open for good.

Every close is an intent/applied pair (``pipeline.close_pane``). When the
applied's commit fails after the multiplexer closed the pane (a full disk
refusing the COMMIT), the intent stays open. A close of a row's own pane is
settled by the monitor as it ends or loses the row (``panes._vanished``, which
reads the open close's ``why``). Every other close — a restored pane
``rematch.lose`` closed, a late pane of an ended row or of a launch a resume
replaced — is settled here, by reconciliation: ``pane.close_applied`` with
``gone: true`` once no pane carries that id and the row's marks.

At server start nothing else is closing, so a gone pane's close is settled at
once. The periodic pass settles only an intent it found open with its pane gone
on its previous pass too (``timings.reconcile_every`` apart): a close the
multiplexer has just done is still writing its own applied.
(Soak seed 2832 on herdr: ``w1/answer_34``'s close of its restored pane.)
"""

from __future__ import annotations

import json

from orcr_core import dirs
from orcr_core.store import events
from orcr_core.store.models import ACTIVE, Agent, db

KINDS = ("pane.close_requested", "pane.close_applied")
#: written out, not bound: SQLite uses a partial index only for a WHERE it can
#: see implies the index's own
_IS_CLOSE = "kind IN ('pane.close_requested', 'pane.close_applied')"

#: the seqs of intents the last periodic pass found open with their pane gone
_gone_before: set[int] = set()


def _open() -> list[tuple[int, str, dict]]:
    """(seq, agent uuid, data) of each agent's last close event that is an intent.

    SQLite returns the bare columns of the row holding ``MAX(seq)``; the
    partial index ``event_pane_close`` keeps this a read of close events only."""
    rows = db.execute_sql(
        f"SELECT MAX(seq), agent, kind, data FROM event WHERE {_IS_CLOSE} "
        "AND agent IS NOT NULL GROUP BY agent"
    ).fetchall()
    return [
        (seq, uuid, json.loads(data or "{}")) for seq, uuid, kind, data in rows if kind == KINDS[0]
    ]


def _last(uuid: str) -> tuple[int, str] | None:
    """(seq, kind) of the agent's last close event."""
    return db.execute_sql(
        f"SELECT seq, kind FROM event WHERE agent = ? AND {_IS_CLOSE} ORDER BY seq DESC LIMIT 1",
        (uuid,),
    ).fetchone()


def _gone(row: Agent | None, pane_id: str | None, by_id: dict) -> bool:
    """No pane carries ``pane_id`` with this instance's id and one of the row's tokens."""
    pane = by_id.get(pane_id)
    if pane is None or row is None:
        return pane is None
    tokens = {row.launch_token, *(row.past_tokens or "").split()} - {None, ""}
    return pane.instance != dirs.instance_id() or pane.launch_token not in tokens


def settle(snap, at_start: bool) -> int:
    """Settle the open closes of panes ``snap`` no longer has; returns how many."""
    global _gone_before
    by_id = {p.pane_id: p for p in snap}
    found: set[int] = set()
    settled = 0
    for seq, uuid, data in _open():
        row = Agent.get_or_none(Agent.uuid == uuid)
        pane_id = data.get("pane_id")
        if row is not None and row.status in ACTIVE and pane_id == row.pane_id:
            continue  # the row's own pane: the monitor settles it as it ends the row
        if not _gone(row, pane_id, by_id):
            continue
        found.add(seq)
        if not at_start and seq not in _gone_before:
            continue  # seen once: the closer may still be writing its applied
        with db.atomic("IMMEDIATE"):
            if _last(uuid) != (seq, KINDS[0]):
                continue  # settled (or closed again) meanwhile
            events.emit(
                "pane.close_applied",
                uuid,
                path=row.path if row is not None else data.get("path"),
                pane_id=pane_id,
                gone=True,
            )
            settled += 1
    _gone_before = found
    return settled
