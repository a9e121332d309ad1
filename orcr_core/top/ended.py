"""``orcr top``'s ``e``: show the agents that ended before the view started.

The live view follows a ``watch.open`` snapshot of active agents, so an agent that
ended before top started (or while it was disconnected) has no row, and ``r``
(resume) nothing to act on. ``e`` fetches the ``ENDED_SHOWN`` most recently ended
agents (``agent.list {ended: N}``) and adds them as ended rows; ``e`` again takes
the fetched rows away (rows that ended while top watched stay, as before).
"""

from __future__ import annotations

from textual import work

from orcr_core.sdk.client import ServerError

#: how many recently ended agents ``e`` shows (the bound)
ENDED_SHOWN = 50


class EndedToggle:
    """Mixed into :class:`orcr_core.top.app.TopApp` (its model, requests, notify)."""

    show_ended = False
    _fetched_ended: set[str] = set()

    def action_ended(self) -> None:
        self.show_ended = not self.show_ended
        if self.show_ended:
            self._fetch_ended()
            return
        for uuid in self._fetched_ended:
            row = self.model.rows.get(uuid)
            if row is not None and row.status == "ended":
                del self.model.rows[uuid]
        self._fetched_ended = set()
        self.notify("recently ended agents hidden (e shows them)", timeout=3)
        self.refresh_view()

    @work(thread=True, exclusive=True, group="ended")
    def _fetch_ended(self) -> None:
        try:
            agents = self.requests.call("agent.list", ended=ENDED_SHOWN)["agents"]
        except (ServerError, OSError) as exc:
            self.call_from_thread(
                self.notify, f"ended agents: {getattr(exc, 'message', exc)}", severity="error"
            )
            return
        self.call_from_thread(self._show_ended, agents)

    def _show_ended(self, agents: list[dict]) -> None:
        if not self.show_ended:
            return  # toggled off meanwhile
        added = set()
        for a in agents:
            if a["uuid"] not in self.model.rows:
                self.model.set_final(a)
                added.add(a["uuid"])
        self._fetched_ended = self._fetched_ended | added
        self.notify(
            f"{len(agents)} recently ended agents shown (at most {ENDED_SHOWN}; e hides them)",
            timeout=3,
        )
        self._ask_answers()
        self.refresh_view()
