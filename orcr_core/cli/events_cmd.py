"""``orcr events``: the store's event log, listed or followed.

Import-light (the client path): it rides ``events.subscribe`` through
:class:`orcr_core.sdk.watch.EventTail`, the same resume-from-the-last-seq protocol
as ``agent wait`` and ``top``, so ``--follow`` prints each event once across a
server restart.
"""

from __future__ import annotations

import json as jsonlib
import re
import time

import click

_SEQ = re.compile(r"\d+")
#: how long a listing waits for the rows it knows exist before it stops
_LIST_WAIT = 10.0


def _since(ctx, param, value):
    """``--since``: a seq (a bare integer) or a duration back from now (10m, 2h)."""
    if value is None:
        return None
    if _SEQ.fullmatch(value):
        return ("seq", int(value))
    from orcr_core.config.values import ConfigError, parse_duration

    try:
        seconds = parse_duration(value, "--since")
    except ConfigError:
        seconds = -1
    if seconds <= 0:
        raise click.BadParameter(
            f"{value!r} is neither an event seq nor a duration: give a seq (e.g. 1200) "
            "or a duration back from now with a unit (ms, s, m, h, d), e.g. 10m, 2h"
        )
    return ("ago", seconds)


def _matches(ev: dict, prefix: str | None, kinds: tuple[str, ...]) -> bool:
    if kinds and not any(ev["kind"] == k or ev["kind"].startswith(k + ".") for k in kinds):
        return False
    if prefix:
        path = ev["data"].get("path") or ev["data"].get("name")
        if not isinstance(path, str) or not (path == prefix or path.startswith(prefix + "/")):
            return False
    return True


def _line(ev: dict) -> str:
    from datetime import datetime

    ts = datetime.fromtimestamp(ev["ts"]).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    data = dict(ev["data"])
    where = data.pop("path", None) or data.get("name") or "-"
    fields = " ".join(
        f"{k}={v if isinstance(v, str) else jsonlib.dumps(v, separators=(',', ':'))}"
        for k, v in data.items()
        if v is not None
    )
    if len(fields) > 160:
        fields = fields[:159] + "…"
    return f"{ev['seq']:>7}  {ts}  {where}  {ev['kind']}" + (f"  {fields}" if fields else "")


@click.command()
@click.argument("prefix", required=False)
@click.option(
    "--since",
    metavar="SEQ|DURATION",
    callback=_since,
    help="Events after this seq, or from this long ago (10m, 2h). "
    "Default: every event kept, or with --follow only new ones.",
)
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    metavar="K",
    help="Only this kind (agent.status) or family (agent, pane, loop); repeatable.",
)
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events until interrupted.")
@click.option("--json", "json_", is_flag=True, help="One event object per line (JSON lines).")
def events(prefix, since, kinds, follow, json_):
    """The event log: every state change the store recorded, oldest first.

    Each line is SEQ TIME PATH KIND and the event's data. PREFIX keeps the
    events of agents at or under that path (and of the loop of that name).
    --follow prints each event exactly once, resuming from the last seq it
    printed when the server restarts. Retention keeps events.retention rows but
    never deletes what a connected follower has not read, nor anything in the
    first events.resume_grace (30s) of a new server, while followers reconnect.
    Events it deleted while a follower was away longer (stopped, or not running)
    cannot be printed; a line on stderr names their seqs, and the follow goes on
    from the oldest row kept.
    A loop's own log is `orcr loop logs NAME`, a task's history
    `orcr tasks show ID` (docs/socket-api.md#events lists the kinds).
    """
    from orcr_core.cli.errors import OrcrCliError
    from orcr_core.sdk.client import Client, ServerError
    from orcr_core.sdk.watch import EventTail

    if prefix is not None:
        prefix = prefix.rstrip("/")
        if not prefix:
            raise click.BadParameter("give a path such as review or review/a", param_hint="PREFIX")
    for k in kinds:
        if not k.strip(".") or k != k.strip():
            raise click.BadParameter(
                f"{k!r} is not an event kind: give one such as agent.status, or a family such as agent",
                param_hint="--kind",
            )

    def gap(first: int, kept: int) -> None:
        click.echo(
            f"events {first}..{kept - 1} were deleted by retention before they were read", err=True
        )

    with Client() as c:  # starts the server when none runs, as any verb does
        socket_path = c.path
        start = 0
        if since and since[0] == "seq":
            start = since[1]
        elif follow and since is None:
            try:
                start = c.call("server.status")["last_seq"]
            except ServerError as exc:  # a sandboxed agent's socket: from its own last
                if exc.code != "forbidden":
                    raise
                start = None
    after = time.time() - since[1] if since and since[0] == "ago" else None
    tail = EventTail(socket_path, start or 0, on_gap=None if start is None else gap)
    tail.subscribe()
    if start is None:  # (the events up to it are dropped as already seen)
        tail.cursor = tail.last_seq
    end = tail.last_seq
    try:
        while follow or tail.cursor < end:
            ev = tail.next(None if follow else _LIST_WAIT)
            if ev is None:
                if follow:
                    continue
                raise OrcrCliError(f"the event log stopped at seq {tail.cursor} before {end}")
            if (after is not None and ev["ts"] < after) or not _matches(ev, prefix, kinds):
                continue
            click.echo(jsonlib.dumps(ev) if json_ else _line(ev))
    except KeyboardInterrupt:
        pass
    finally:
        tail.close()
