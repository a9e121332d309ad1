"""``orcr usage``: sums of the ``turn_usage`` rows (server side: imports peewee).

A prefix is a scope: ``nightly`` covers ``nightly`` and ``nightly/**`` (a loop's
whole cost), never ``nightly2``. Rows are grouped by agent path, provider,
model, loop (the first path segment when a loop of that name exists, else
``-``) or day (the turn's end, the server's local date).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from orcr_core.store.models import Loop, TurnUsage
from orcr_core.usage.record import FIELDS

BY = ("path", "provider", "model", "loop", "day")


def _in_scope(prefix: str | None):
    if not prefix:
        return True
    prefix = prefix.strip("/")
    return (TurnUsage.path == prefix) | TurnUsage.path.startswith(prefix + "/")


def rows(prefix: str | None = None, since: float | None = None) -> Iterable[TurnUsage]:
    query = TurnUsage.select().where(_in_scope(prefix))
    if since is not None:
        query = query.where(TurnUsage.ended_at >= since)
    return query.order_by(TurnUsage.ended_at, TurnUsage.id)


def summarize(
    prefix: str | None = None,
    since: float | None = None,
    by: str | None = None,
    prices: dict[str, dict[str, float]] | None = None,
) -> dict:
    """``{"groups": [{key, input, output, cache_read, cache_write, tokens, turns, agents,
    cost}], "total": {...}}``; ``cost`` (per ``prices[model][field]`` per million
    tokens) is None when some row's model has no price."""
    if by is not None and by not in BY:
        raise ValueError(f"--by {by!r}: group by one of {', '.join(BY)}")
    loops = {name for (name,) in Loop.select(Loop.name).tuples()} if by == "loop" else set()
    prices = prices or {}
    groups: dict[str, dict] = {}
    total = _blank("total")
    for r in rows(prefix, since):
        key = _key(r, by, loops)
        for g in (groups.setdefault(key, _blank(key)), total):
            _add(g, r, prices)
    out = [_done(g) for g in sorted(groups.values(), key=lambda g: g["key"])]
    return {"groups": out if by else [], "total": _done(total), "by": by}


def _key(r: TurnUsage, by: str | None, loops: set[str]) -> str:
    if by == "path":
        return r.path
    if by == "provider":
        return r.provider
    if by == "model":
        return r.model or "-"
    if by == "loop":
        first = r.path.split("/", 1)[0]
        return first if first in loops else "-"
    if by == "day":
        return time.strftime("%Y-%m-%d", time.localtime(r.ended_at))
    return "total"


def _blank(key: str) -> dict:
    return {
        "key": key,
        **{f: 0 for f in FIELDS},
        "turns": 0,
        "agents": set(),
        "cost": 0.0,
        "first": None,
        "last": None,
    }


def _add(g: dict, r: TurnUsage, prices: dict) -> None:
    for f in FIELDS:
        g[f] += getattr(r, f)
    g["turns"] += 1
    g["agents"].add(r.agent)
    g["first"] = r.ended_at if g["first"] is None else min(g["first"], r.ended_at)
    g["last"] = r.ended_at if g["last"] is None else max(g["last"], r.ended_at)
    price = prices.get(r.model or "")
    if price is None or g["cost"] is None:
        g["cost"] = None  # a model without a price: no honest estimate
    else:
        g["cost"] += sum(getattr(r, f) * float(price.get(f, 0)) for f in FIELDS) / 1e6


def _done(g: dict) -> dict:
    g["agents"] = len(g["agents"])
    g["tokens"] = sum(g[f] for f in FIELDS)
    if g["cost"] is not None:
        g["cost"] = round(g["cost"], 6)
    return g


_BY_CHILD = (
    "SELECT CASE WHEN instr(rest, '/') > 0 THEN substr(rest, 1, instr(rest, '/') - 1) "
    "ELSE rest END AS child, SUM(input), SUM(output), SUM(cache_read), SUM(cache_write), "
    "COUNT(*) FROM (SELECT substr(path, ?) AS rest, input, output, cache_read, cache_write "
    "FROM turn_usage WHERE path GLOB ?) GROUP BY child"
)


def by_child(prefix: str) -> dict[str, dict]:
    """Totals per next path segment under ``prefix`` (a loop's runs: ``nightly`` ->
    ``{run_id: {input, output, cache_read, cache_write, tokens, turns}}``), one query.
    A path is ``[a-z0-9_/]``, so the GLOB needs no escaping."""
    from orcr_core.store.models import db

    prefix = prefix.strip("/")
    out = {}
    for child, *values, turns in db.execute_sql(
        _BY_CHILD, (len(prefix) + 2, prefix + "/*")
    ).fetchall():
        total = dict(zip(FIELDS, values, strict=True))
        out[child] = total | {"tokens": sum(values), "turns": turns}
    return out
