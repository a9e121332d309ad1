"""``orcr usage``: what the agents' turns spent, summed from the store (docs/usage.md)."""

from __future__ import annotations

import json as jsonlib
import time

import click

from orcr_core.cli.errors import ExitCode, OrcrCliError
from orcr_core.cli.output import echo_table, sdk

BY = ("path", "provider", "model", "loop", "day")


def parse_since(value: str | None, now: float | None = None) -> float | None:
    """``--since``: a duration ago (``1h``, ``2d``) or a local time (``2026-12-01``,
    ``2026-12-01T08:00``, ISO 8601 with an offset too)."""
    if value is None:
        return None
    from datetime import datetime

    from orcr_core.config import ConfigError, parse_duration

    now = time.time() if now is None else now
    try:
        return now - parse_duration(value, "--since")
    except ConfigError:
        pass
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        raise OrcrCliError(
            f"--since {value!r} is neither a duration (30m, 1h, 2d) nor a time "
            "(2026-12-01, 2026-12-01T08:00, ISO 8601)",
            ExitCode.USAGE,
        ) from None


def _n(v: int) -> str:
    return str(v) if v < 10_000 else f"{v / 1000:.1f}k" if v < 1_000_000 else f"{v / 1e6:.2f}M"


def _cost(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


@click.command(name="usage")
@click.argument("prefix", required=False)
@click.option(
    "--since", metavar="DUR|TIME", help="Only turns ended since then (1h, 2d, 2026-12-01)."
)
@click.option(
    "--by", type=click.Choice(BY), help="Group by agent path, provider, model, loop or day."
)
@click.option("--json", "json_", is_flag=True, help="Print JSON.")
def usage(prefix, since, by, json_):
    """Tokens the agents' turns spent, summed from the store.

    PREFIX is a path scope: 'nightly' is a loop's whole cost, 'tasks/rest' a
    queue's. Cache reads and writes are counted apart from input. COST is an
    estimate from the [[usage.prices]] you set (docs/usage.md), '-' without one.
    """
    since_at = parse_since(since)
    with sdk() as orcr:
        res = orcr.usage(prefix=prefix, since=since_at, by=by)
    if json_:
        click.echo(jsonlib.dumps(res))
        return
    cols = (by.upper() if by else "SCOPE", "TURNS", "AGENTS", "INPUT", "OUTPUT", "CACHE-READ")
    cols += ("CACHE-WRITE", "TOKENS", "COST")
    shown = [*res["groups"], res["total"]] if by else [{**res["total"], "key": prefix or "all"}]
    echo_table(
        cols,
        [
            (
                g["key"],
                str(g["turns"]),
                str(g["agents"]),
                *(_n(g[f]) for f in ("input", "output", "cache_read", "cache_write", "tokens")),
                _cost(g["cost"]),
            )
            for g in shown
        ],
    )
