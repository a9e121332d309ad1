"""Budgets: a scope's tokens per window hold admission (server side: imports peewee).

``[budget.<scope>]`` sets ``tokens`` and ``per`` (:mod:`orcr_core.usage.window`).
A scope is ``all``, an installed provider's name, or an agent path prefix
(``nightly`` covers ``nightly`` and ``nightly/**``). A scope's spend is the sum
of the ``turn_usage`` tokens (input + output + cache read + cache write, as
``orcr usage`` counts them) of the turns that ended in its window. While the
spend is at or over the budget, queued agents in the scope stay queued: the
promotion pass (:func:`orcr_core.agents.queue.promote`) measures the spends in
its own transaction and passes over a held row, as over a row whose provider is
at its cap, so the order within a scope stays FIFO. Nothing is kept in memory:
after a crash the spends are read again from the store. Live agents are never
stopped by a budget.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orcr_core.config import Config
from orcr_core.store import events
from orcr_core.store.models import db
from orcr_core.usage import window

if TYPE_CHECKING:
    from orcr_core.server.context import ServerContext

_TOKENS = "input + output + cache_read + cache_write"


@dataclass
class Scope:
    name: str
    kind: str  # all, provider or path
    tokens: int
    per: str

    def matches(self, provider: str, path: str) -> bool:
        if self.kind == "all":
            return True
        if self.kind == "provider":
            return provider == self.name
        return path == self.name or path.startswith(self.name + "/")

    def where(self) -> tuple[str, tuple]:
        if self.kind == "all":
            return "1", ()
        if self.kind == "provider":
            return "provider = ?", (self.name,)
        # the prefix is a path ([a-z0-9_/]), so GLOB needs no escaping
        return "(path = ? OR path GLOB ?)", (self.name, self.name + "/*")


@dataclass
class Spend:
    scope: Scope
    spent: int
    start: float
    until: float | None  # when the spend falls under the budget (None: only if raised)

    @property
    def over(self) -> bool:
        return self.spent >= self.scope.tokens

    def reason(self) -> str:
        s = self.scope
        return f"budget {s.name}: {self.spent}/{s.tokens} tokens until {window.clock(self.until)}"

    def as_dict(self) -> dict:
        s = self.scope
        return {
            "scope": s.name,
            "kind": s.kind,
            "tokens": s.tokens,
            "per": s.per,
            "spent": self.spent,
            "start": self.start,
            "until": self.until,
            "over": self.over,
        }


def scopes(config: Config, providers: Iterable[str]) -> list[Scope]:
    names = set(providers)
    out = []
    for name, b in sorted(config.budgets().items()):
        kind = "all" if name == "all" else "provider" if name in names else "path"
        out.append(Scope(name, kind, b["tokens"], b["per"]))
    return out


def measure(scope: Scope, now: float) -> Spend:
    """The scope's spend in the window holding ``now`` and when it frees."""
    start = window.start(scope.per, now)
    cond, args = scope.where()
    spent = db.execute_sql(
        f"SELECT COALESCE(SUM({_TOKENS}), 0) FROM turn_usage WHERE ended_at >= ? AND {cond}",
        (start, *args),
    ).fetchone()[0]
    until = None
    if spent >= scope.tokens and scope.tokens > 0:
        length = window.rolling(scope.per)
        if length is None:
            until = window.calendar(scope.per, now)[1]
        else:  # the oldest turns leave the window first: when is enough of it gone?
            left = spent
            rows = db.execute_sql(
                f"SELECT ended_at, {_TOKENS} FROM turn_usage WHERE ended_at >= ? AND {cond} "
                "ORDER BY ended_at",
                (start, *args),
            )
            for ended_at, tokens in rows:
                left -= tokens
                if left < scope.tokens:
                    until = ended_at + length
                    break
    return Spend(scope, spent, start, until)


class Gate:
    """The budgets as one promotion pass (or one status read) sees them."""

    def __init__(self, config: Config, providers: Iterable[str]):
        self.scopes = scopes(config, providers)
        self.spends: list[Spend] = []

    def __bool__(self) -> bool:
        return bool(self.scopes)

    def measure(self, now: float | None = None) -> Gate:
        now = time.time() if now is None else now
        self.spends = [measure(s, now) for s in self.scopes]
        return self

    def holds(self, provider: str, path: str) -> Spend | None:
        """The first exhausted budget whose scope covers the agent, if any."""
        for spend in self.spends:
            if spend.over and spend.scope.matches(provider, path):
                return spend
        return None

    def announce(self, spend: Spend) -> None:
        """``budget.reached``, once per scope and window: the first time this budget
        holds a queued agent (the notification rule ``budget_reached``). Called in
        the promotion's transaction; the event log itself says whether it was."""
        key = (spend.scope.name, spend.start)
        if key in _ANNOUNCED:
            return
        said = db.execute_sql(
            "SELECT 1 FROM event WHERE kind = 'budget.reached' "
            "AND json_extract(data, '$.scope') = ? AND json_extract(data, '$.start') = ? LIMIT 1",
            key,
        ).fetchone()
        if not said:
            s = spend.scope
            events.emit(
                "budget.reached",
                scope=s.name,
                tokens=s.tokens,
                per=s.per,
                spent=spend.spent,
                start=spend.start,
                until=spend.until,
                reason=spend.reason(),
            )
        _ANNOUNCED.add(key)

    def wake_at(self) -> float | None:
        """When an exhausted budget frees (the queue worker looks again then)."""
        times = [s.until for s in self.spends if s.over and s.until is not None]
        return min(times) if times else None


#: (scope, window start) pairs already announced by this server (the event log is the truth)
_ANNOUNCED: set[tuple[str, float]] = set()

#: seconds the first promotion pass after a start waits for the monitor's first
#: read of the transcripts (a turn that ended while the server was down counts first)
FIRST_PASS_WAIT = 30.0


def gate(server: ServerContext) -> Gate | None:
    """The queue worker's gate, or None when no budget is set. After a restart
    the first pass waits until the monitor has read every transcript once: a turn
    whose end (and usage) a crash kept out of the store is counted before anything
    in its scope can be promoted past the budget."""
    g = Gate(server.config, server.registry.providers)
    if not g:
        return None
    server.monitor.first_pass.wait(FIRST_PASS_WAIT)
    return g


def mark_held(server: ServerContext, agents: list[dict]) -> None:
    """Set ``held`` on the queued agents (API dicts) a spent budget holds."""
    queued = [a for a in agents if a["status"] == "queued"]
    g = Gate(server.config, server.registry.providers) if queued else None
    if not g:
        return
    g.measure()
    for a in queued:
        spend = g.holds(a["provider"], a["path"])
        if spend is not None:
            a["held"] = spend.reason()


def status(server: ServerContext) -> list[dict]:
    """Every budget's spend for ``server status``, with how many queued agents it holds."""
    g = Gate(server.config, server.registry.providers)
    if not g:
        return []
    g.measure()
    held: dict[str, int] = {}
    rows = db.execute_sql("SELECT provider, path FROM agent WHERE status = 'queued'")
    for provider, path in rows:
        spend = g.holds(provider, path)
        if spend is not None:
            held[spend.scope.name] = held.get(spend.scope.name, 0) + 1
    out = []
    for spend in g.spends:
        d = spend.as_dict()
        d["held"] = held.get(spend.scope.name, 0)
        d["reason"] = spend.reason() if spend.over else None
        out.append(d)
    return out
